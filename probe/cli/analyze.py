"""``probe analyze``: diagnose a run directory again, without profiling again."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import click

__all__ = ["analyze_command", "diagnose_run_dir", "shown_path"]


def shown_path(path: Path) -> str:
    """As the user would type it: relative to the working directory when inside it."""
    try:
        rel = os.path.relpath(path)
    except ValueError:
        return str(path)
    return str(path) if rel.startswith("..") else rel


def diagnose_run_dir(run: object, run_dir: Path, *, write: bool = True) -> object:
    from probe.analyzers.diagnosis import diagnose
    from probe.reports.json import write_diagnosis

    diagnosis = diagnose(run)
    if write:
        try:
            write_diagnosis(diagnosis, run_dir)
        except OSError as e:
            print(f"probe: could not write {run_dir / 'diagnosis.json'}: {e}", file=sys.stderr)
    return diagnosis


@click.command("analyze", short_help="Diagnose a run directory (writes diagnosis.json).")
@click.argument("run_dir", type=click.Path(path_type=Path))
@click.option(
    "--json", "as_json", is_flag=True, help="Print diagnosis.json instead of the verdict."
)
@click.option("--no-write", is_flag=True, help="Do not (re)write RUN_DIR/diagnosis.json.")
def analyze_command(run_dir: Path, as_json: bool, no_write: bool) -> None:
    """Diagnose RUN_DIR: what limits the service, what each fix would buy.

    \b
    Reads a run directory written by `probe run` (complete, or left behind by a
    killed process: what was flushed is salvaged, with a note), writes
    RUN_DIR/diagnosis.json and prints the verdict.

    \b
    Examples:
      probe analyze .probe/runs/20261122T101500Z-service
      probe analyze --json RUN_DIR | jq .recommendations
    """
    from probe.reports.json import render_json
    from probe.reports.terminal import render_verdict
    from probe.rundir.reader import load

    run = load(run_dir)
    diagnosis = diagnose_run_dir(run, run_dir, write=not no_write)
    if as_json:
        click.echo(render_json(diagnosis), nl=False)  # type: ignore[arg-type]
    else:
        click.echo(render_verdict(diagnosis, run_dir=shown_path(run_dir)))  # type: ignore[arg-type]
