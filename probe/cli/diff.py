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
    "(e.g. concurrent_io), each its highest-ranked one; ID@STAGE for the one on a stage "
    "where several stages have it (vectorize_python@load_catalogue). "
    "Default: RUN_A's top recommendation.",
)
@click.option(
    "--sweep",
    "sweep_dir",
    type=click.Path(path_type=Path),
    metavar="SWEEP",
    help="Take the prediction from a `probe batch-sweep --against RUN_A` instead: RUN_B "
    "serves at the batch size it advised.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the comparison as JSON.")
def diff_command(
    run_a: Path, run_b: Path, applied: str | None, sweep_dir: Path | None, as_json: bool
) -> None:
    """Compare RUN_B (after a change) with RUN_A (before it).

    \b
    Prints realized speedups, end to end (throughput, p50 latency) and per stage,
    next to what RUN_A's diagnosis predicted for the applied recommendation.

    \b
    Example:
      probe run -o before service.py
      probe run -o after service.py --fixed
      probe diff before after --applied concurrent_io
      probe diff before after --sweep probe-sweep-20261124-101500
    """
    from probe.analyzers.diagnosis import diagnose
    from probe.analyzers.diff import compare
    from probe.reports.terminal import DiffText
    from probe.rundir.reader import load

    ids = [i.strip() for i in applied.split(",") if i.strip()] if applied else None
    if ids and sweep_dir is not None:
        raise ProbeError("--applied and --sweep name two predictions: give one")
    prediction = _sweep_prediction(sweep_dir, run_a) if sweep_dir is not None else None
    a, b = diagnose(load(run_a)), diagnose(load(run_b))
    comparison = compare(a, b, ids, prediction=prediction)
    if ids and not comparison.applied:
        # the note that says why (not the first: a batch job's basis note comes first)
        raise ProbeError(comparison.unmatched, exit_code=2)
    if as_json:
        click.echo(json.dumps(comparison.to_dict(), indent=2))
    else:
        click.echo(
            DiffText.from_comparison(comparison, name_a=str(run_a), name_b=str(run_b)).render()
        )


def _sweep_prediction(sweep_dir: Path, run_a: Path) -> tuple[str, float]:
    """(what RUN_B changed, the speedup the sweep predicted for RUN_A's service)."""
    from probe.batching import read_sweep

    document, _ = read_sweep(sweep_dir)
    against, predicted = document.get("against"), document.get("predicted")
    if not isinstance(against, dict) or not isinstance(predicted, dict):
        raise ProbeError(
            f"{sweep_dir} was not set against a run (probe batch-sweep --against RUN_A): "
            "it predicts the stage alone, not a service's speedup"
        )
    if Path(str(against.get("run"))) != run_a.resolve():
        raise ProbeError(f"{sweep_dir} was set against {against.get('run')}, not {run_a}")
    speedup = predicted.get("speedup")
    if not isinstance(speedup, (int, float)) or not speedup > 0:
        raise ProbeError(f"{sweep_dir}: its predicted speedup is {speedup!r}")
    advice = document.get("advice")
    batch = advice.get("batch") if isinstance(advice, dict) else None
    return f"batch {batch} (batch sweep)", float(speedup)
