"""``probe diff``: realized speedup of RUN_B over RUN_A beside what A's diagnosis predicted."""

from __future__ import annotations

import json
from pathlib import Path

import click

from probe.errors import ProbeError

__all__ = ["diff_command"]


@click.command("diff", short_help="Realized speedup of RUN_B over RUN_A vs the prediction.")
@click.argument("run_a", type=click.Path(path_type=Path))
@click.argument("run_b", type=click.Path(path_type=Path))
@click.option(
    "--applied",
    metavar="ID[,ID...]",
    help="Recommendation id(s) of RUN_A's diagnosis that RUN_B applied "
    "(e.g. concurrent_io). Default: RUN_A's top recommendation.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the comparison as JSON.")
def diff_command(run_a: Path, run_b: Path, applied: str | None, as_json: bool) -> None:
    """Compare RUN_B (after a change) with RUN_A (before it).

    \b
    Prints realized speedups, end to end (throughput, p50 latency) and per stage,
    next to what RUN_A's diagnosis predicted for the applied recommendation.

    \b
    Example:
      probe run -o before service.py
      probe run -o after service.py --fixed
      probe diff before after --applied concurrent_io
    """
    from probe.analyzers.diagnosis import diagnose
    from probe.analyzers.diff import compare
    from probe.reports.terminal import DiffText
    from probe.rundir.reader import load

    ids = [i.strip() for i in applied.split(",") if i.strip()] if applied else None
    a, b = diagnose(load(run_a)), diagnose(load(run_b))
    comparison = compare(a, b, ids)
    if ids and not comparison.applied:
        raise ProbeError(comparison.notes[0], exit_code=2)
    if as_json:
        click.echo(json.dumps(comparison.to_dict(), indent=2))
    else:
        click.echo(
            DiffText.from_comparison(comparison, name_a=str(run_a), name_b=str(run_b)).render()
        )
