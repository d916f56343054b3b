"""``probe check``: a CI gate -- assertions on a run's figures, regressions against a
baseline judged by the runs' noise; exit 0 when everything held, 1 when not."""

from __future__ import annotations

import json
from pathlib import Path

import click

__all__ = ["check_command"]

EXIT_FAILED = 1


@click.command("check", short_help="CI gate: assertions and regressions vs a baseline.")
@click.argument("run_dirs", metavar="RUN_DIR...", nargs=-1, required=True,
                type=click.Path(path_type=Path))  # fmt: skip
@click.option(
    "--baseline",
    "baselines",
    multiple=True,
    type=click.Path(path_type=Path),
    metavar="RUN_DIR|JSON",
    help="A run to compare with (repeatable: repeats of it), or one saved diagnosis.json: "
    "p50/p99 per request name and throughput.",
)
@click.option(
    "--max-regression",
    default="10%",
    show_default=True,
    metavar="PCT",
    help="How much worse than the baseline a figure may be (10% or 0.1).",
)
@click.option(
    "--assert",
    "assertions",
    multiple=True,
    metavar="EXPR",
    help="A condition that must hold in every run (repeatable): 'p99(POST /predict) < "
    "200ms', 'p50 < 40ms', 'throughput >= 500/s', 'errors(POST /predict) == 0', "
    "'error_rate < 1%', 'share(cpu/python) < 0.6', 'no leak'.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the verdict as JSON.")
def check_command(
    run_dirs: tuple[Path, ...],
    baselines: tuple[Path, ...],
    max_regression: str,
    assertions: tuple[str, ...],
    as_json: bool,
) -> None:
    """Check RUN_DIR (or repeats of one run): exit 0 when every assertion held and
    no figure regressed against the baseline, 1 when one did, 2 on bad input.

    \b
    A figure regressed when it is worse than the baseline by more than
    --max-regression and its 95% interval lies wholly on the worse side. The
    interval comes from slices of each run in time (batch means), so a machine
    whose speed drifts within a run widens it; worse than allowed but within
    the noise reads "inconclusive" (not a failure). On a noisy machine, give
    several runs a side: their slices pool, and the drift between runs counts.
    Where a run waited for CPUs other processes held, each figure is judged
    also with that wait taken out: a slowdown it explains is inconclusive. The
    wait is read from each request's thread, only where that thread ran
    requests back to back and nothing else (a one-thread loop; not a served
    app's worker threads): elsewhere a slower crowded run is inconclusive,
    with no figure without the wait.

    \b
    Examples:
      probe check RUN_DIR --assert 'p99(POST /predict) < 200ms' --assert 'no leak'
      probe check after --baseline before --max-regression 5%
      probe check after1 after2 after3 --baseline before1 --baseline before2 \\
          --baseline before3
      probe check after --baseline before/diagnosis.json --json
    """
    from probe.reports.checking import check, parse_fraction, parsed_assertions
    from probe.reports.json import json_safe

    parsed_assertions(list(assertions))  # bad input first, before any run is loaded
    gate = check(
        list(run_dirs),
        baselines=list(baselines),
        assertions=list(assertions),
        max_regression=parse_fraction(max_regression),
    )
    if as_json:
        click.echo(json.dumps(json_safe(gate.to_dict()), indent=2))
    else:
        click.echo(gate.render())
    if not gate.passed:
        raise SystemExit(EXIT_FAILED)
