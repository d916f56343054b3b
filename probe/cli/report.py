"""``probe report``: render a run directory's report (HTML, JSON or text)."""

from __future__ import annotations

import webbrowser
from pathlib import Path

import click

from probe.errors import ProbeError

__all__ = ["report_command", "write_report"]


def write_report(run: object, diagnosis: object, path: Path) -> Path:
    """Render ``report.html`` for a loaded run and its diagnosis; atomically."""
    import os

    from probe.reports.html import render_html, report_data

    page = render_html(report_data(diagnosis, run))  # type: ignore[arg-type]
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(page, encoding="utf-8")
    os.replace(tmp, path)
    return path


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
    from probe.analyzers.diagnosis import diagnose
    from probe.reports.json import render_json
    from probe.reports.terminal import render_verdict
    from probe.rundir.reader import load

    run = load(run_dir)
    diagnosis = diagnose(run)
    if fmt == "html":
        path = out or run_dir / "report.html"
        try:
            write_report(run, diagnosis, path)
        except OSError as e:
            raise ProbeError(f"cannot write {path}: {e.strerror or e}", exit_code=1) from None
        click.echo(f"probe: report written to {path}")
        if open_it:
            webbrowser.open(path.resolve().as_uri())
        return
    text = render_json(diagnosis) if fmt == "json" else render_verdict(diagnosis) + "\n"
    if out is None:
        click.echo(text, nl=False)
    else:
        try:
            out.write_text(text, encoding="utf-8")
        except OSError as e:
            raise ProbeError(f"cannot write {out}: {e.strerror or e}", exit_code=1) from None
        click.echo(f"probe: {fmt} report written to {out}")
