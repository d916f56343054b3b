"""``probe export``: a run directory in the formats other tools open."""

from __future__ import annotations

import logging
import sys
from pathlib import Path
from typing import Any

import click

from probe.cli.options import CollectorUrl, need_opentelemetry
from probe.errors import ProbeError

__all__ = ["export_command"]

FORMATS = ("perfetto", "chrome", "speedscope", "pprof", "otlp")


@click.command("export", short_help="Export a run for Perfetto, speedscope, pprof, Chrome.")
@click.argument("run_dir", type=click.Path(path_type=Path))
@click.option(
    "--format",
    "fmt",
    type=click.Choice(FORMATS),
    default="perfetto",
    show_default=True,
    help="perfetto: one protobuf trace with spans, stack samples and counters; chrome: "
    "the same as Trace Event JSON; speedscope: on-CPU and waiting profiles per thread; "
    "pprof: a gzipped profile.proto with stage/route/thread/wait labels; otlp: spans "
    "and figures to an OpenTelemetry collector (--endpoint), or its payload to a file.",
)
@click.option(
    "-o",
    "--out",
    type=click.Path(path_type=Path),
    metavar="FILE",
    help="Where to write it ('-' for stdout). [default: RUN_DIR/trace.perfetto-trace, "
    "RUN_DIR/trace.json, RUN_DIR/profile.speedscope.json or RUN_DIR/profile.pb.gz]",
)
@click.option(
    "--full",
    is_flag=True,
    help="Keep every span, sample and counter point. By default a long run is thinned "
    "to stay under ~10 MB (whole request trees, the slowest kept; the file says so).",
)
@click.option(
    "--endpoint",
    envvar="OTEL_EXPORTER_OTLP_ENDPOINT",
    type=CollectorUrl(),
    metavar="URL",
    help="otlp: the collector's OTLP/HTTP base URL (/v1/traces and /v1/metrics are "
    "added). [default: $OTEL_EXPORTER_OTLP_ENDPOINT]",
)
@click.option(
    "--timeout",
    "timeout_s",
    type=click.FloatRange(min=0.1),
    default=10.0,
    show_default=True,
    metavar="SECONDS",
    help="otlp: how long to keep retrying (with back-off) an unreachable collector.",
)
def export_command(
    run_dir: Path,
    fmt: str,
    out: Path | None,
    full: bool,
    endpoint: str | None,
    timeout_s: float,
) -> None:
    """Export RUN_DIR for the tools you already use.

    \b
    perfetto    open in https://ui.perfetto.dev (works offline once loaded) or
                trace_processor: requests on async tracks, stages nested per
                thread, stack samples (a flame graph of any selection; waits
                end in a [waiting: REASON] frame), CPU/RSS/GPU counters.
    chrome      the same in Chrome's Trace Event JSON (chrome://tracing).
    speedscope  open in https://www.speedscope.app: per thread, an on-CPU and
                a waiting profile.
    pprof       go tool pprof, Pyroscope, Grafana: cpu (default), wait and
                sample counts, labelled by thread, stage, route and wait.
    otlp        OpenTelemetry: requests as SERVER spans (HTTP conventions),
                stages as children, latency histograms and the verdict as
                metrics, posted to --endpoint; without one, the spans' OTLP
                payload is written to a file (post it with curl later).

    \b
    Examples:
      probe export .probe/runs/20261122T101500Z-service
      probe export RUN_DIR --format speedscope -o profile.json
      probe export RUN_DIR --format pprof && go tool pprof -top RUN_DIR/profile.pb.gz
      probe export RUN_DIR --format otlp --endpoint http://127.0.0.1:4318
      probe export RUN_DIR --format chrome --full -o - | gzip > trace.json.gz
    """
    from probe.analyzers.analysis import analyze
    from probe.analyzers.timeline import TIMELINE_TABLES, TimelineLimits
    from probe.atomicfile import write_atomic
    from probe.printable import printable, shown_path
    from probe.reports import output
    from probe.rundir.reader import load

    if fmt == "otlp":
        need_opentelemetry("--format otlp")
    renderer = output(fmt)
    # each format's own bound where it has one (JSON is larger per event than protobuf)
    limits = TimelineLimits.unbounded() if full else getattr(renderer, "limits", TimelineLimits())
    # the timeline's tables only, unless the verdict goes too (OTLP's metrics)
    tables = None if fmt == "otlp" and endpoint else list(TIMELINE_TABLES)
    analysis = analyze(load(run_dir, tables=tables), limits=limits)
    exported = renderer.from_analysis(analysis)
    timeline = analysis.timeline
    if fmt == "otlp" and endpoint:
        _send(exported, analysis, endpoint, timeout_s)
        if out is None:
            _notes(analysis)
            return
    data = exported.render()
    blob = data.encode("utf-8") if isinstance(data, str) else data
    if out is not None and str(out) == "-":
        sys.stdout.buffer.write(blob)
        sys.stdout.buffer.flush()
    else:
        path = out if out is not None else run_dir / renderer.filename
        try:
            write_atomic(path, blob)
        except OSError as e:
            raise ProbeError(f"cannot write {path}: {e.strerror or e}") from e
        kept = ", ".join(f"{k:,} {what}" for what, (k, _) in timeline.kept.items())
        size = len(blob) / 1e6
        click.echo(printable(f"Wrote {shown_path(path)} ({size:.1f} MB: {kept})"))
    _notes(analysis)


def _notes(analysis: Any) -> None:
    from probe.printable import printable

    for note in (*analysis.notes, *analysis.timeline.notes):
        click.echo(printable(f"probe: {note}"), err=True)


class _OneLine(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        from probe.printable import printable

        return printable(f"probe: otlp: {record.getMessage().splitlines()[0]}")


def _send(exported: Any, analysis: Any, endpoint: str, timeout_s: float) -> None:
    from probe.printable import printable

    payload = exported.with_verdict(analysis)
    spans = len(analysis.timeline.spans)
    click.echo(printable(f"Sending {spans:,} spans and the run's metrics to {endpoint}..."))
    # the exporter logs each retry: one line each on stderr, as probe's own
    exporter_log = logging.getLogger("opentelemetry.exporter.otlp")
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(_OneLine())
    exporter_log.addHandler(handler)
    exporter_log.propagate = False
    try:
        failure = payload.send(endpoint, timeout_s=timeout_s)
    finally:
        exporter_log.removeHandler(handler)
        exporter_log.propagate = True
    if failure is not None:
        raise ProbeError(f"{failure} (gave up after {timeout_s:g} s)", exit_code=1)
    click.echo(printable(f"Sent {spans:,} spans and the run's metrics to {endpoint}"))
