"""``probe export``: a run directory in the formats other tools open."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from probe.errors import ProbeError

__all__ = ["export_command"]

FORMATS = ("perfetto", "chrome", "speedscope")


@click.command("export", short_help="Export a run for Perfetto, Chrome tracing or speedscope.")
@click.argument("run_dir", type=click.Path(path_type=Path))
@click.option(
    "--format",
    "fmt",
    type=click.Choice(FORMATS),
    default="perfetto",
    show_default=True,
    help="perfetto: one protobuf trace with spans, stack samples and counters; chrome: "
    "the same as Trace Event JSON; speedscope: on-CPU and waiting profiles per thread.",
)
@click.option(
    "-o",
    "--out",
    type=click.Path(path_type=Path),
    metavar="FILE",
    help="Where to write it ('-' for stdout). [default: RUN_DIR/trace.perfetto-trace, "
    "RUN_DIR/trace.json or RUN_DIR/profile.speedscope.json]",
)
@click.option(
    "--full",
    is_flag=True,
    help="Keep every span, sample and counter point. By default a long run is thinned "
    "to stay under ~10 MB (whole request trees, the slowest kept; the file says so).",
)
def export_command(run_dir: Path, fmt: str, out: Path | None, full: bool) -> None:
    """Export RUN_DIR for the tools you already use.

    \b
    perfetto    open in https://ui.perfetto.dev (works offline once loaded) or
                trace_processor: requests on async tracks, stages nested per
                thread, stack samples (a flame graph of any selection; waits
                end in a [waiting: REASON] frame), CPU/RSS/GPU counters.
    chrome      the same in Chrome's Trace Event JSON (chrome://tracing).
    speedscope  open in https://www.speedscope.app: per thread, an on-CPU and
                a waiting profile.

    \b
    Examples:
      probe export .probe/runs/20261122T101500Z-service
      probe export RUN_DIR --format speedscope -o profile.json
      probe export RUN_DIR --format chrome --full -o - | gzip > trace.json.gz
    """
    from probe.analyzers.analysis import analyze
    from probe.analyzers.timeline import TIMELINE_TABLES, TimelineLimits
    from probe.atomicfile import write_atomic
    from probe.reports import output
    from probe.reports.pipeline import shown_path
    from probe.reports.terminal import printable
    from probe.rundir.reader import load

    renderer = output(fmt)
    # each format's own bound where it has one (JSON is larger per event than protobuf)
    limits = TimelineLimits.unbounded() if full else getattr(renderer, "limits", TimelineLimits())
    analysis = analyze(load(run_dir, tables=list(TIMELINE_TABLES)), limits=limits)
    data = renderer.from_analysis(analysis).render()
    blob = data.encode("utf-8") if isinstance(data, str) else data
    timeline = analysis.timeline
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
    for note in (*analysis.notes, *timeline.notes):
        click.echo(printable(f"probe: {note}"), err=True)
