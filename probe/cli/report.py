"""``probe report``: render a run directory's report (HTML, JSON or text)."""

from __future__ import annotations

import webbrowser
from pathlib import Path

import click

from probe.errors import ProbeError

__all__ = ["report_command"]


@click.command("report", short_help="Render a run's report: HTML (default), JSON or text.")
@click.argument("run_dir", metavar="RUN_DIR|TRACE", type=click.Path(path_type=Path))
@click.option(
    "-o",
    "--out",
    type=click.Path(path_type=Path),
    metavar="FILE",
    help="Where to write it. [default: RUN_DIR/report.html, or TRACE's name with "
    ".report.html beside it; JSON and text: stdout]",
)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["html", "json", "text"]),
    default="html",
    show_default=True,
)
@click.option("--open", "open_it", is_flag=True, help="Open the HTML report in a browser.")
def report_command(run_dir: Path, out: Path | None, fmt: str, open_it: bool) -> None:
    """Render the report of RUN_DIR without profiling again.

    \b
    The HTML report is one self-contained file (works offline; plotly.js is
    embedded): the verdict, what to change and what it buys, the Amdahl chart,
    the stage breakdown, the span timeline, the flame graph, resources and
    memory over time, and the run's metadata.

    \b
    Given a torch.profiler/Kineto trace (.json or .json.gz), renders the trace's
    diagnosis (`probe analyze TRACE`): the verdict, what to change, GPU time by
    kernel family and precision, idle time by cause, spans' host and GPU time.

    \b
    Examples:
      probe report .probe/runs/20261122T101500Z-service --open
      probe report RUN_DIR --format text
      probe report RUN_DIR --format json -o diagnosis.json
      probe report worker0.pt.trace.json.gz -o trace.html
    """
    from probe.reports import output
    from probe.reports.pipeline import load_analysis

    if run_dir.is_file():
        _report_trace(run_dir, out, fmt, open_it)
        return
    analysis = load_analysis(run_dir)
    if fmt == "html" and out is None:
        out = run_dir / "report.html"
    text = output(fmt).from_analysis(analysis).render()
    assert isinstance(text, str)  # report's formats are text; the binary ones: probe export
    _emit(text, out, fmt, open_it)


def _report_trace(trace: Path, out: Path | None, fmt: str, open_it: bool) -> None:
    from probe.analyzers.trace_diagnosis import diagnose_trace
    from probe.reports.json import DiagnosisJson, json_safe
    from probe.reports.trace import TraceVerdict
    from probe.reports.trace_html import TraceHtmlReport
    from probe.rundir.kineto import read_kineto

    d = diagnose_trace(read_kineto(trace))
    if fmt == "html":
        text = TraceHtmlReport.from_trace_diagnosis(d).render()
        out = out or trace.with_name(trace.name.removesuffix(".gz").removesuffix(".json")
                                     + ".report.html")  # fmt: skip
    elif fmt == "json":
        text = DiagnosisJson(json_safe(d.to_dict())).render()
    else:
        text = TraceVerdict.from_trace_diagnosis(d).render()
    _emit(text, out, fmt, open_it)


def _emit(text: str, out: Path | None, fmt: str, open_it: bool) -> None:
    """``text`` to stdout (the text verdict escapes itself; JSON and HTML carry the
    service's names raw, escaped here for a terminal), or written to ``out``."""
    from probe.atomicfile import write_atomic
    from probe.printable import printable, printable_json

    text = text if text.endswith("\n") else text + "\n"
    if out is None:
        click.echo(printable_json(text) if fmt == "json" else printable(text), nl=False)
        return
    try:
        write_atomic(out, text)
    except OSError as e:
        raise ProbeError(f"cannot write {out}: {e.strerror or e}", exit_code=1) from None
    shown = "report" if fmt == "html" else f"{fmt} report"
    click.echo(printable(f"probe: {shown} written to {out}"))
    if open_it and fmt == "html":
        webbrowser.open(out.resolve().as_uri())
