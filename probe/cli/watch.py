"""``probe watch``: the staging leak watchdog, for a running process or a command it launches.

A thin verb: options -> ``WatchConfig`` -> the process (attached or launched) ->
``Monitor`` -> ``run_watch`` (``probe.watchdog.session``), which owns the loop's
additions, the verdict and the exit status.
"""

from __future__ import annotations

import sys
from dataclasses import asdict
from pathlib import Path
from typing import Any

import click

from probe.cli.options import MAX_SECONDS
from probe.errors import ProbeError
from probe.printable import printable
from probe.watchdog.config import EXIT_LEAK, WatchConfig
from probe.watchdog.limits import parse_duration, parse_size

__all__ = ["watch_command"]


def _duration(ctx: click.Context, param: click.Parameter, value: str | None) -> float | None:
    if value is None:
        return None
    try:
        seconds = parse_duration(value)
    except ValueError as e:
        raise click.BadParameter(str(e)) from e
    if seconds <= 0 and param.name != "warmup":
        raise click.BadParameter("must be greater than 0")
    if seconds > MAX_SECONDS:
        raise click.BadParameter(f"{value!r} is longer than a year")
    return seconds


def _size(ctx: click.Context, param: click.Parameter, value: str | None) -> int | None:
    if value is None:
        return None
    try:
        return parse_size(value)
    except ValueError as e:
        raise click.BadParameter(str(e)) from e


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
    help="The slow test's window: a leak of 10 KB/s shows within it. The first one is "
    "judged after warm-up plus a window and a half (against the half before it).",
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
    "--allow-webhook-host",
    "webhook_hosts_allowed",
    multiple=True,
    metavar="HOST",
    help="Let the webhook post to HOST although it is link-local or a cloud-metadata "
    "address (refused otherwise: those hand out the machine's credentials). Repeatable.",
)
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
    help=f"Exit {EXIT_LEAK} as soon as a leak is found: memory that grows, or threads or "
    "open descriptors that pile up (a launched command is stopped).",
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
    "'auto' counts the gc at start and exit and traces from a leak's alert until the sites "
    "follow it; 'always' traces from the start (growth seen only under it: undetermined).",
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
    webhook_hosts_allowed: tuple[str, ...],
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
    (--metrics-port), what holds it (threads or descriptors piling up with it, small
    Python objects, or large and native memory) and, for a Python command, the
    allocation sites, object types and containers that grow. Threads or open
    descriptors that pile up get an alert of their own, with the time to the process's
    descriptor limit. Exit status: 0 (or the command's own) when the process ends; 3
    with --fail-on-leak once a leak is found; 2 for bad input.
    """
    from probe.watchdog.session import check_writable

    if (pid is None) == (not command):
        raise ProbeError("give either --pid PID or a command after --, not both or neither")
    config = WatchConfig.build(
        interval=interval,
        window=window,
        warmup=warmup,
        limit=limit,
        metric=metric,
        alert_webhook=alert_webhook,
        webhook_hosts_allowed=webhook_hosts_allowed,
        metrics_port=metrics_port,
        metrics_host=metrics_host,
        attribution=attribution,
        frames=frames,
        out=out,
        fail_on_leak=fail_on_leak,
        duration=duration,
        status_every=None if quiet else status_every,
    )
    if config.out is not None:
        check_writable(config.out)

    def say(msg: str) -> None:
        # messages carry the watched command's strings: control characters escaped
        click.echo(printable(f"probe watch: {msg}"), err=True)

    status = (lambda msg: None) if quiet else say
    sys.exit(_watch(config, pid, list(command), say, status))


def _watch(config: WatchConfig, pid: int | None, argv: list[str], say: Any, status: Any) -> int:
    import logging

    from probe.reports.leak import watching_text
    from probe.watchdog.alerts import Metrics
    from probe.watchdog.limits import memory_limit
    from probe.watchdog.monitor import Monitor
    from probe.watchdog.session import alert_sinks, run_watch
    from probe.watchdog.target import attach, launch

    logging.basicConfig(format="%(message)s")
    sinks = alert_sinks(config)
    metrics = target = None
    try:
        if config.metrics_port is not None:  # before launching: a port in use stops us here
            metrics = Metrics(config.metrics_port, config.metrics_host)
        target = attach(pid, config) if pid is not None else launch(argv, config)
        if metrics is not None:
            metrics.watch(target.pid)
        process = target.describe(config.metric)
        limit = memory_limit(config.limit_bytes, "--limit", target.pid)
        monitor = Monitor.from_config(
            config,
            target.read_memory,
            process,
            limit=limit,
            sinks=sinks,
            metrics=metrics,
            attribution=target.link,
            read_counts=target.read_counts,
        )
        url = f"http://{config.metrics_host}:{metrics.port}/metrics" if metrics else None
        status(watching_text(process, asdict(config.detector), limit, url))
        return run_watch(config, target, monitor, say, status)
    finally:
        if target is not None:
            target.close()
        for sink in sinks:
            sink.close(10.0)
        if metrics is not None:
            metrics.close()
