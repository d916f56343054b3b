"""``probe report``: render a run directory's report (HTML, JSON or text)."""

from __future__ import annotations

import webbrowser
from pathlib import Path

import click

from probe.errors import ProbeError

__all__ = ["report_command"]


@click.command("report", short_help="Render a run's report: HTML (default), JSON or text.")
@click.argument("run_dir", type=click.Path(path_type=Path))
@click.option(
    "-o",
    "--out",
    type=click.Path(path_type=Path),
    metavar="FILE",
    help="Where to write it. [default: RUN_DIR/report.html; JSON and text: stdout]",
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
    Examples:
      probe report .probe/runs/20261122T101500Z-service --open
      probe report RUN_DIR --format text
      probe report RUN_DIR --format json -o diagnosis.json
    """
    from probe.reports import output
    from probe.reports.pipeline import load_analysis, write_output
    from probe.reports.terminal import printable, printable_json

    analysis = load_analysis(run_dir)
    if fmt == "html" and out is None:
        out = run_dir / "report.html"
    if out is None:
        text = output(fmt).from_analysis(analysis).render()
        # the text verdict escapes itself; JSON and HTML carry the service's names raw
        text = printable_json(text) if fmt == "json" else printable(text)
        click.echo(text if text.endswith("\n") else text + "\n", nl=False)
        return
    try:
        write_output(analysis, fmt, out)
    except OSError as e:
        raise ProbeError(f"cannot write {out}: {e.strerror or e}", exit_code=1) from None
    shown = "report" if fmt == "html" else f"{fmt} report"
    click.echo(printable(f"probe: {shown} written to {out}"))
    if open_it and fmt == "html":
        webbrowser.open(out.resolve().as_uri())
