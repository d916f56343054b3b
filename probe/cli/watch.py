"""``probe watch``: the staging leak watchdog, for a running process or a command it launches."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import click

from probe.errors import ProbeError
from probe.watchdog.limits import memory_limit, parse_duration, parse_size

__all__ = ["watch_command"]

EXIT_LEAK = 3
_EARLY_READINGS_S = 30.0
_BOOT_DIR = Path(__file__).resolve().parent.parent / "watchdog" / "_boot"


def _duration(ctx: click.Context, param: click.Parameter, value: str | None) -> float | None:
    if value is None:
        return None
    try:
        seconds = parse_duration(value)
    except ValueError as e:
        raise click.BadParameter(str(e)) from e
    if seconds <= 0 and param.name != "warmup":
        raise click.BadParameter("must be greater than 0")
    return seconds


def _size(ctx: click.Context, param: click.Parameter, value: str | None) -> int | None:
    if value is None:
        return None
    try:
        return parse_size(value)
    except ValueError as e:
        raise click.BadParameter(str(e)) from e


def _is_python(argv: list[str]) -> bool:
    exe = os.path.basename(argv[0])
    return bool(re.fullmatch(r"python[0-9.]*", exe)) or os.path.realpath(
        shutil.which(argv[0]) or argv[0]
    ) == os.path.realpath(sys.executable)


def _memory_reader(proc: Any, metric: str) -> Any:
    import psutil

    def read() -> float | None:
        try:
            if metric == "uss":
                value = float(proc.memory_full_info().uss)
            else:
                value = float(proc.memory_info().rss)
        except (psutil.NoSuchProcess, psutil.ZombieProcess, psutil.AccessDenied):
            return None
        # a process tearing down its address space reads 0: it is gone, not freed
        return value if value > 0 else None

    return read


def _open_process(pid: int, metric: str) -> Any:
    import psutil

    try:
        proc = psutil.Process(pid)
        proc.memory_full_info() if metric == "uss" else proc.memory_info()
        return proc
    except psutil.NoSuchProcess as e:
        raise ProbeError(f"no process with pid {pid}") from e
    except psutil.ZombieProcess as e:
        raise ProbeError(f"pid {pid} has exited (a zombie): nothing to watch") from e
    except psutil.AccessDenied as e:
        raise ProbeError(
            f"may not read the memory of pid {pid} (permission denied: run probe watch as "
            "the process's user or as root)"
        ) from e


def _mib(n: float | None) -> str:
    return "?" if n is None else f"{n / 2**20:,.1f} MiB"


@click.command(
    "watch",
    short_help="Watch a process's memory for leaks (staging watchdog).",
    context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False},
)
@click.option("--pid", type=int, metavar="PID", help="Watch this running process (any program).")
@click.option(
    "--interval",
    default="1s",
    show_default=True,
    callback=_duration,
    metavar="DURATION",
    help="Time between memory readings.",
)
@click.option(
    "--window",
    default="30m",
    show_default=True,
    callback=_duration,
    metavar="DURATION",
    help="The slow test's window: a leak of 10 KB/s shows within it.",
)
@click.option(
    "--warmup",
    default="10m",
    show_default=True,
    callback=_duration,
    metavar="DURATION",
    help="Start-up time not judged (imports, caches and pools filling).",
)
@click.option(
    "--limit",
    callback=_size,
    metavar="SIZE",
    help="Memory limit for the time-to-limit estimate (2GiB, 512MB). "
    "[default: the process's cgroup memory limit, if any]",
)
@click.option(
    "--metric",
    type=click.Choice(["rss", "uss"]),
    default="rss",
    show_default=True,
    help="RSS, or USS (memory only this process holds; costlier to read).",
)
@click.option("--alert-webhook", metavar="URL", help="POST each alert here as JSON.")
@click.option(
    "--metrics-port",
    type=click.IntRange(0, 65535),
    metavar="PORT",
    help="Serve Prometheus gauges on this port (0: any free port).",
)
@click.option(
    "--metrics-host",
    default="127.0.0.1",
    show_default=True,
    metavar="HOST",
    help="Address the metrics endpoint binds.",
)
@click.option(
    "--fail-on-leak",
    is_flag=True,
    help=f"Exit {EXIT_LEAK} as soon as a leak is found (a launched command is stopped).",
)
@click.option(
    "--out",
    type=click.Path(path_type=Path),
    metavar="DIR",
    help="Write the leak report here (leak.json, leak.html) at the end and on each alert.",
)
@click.option(
    "--attribution",
    type=click.Choice(["auto", "always", "off"]),
    default="auto",
    show_default=True,
    help="For a Python command: tracemalloc sites, gc types and growing containers; "
    "'auto' counts the gc at start and exit and traces from a leak's alert (the sites "
    "follow it); 'always' traces from the start (growth seen only under it: undetermined).",
)
@click.option(
    "--frames",
    type=click.IntRange(1, 100),
    default=8,
    show_default=True,
    help="Traceback depth of the attribution's allocation sites.",
)
@click.option(
    "--duration", callback=_duration, metavar="DURATION", help="Stop watching after this long."
)
@click.option(
    "--status-every",
    default="60s",
    show_default=True,
    callback=_duration,
    metavar="DURATION",
    help="Time between status lines on stderr.",
)
@click.option("--quiet", "-q", is_flag=True, help="No status lines; alerts and the verdict only.")
@click.argument("command", nargs=-1, type=click.UNPROCESSED)
def watch_command(
    pid: int | None,
    interval: float,
    window: float,
    warmup: float,
    limit: int | None,
    metric: str,
    alert_webhook: str | None,
    metrics_port: int | None,
    metrics_host: str,
    fail_on_leak: bool,
    out: Path | None,
    attribution: str,
    frames: int,
    duration: float | None,
    status_every: float,
    quiet: bool,
    command: tuple[str, ...],
) -> None:
    """Watch a process's memory and say, with a confidence, whether it leaks.

    \b
      probe watch --pid PID [OPTIONS]
      probe watch [OPTIONS] -- CMD [ARGS]...

    Reads RSS (or USS) every --interval and judges it with robust trend tests that
    ignore warm-up, garbage-collection saw-tooth, cache flushes and one-off steps. On a
    leak: one JSON log line, a webhook POST (--alert-webhook), Prometheus gauges
    (--metrics-port) and, for a Python command, the allocation sites, object types and
    containers that grow. Exit status: 0 (or the command's own) when the process ends;
    3 with --fail-on-leak once a leak is found; 2 for bad input.
    """
    from probe.analyzers.leaks import DetectorSettings
    from probe.watchdog.alerts import LogAlert, Metrics, WebhookAlert
    from probe.watchdog.attribution import AgentLink
    from probe.watchdog.monitor import Monitor, attribution_interval, traced_start_s

    if (pid is None) == (not command):
        raise ProbeError("give either --pid PID or a command after --, not both or neither")
    try:
        settings = DetectorSettings(interval_s=interval, window_s=window, warmup_s=warmup)
    except ValueError as e:
        raise ProbeError(str(e)) from e
    if out is not None:
        _check_writable(out)
    echo = (
        (lambda msg: None) if quiet else (lambda msg: click.echo(f"probe watch: {msg}", err=True))
    )

    import logging

    logging.basicConfig(format="%(message)s")
    sinks: list[Any] = [LogAlert()]
    if alert_webhook:
        sinks.append(WebhookAlert(alert_webhook))
    metrics = None
    agent_dir: Path | None = None
    link: AgentLink | None = None
    child: subprocess.Popen[bytes] | None = None
    try:
        if pid is not None:
            proc = _open_process(pid, metric)
            watched = {"pid": pid, "name": proc.name(), "cmdline": _cmdline(proc)}
        else:
            env = dict(os.environ)
            argv = list(command)
            python = _is_python(argv) and attribution != "off"
            if python:
                agent_dir = Path(tempfile.mkdtemp(prefix="probe-watch-"))
                env["PYTHONPATH"] = os.pathsep.join(
                    [str(_BOOT_DIR), *filter(None, [env.get("PYTHONPATH")])]
                )
                env["PROBE_WATCH_AGENT"] = json.dumps(
                    {
                        "dir": str(agent_dir),
                        "snapshot_s": attribution_interval(settings),
                        "frames": frames,
                    }
                )
                link = AgentLink(agent_dir)
                if traced_start_s(attribution, settings) > 0:
                    link.arm()  # from the service's first line
            if metrics_port is not None:  # before launching: a port in use stops us here
                metrics = Metrics(metrics_port, metrics_host)
            try:
                child = subprocess.Popen(argv, env=env)
            except OSError as e:
                raise ProbeError(f"cannot run {argv[0]!r}: {e.strerror or e}") from e
            if link is not None:
                link.pid = child.pid
            proc = _open_process(child.pid, metric)
            watched = {"pid": child.pid, "name": os.path.basename(argv[0]), "cmdline": argv}
        watched["metric"] = metric
        if metrics_port is not None:
            metrics = metrics or Metrics(metrics_port, metrics_host)
            metrics.watch(watched["pid"])
        limit, limit_source = memory_limit(limit, "--limit", watched["pid"])
        monitor = Monitor(
            _memory_reader(proc, metric),
            settings,
            process=watched,
            limit_bytes=limit,
            limit_source=limit_source,
            sinks=sinks,
            metrics=metrics,
            attribution=link,
            traced_until_s=traced_start_s(attribution, settings),
        )
        echo(
            f"watching pid {watched['pid']} ({watched['name']}): {metric} every "
            f"{interval:g} s, warm-up {warmup:g} s, window {window:g} s"
            + (f", limit {_mib(limit)} ({limit_source})" if limit else "")
            + (f", metrics on http://{metrics_host}:{metrics.port}/metrics" if metrics else "")
        )
        code = _watch(monitor, child, settings, fail_on_leak, duration, status_every, echo, out)
        if agent_dir is not None and (agent_dir / "agent.error").exists():
            error = (agent_dir / "agent.error").read_text(errors="replace").strip()
            click.echo(f"probe watch: no attribution from the command: {error}", err=True)
    finally:
        if child is not None and child.poll() is None:
            _stop_child(child)
        for sink in sinks:
            sink.close(10.0)
        if metrics is not None:
            metrics.close()
        if agent_dir is not None:
            shutil.rmtree(agent_dir, ignore_errors=True)
    sys.exit(code)


def _cmdline(proc: Any) -> list[str]:
    try:
        return list(proc.cmdline())
    except Exception:  # noqa: BLE001 -- a name is enough
        return []


def _check_writable(out: Path) -> None:
    try:
        out.mkdir(parents=True, exist_ok=True)
        probe_file = out / ".probe-write-test"
        probe_file.write_text("")
        probe_file.unlink()
    except OSError as e:
        raise ProbeError(f"cannot write the leak report to {out}: {e.strerror or e}") from e


def _stop_child(child: subprocess.Popen[bytes], grace_s: float = 10.0) -> None:
    child.send_signal(signal.SIGTERM)
    try:
        child.wait(grace_s)
    except subprocess.TimeoutExpired:
        child.kill()
        child.wait()


def _watch(
    monitor: Any,
    child: subprocess.Popen[bytes] | None,
    settings: Any,
    fail_on_leak: bool,
    duration: float | None,
    status_every: float,
    echo: Any,
    out: Path | None,
) -> int:
    from probe.reports.leak import alert_text, growth_text, quiet_text, write_leak_report

    stop = threading.Event()
    received: list[int] = []

    def on_signal(signum: int, frame: Any) -> None:
        received.append(signum)
        if child is not None and child.poll() is None:
            child.send_signal(signum)  # the command decides how it stops
        else:
            stop.set()

    previous = {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        next_status = status_every
        announced = attributed = False
        next_at = time.monotonic()
        while not stop.is_set():
            alive = monitor.tick()
            # each alert once, as it was sent: on stderr, and in the report so far
            for done, sent, render in (
                (announced, monitor.alerted, alert_text),
                (attributed, monitor.attributed, lambda v: "what grows:" + growth_text(v)),
            ):
                if sent is not None and not done:
                    verdict = sent.to_dict()
                    click.echo(f"probe watch: {render(verdict)}", err=True)
                    if out is not None:
                        _safe_report(write_leak_report, out, monitor.report(verdict))
            announced = monitor.alerted is not None
            attributed = monitor.attributed is not None
            if announced and fail_on_leak:
                break
            if not alive or (child is not None and child.poll() is not None):
                break
            if duration is not None and monitor.elapsed_s >= duration:
                echo(f"watched for {duration:g} s (--duration): stopping")
                break
            if monitor.elapsed_s >= next_status:
                echo(f"pid {monitor.process['pid']}: {monitor.status_line()}")
                next_status += status_every
            # read ten times a second at first: a command that lives seconds still leaves
            # a series the recorded-run test can judge at its exit
            early = monitor.elapsed_s < _EARLY_READINGS_S
            next_at += min(settings.interval_s, 0.1) if early else settings.interval_s
            stop.wait(max(0.0, next_at - time.monotonic()))
            if next_at < time.monotonic():
                next_at = time.monotonic()
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
    if child is not None and child.poll() is None:
        _stop_child(child)
    final = monitor.verdict(final=True)
    verdict = final.to_dict()
    if final.detected and monitor.alerted is None:
        monitor.alert(final)  # a short life judged at exit
        click.echo(f"probe watch: {alert_text(verdict)}", err=True)
    elif not verdict["detected"]:
        text = quiet_text(verdict, monitor.process["pid"], monitor.elapsed_s, monitor.last_bytes)
        click.echo(f"probe watch: {text}", err=True)
    if out is not None:
        paths = _safe_report(write_leak_report, out, monitor.report(verdict))
        if paths:
            click.echo(f"probe watch: report {paths[1]}", err=True)
    if verdict["detected"] and fail_on_leak:
        return EXIT_LEAK
    if child is not None:
        rc = child.returncode
        return 128 - rc if rc is not None and rc < 0 else int(rc or 0)
    if received:
        return 128 + received[0]
    return 0


def _safe_report(write: Any, out: Path, report: dict[str, Any]) -> Any:
    try:
        return write(out, report)
    except ProbeError as e:
        click.echo(f"probe watch: {e}", err=True)
        return None
