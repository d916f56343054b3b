"""``probe run``: run a script or module under collection, then diagnose it."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from probe.cli.options import MAX_SECONDS, CollectorUrl, FiniteFloat, Latency, need_opentelemetry
from probe.errors import ProbeError
from probe.pids import HELPER_ENV
from probe.rundir.writer import prepare_run_dir
from probe.samplers.torch_window_settings import TorchWindowSettings
from probe.target import default_run_dir, resolve_target

if TYPE_CHECKING:
    from probe.launcher import Outcome

__all__ = ["run_command"]


# Bounds of the numeric options (refused before anything starts: probe.cli.options).
# A tick of the stack sampler cost ~0.6 ms of CPU with a dozen threads (search_flask's
# run: 0.39 s for 522 ticks): at 1,000 Hz that is most of a core.
_MAX_HZ = 1000.0


@click.command(
    "run",
    short_help="Run a script or module under collection and diagnose it.",
    context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False},
)
@click.option(
    "-m", "module", metavar="MODULE", help="Run a library module as a script (like python -m)."
)
@click.option(
    "--out",
    "-o",
    type=click.Path(path_type=Path),
    metavar="DIR",
    help="Run directory to write. [default: .probe/runs/<UTC time>-<name>/]",
)
@click.option(
    "--duration",
    type=FiniteFloat(0, MAX_SECONDS),
    metavar="SECONDS",
    help="Stop the target after this long, as Ctrl-C would (then SIGTERM, then the "
    "process ended: see --stop-grace). meta.json's ended_by says which it took.",
)
@click.option(
    "--stop-grace",
    type=FiniteFloat(0, 3600),
    default=5.0,
    show_default=True,
    metavar="SECONDS",
    help="With --duration: a target still running this long after the deadline's Ctrl-C "
    "gets SIGTERM; this long after that, its run is closed and the process ended. Its "
    "non-daemon threads get as long to finish before they are cut short. With --load: "
    "a service still running this long after the load's Ctrl-C gets SIGTERM.",
)
@click.option(
    "--hz",
    type=FiniteFloat(0, _MAX_HZ),
    default=100.0,
    show_default=True,
    help="Stack samples per second.",
)
@click.option(
    "--sampler-share",
    type=FiniteFloat(0, 1, low_open=False),
    default=0.05,
    show_default=True,
    help="The most of one core the stack sampler may take: where a sample costs more (it "
    "grows with the threads that ran), samples come less often than --hz. meta.json's "
    "collector.stack_pacing says by how much. 0: always --hz.",
)
@click.option(
    "--resource-hz",
    type=FiniteFloat(0, 100),
    default=10.0,
    show_default=True,
    help="Process, host and GPU readings per second.",
)
@click.option(
    "--memory",
    is_flag=True,
    help="Trace allocations (tracemalloc snapshots, gc counts) to hunt leaks. "
    "Slows allocation-heavy code several times.",
)
@click.option(
    "--memory-interval",
    type=FiniteFloat(0, MAX_SECONDS),
    default=5.0,
    show_default=True,
    metavar="SECONDS",
    help="Seconds between memory snapshots.",
)
@click.option(
    "--memory-frames",
    type=click.IntRange(1, 100),
    default=1,
    show_default=True,
    metavar="N",
    help="Frames kept per allocation traceback with --memory. 1 names the allocating "
    "line; each frame more costs (W1: ~5x at 1, ~18x at 5).",
)
@click.option(
    "--trace",
    "trace_s",
    type=FiniteFloat(0, MAX_SECONDS),
    metavar="SECONDS",
    help="Also record a full viztracer trace of the first SECONDS (trace.json, "
    "opens in Perfetto). Costly: keep it short.",
)
@click.option(
    "--switch-interval",
    type=FiniteFloat(0, 1, low_open=False),
    default=0.0001,
    show_default=True,
    metavar="SECONDS",
    help="GIL switch interval while profiling: bounds how long the sampler waits for the "
    "GIL after each tick (and, where stacks cannot be read at the tick, how far a sample "
    "can drift toward a GIL-releasing call). While the target's own threads contend for "
    "the GIL, 1 ms instead (at most the target's own). 0 keeps the target's own throughout.",
)
@click.option(
    "--torch-windows",
    type=click.IntRange(0, 1000),
    default=3,
    show_default=True,
    metavar="N",
    help="When the target uses PyTorch: torch.profiler windows (every thread's ops with "
    "shapes; CUDA kernels and copies when it uses CUDA) to take, the first after its "
    "first forward pass plus a warm-up. Written to torch/window-N.json (Perfetto opens "
    "them). 0 takes none.",
)
@click.option(
    "--torch-window",
    "torch_window_s",
    type=FiniteFloat(0, MAX_SECONDS, low_open=True),
    default=TorchWindowSettings.window_s,
    show_default=True,
    metavar="SECONDS",
    help="How much of the target's CPU time each torch.profiler window holds: it stays "
    "open until the target's Python threads have run this long (at most "
    f"{TorchWindowSettings.longest:g} times as long in wall time). Closing one stops the "
    "target a few times as long (torch builds and writes the window's events): the "
    "first window is taken whatever the run's length, the next only once the windows so "
    "far and it cost at most "
    f"{TorchWindowSettings.budget:.1%} of the time since the first opened.",
)
@click.option(
    "--torch-every",
    "torch_every_s",
    type=FiniteFloat(0, MAX_SECONDS, low_open=True),
    default=10.0,
    show_default=True,
    metavar="SECONDS",
    help="The least time from the start of one torch.profiler window to the next.",
)
@click.option(
    "--load",
    "load_spec",
    type=click.Path(path_type=Path, dir_okay=False, exists=True),
    metavar="SPEC",
    help="Drive the service while it runs, then stop it: SPEC is a probe load mix file "
    "with url, concurrency or rate, duration and warmup at its top level. The load runs "
    "in a process of its own once the URL listens; the clients' latency is printed beside "
    "the server's time for the same requests.",
)
@click.option(
    "--sla",
    "sla_s",
    type=Latency(),
    metavar="LATENCY",
    help="The p99 a served app must answer within (200ms, 0.5s): the capacity analysis "
    "gives the load that keeps p99 within it and the goodput (requests within it a second).",
)
@click.option(
    "--no-workers",
    is_flag=True,
    help="Record the profiled process only. By default every Python child process it "
    "forks or spawns (gunicorn's and uvicorn's workers, a process pool's) records itself "
    "into workers/<pid>/ of the run directory, merged into the analysis.",
)
@click.option(
    "--no-http-spans",
    is_flag=True,
    help="Leave served web apps unwrapped. By default an app served by uvicorn, gunicorn, "
    "hypercorn, waitress, Werkzeug (Flask's server) or Django's runserver --noreload is "
    "wrapped in middleware: each HTTP request becomes a probe.request span named by method "
    "and route template, with its phases and, on an asyncio loop, its worst loop lag. "
    "That costs ~20-30 us of the server's CPU a request (README, Performance): on routes "
    "that answer in well under a millisecond, without it probe costs what py-spy does.",
)
@click.option(
    "--log-spans", is_flag=True, help="Log one JSON line per span on the 'probe.spans' logger."
)
@click.option(
    "--prometheus-port",
    type=click.IntRange(1, 65535),
    metavar="PORT",
    help="Serve live metrics for Prometheus while the run goes on: span and request "
    "latency histograms per endpoint and stage, requests by status, probe's own CPU, and "
    "the verdict on the run so far, remade every 10 s or more on idle CPU (not with "
    "--no-report) (http://HOST:PORT/metrics).",
)
@click.option(
    "--prometheus-host",
    default="127.0.0.1",
    show_default=True,
    metavar="HOST",
    help="Where --prometheus-port listens (0.0.0.0 exposes it beyond this host).",
)
@click.option(
    "--otlp",
    is_flag=True,
    help="Stream the run's spans to an OpenTelemetry collector as they end (a request's "
    "tree a second or so after it): requests as SERVER spans with the HTTP conventions, "
    "stages as their children, the same ids `probe export --format otlp` sends. To "
    "--otlp-endpoint, else the SDK's standard $OTEL_EXPORTER_OTLP_TRACES_ENDPOINT or "
    "$OTEL_EXPORTER_OTLP_ENDPOINT, else http://localhost:4318. An unreachable collector "
    "is retried with back-off and never holds the service up.",
)
@click.option(
    "--otlp-endpoint",
    type=CollectorUrl(),
    metavar="URL",
    help="The collector's OTLP/HTTP base URL (/v1/traces is added); implies --otlp.",
)
@click.option("--no-gpu", is_flag=True, help="Do not query NVML for GPUs.")
@click.option(
    "--no-report", is_flag=True, help="Write the run directory only: no diagnosis, no verdict."
)
@click.argument("target", nargs=-1, type=click.UNPROCESSED, metavar="SCRIPT [ARGS]...")
def run_command(
    module: str | None,
    out: Path | None,
    duration: float | None,
    stop_grace: float,
    hz: float,
    sampler_share: float,
    resource_hz: float,
    memory: bool,
    memory_interval: float,
    memory_frames: int,
    trace_s: float | None,
    switch_interval: float,
    torch_windows: int,
    torch_window_s: float,
    torch_every_s: float,
    load_spec: Path | None,
    sla_s: float | None,
    no_workers: bool,
    no_http_spans: bool,
    log_spans: bool,
    prometheus_port: int | None,
    prometheus_host: str,
    otlp: bool,
    otlp_endpoint: str | None,
    no_gpu: bool,
    no_report: bool,
    target: tuple[str, ...],
) -> None:
    """Run SCRIPT (or -m MODULE) with its ARGS under low-overhead collection.

    \b
    Records stack samples split into on-CPU and waiting (and what was waited
    on), process-tree and GPU resources, and probe.stage/probe.span spans, into
    a run directory; then writes diagnosis.json and prints the verdict. The target's exit
    status is probe's exit status.

    \b
    Examples:
      probe run service.py --port 8000
      probe run --duration 60 -m my_service.main
      probe run --memory --out runs/leak leaky.py
    """
    if module:
        script, args = None, target
    elif target:
        script, args = target[0], target[1:]
    else:
        raise click.UsageError("give a SCRIPT to run, or -m MODULE")
    if switch_interval < 0:
        raise click.BadParameter("must be 0 or more", param_hint="--switch-interval")
    resolved = resolve_target(script, module, tuple(args))
    run_dir = prepare_run_dir(out if out is not None else default_run_dir(resolved))
    if log_spans:
        _ensure_span_log_handler()
    if load_spec is not None:
        from probe.load.mix import read_spec
        from probe.load.target import listening, parse_target

        _, spec = read_spec(load_spec)  # a bad spec is an error before anything runs
        url = parse_target(str(spec["url"]))
        if listening(url):  # the load would drive whatever holds the port
            raise ProbeError(
                f"something already listens on {url.host}:{url.port}: the load would "
                "drive it, not the service; stop it or give the service (and the spec's url) "
                "a free port"
            )

    prometheus = None
    if prometheus_port is not None:
        prometheus = _free_port(prometheus_host, prometheus_port)
    stream_to = None  # the collector's URL; "": the SDK's standard endpoint
    if otlp or otlp_endpoint:
        need_opentelemetry("--otlp")
        stream_to = otlp_endpoint or ""

    from probe.cli.sidecar import Sidecar

    sidecar = Sidecar.spawn(
        run_dir,
        resource_hz=resource_hz,
        gpu=not no_gpu,
        report=not no_report,
        prometheus=prometheus,
        otlp=stream_to,
    )
    if (prometheus is not None or stream_to is not None) and not sidecar.running:
        print("probe: no sidecar: no live metrics or spans for this run", file=sys.stderr)
    # The collector imported once the helpers are starting: the sidecar's start-up
    # (~60 ms) is what a short run's end waits for, and these imports (~30 ms) overlap it
    from probe.launcher import run
    from probe.session import Settings

    settings = Settings(
        hz=hz,
        sampler_share=sampler_share,
        resource_hz=resource_hz,
        memory=memory,
        memory_interval_s=memory_interval,
        memory_frames=memory_frames,
        gpu=not no_gpu,
        log_spans=log_spans,
        http_spans=not no_http_spans,
        follow_workers=not no_workers,
        sla_s=sla_s,
        switch_interval_s=switch_interval,
        torch_windows=TorchWindowSettings(
            windows=torch_windows,
            window_s=torch_window_s,
            every_s=max(torch_every_s, torch_window_s),
        ),
    )
    loader = _start_load(run_dir, load_spec, stop_grace) if load_spec is not None else None
    outcome = run(
        resolved,
        run_dir,
        settings,
        duration_s=duration,
        stop_grace_s=stop_grace,
        # the target ignored SIGINT and SIGTERM: its run is closed, then the launcher
        # ends the process
        on_kill=lambda killed: sidecar.finish(report=not no_report),
        trace_s=trace_s,
        argv=["probe", *sys.argv[1:]],
        sample_tree=not sidecar.running,
    )
    load_figures = None
    if loader is not None and not outcome.forked_child:
        outcome, load_figures = _finish_load(loader, run_dir, outcome)
    if not outcome.forked_child:
        sidecar.finish(report=not no_report)
    if loader is not None and not outcome.forked_child:
        _print_load(run_dir, load_figures, outcome.ended_by)
    if outcome.threads_cut_short:
        # the target's non-daemon threads outlived --duration: the interpreter would wait
        # for them for ever (the run directory and the verdict are complete)
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(outcome.status)
    sys.exit(outcome.status)


def _free_port(host: str, port: int) -> str:
    """``host:port`` for the live metrics, checked free before anything runs."""
    import socket

    try:
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        with socket.socket(family, socket.SOCK_STREAM) as s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            s.bind((host, port))
    except OSError as e:
        raise ProbeError(
            f"--prometheus-port {port}: cannot listen on {host}: {e.strerror}"
        ) from None
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def _ensure_span_log_handler() -> None:
    import logging

    logger = logging.getLogger("probe.spans")
    logger.setLevel(logging.INFO)
    if not logger.handlers and not logging.getLogger().handlers:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("%(message)s"))
        logger.addHandler(handler)


def _start_load(run_dir: Path, spec: Path, grace_s: float) -> subprocess.Popen[bytes]:
    """The load's process (probe.load.runner): it waits for the service, drives it, and
    stops it with SIGINT (SIGTERM where that is ignored, or has not ended the target
    ``grace_s`` later). In a session of its own: a Ctrl-C at the terminal is for the
    service, and the load is ended from here."""
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "probe.load.runner",
            str(run_dir),
            str(spec),
            str(os.getpid()),
            str(grace_s),
        ],
        stdin=subprocess.DEVNULL,
        start_new_session=True,
        env={**os.environ, HELPER_ENV: "load"},  # its CPU is not the service's
    )


def _finish_load(
    loader: subprocess.Popen[bytes], run_dir: Path, outcome: Outcome
) -> tuple[Outcome, dict[str, Any] | None]:
    """End the load's process with the run; its figures (None if it wrote none), and the
    outcome: a service the load stopped as planned (its SIGINT) ended as it should
    (status 0); one stopped because the load could not run, with status 2."""
    if loader.poll() is None:
        loader.terminate()
    try:
        loader.wait(10)
    except subprocess.TimeoutExpired:
        loader.kill()
        loader.wait()
    from probe.load.runner import FIGURES

    try:
        figures = json.loads((run_dir / FIGURES).read_text())
    except (OSError, ValueError):
        return outcome, None
    if "error" in figures:  # the service was stopped for it: the run is complete, not good
        return dataclasses.replace(outcome, status=2), figures
    if outcome.ended_by in ("SIGINT", "completed", "sys.exit") and outcome.status in (0, 130):
        return dataclasses.replace(outcome, status=0), figures
    if outcome.ended_by == "SIGTERM" and figures.get("stopped_with") == "SIGTERM":
        return dataclasses.replace(outcome, status=0), figures  # the load's own stop
    return outcome, figures


def _print_load(run_dir: Path, figures: dict[str, Any] | None, ended_by: str) -> None:
    from probe.load.runner import REQUESTS

    if figures is None:
        click.echo("probe: error: the load wrote no figures", err=True)
        return
    # the load sends SIGTERM also where the run was still closing after the grace, when
    # the target had ended on the SIGINT: then SIGTERM is ignored and ended_by says so
    if figures.get("stopped_with") == "SIGTERM" and ended_by == "SIGTERM":
        click.echo(
            "probe: the service did not end on SIGINT (ignored, or not within --stop-grace): "
            "the load stopped it with SIGTERM",
            err=True,
        )
    if "error" in figures:
        click.echo(f"probe: error: the load did not run: {figures['error']}", err=True)
        return
    import pandas as pd

    from probe.analyzers.load_split import client_server_split
    from probe.load.figures import LoadFigures
    from probe.reports.load import LoadText, split_lines
    from probe.rundir.reader import load

    click.echo("")
    click.echo(LoadText.from_figures(LoadFigures.from_dict(figures)).render())
    try:
        requests = pd.read_parquet(run_dir / REQUESTS)
        spans = load(run_dir).tables["spans"]
    except (OSError, ProbeError, ValueError) as e:
        click.echo(f"probe: the client/server split is missing: {e}", err=True)
        return
    click.echo("\n".join(split_lines(client_server_split(requests, spans))))
