"""``probe check``: a CI gate -- assertions on a run's figures, regressions against a
baseline judged by the runs' noise; exit 0 when everything held, 1 when not."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click

from probe.errors import ProbeError

__all__ = ["check_command"]

EXIT_FAILED = 1


@dataclass(frozen=True)
class _Side:
    """One side of a comparison: its runs' diagnoses (as diagnosis.json holds them),
    their requests tagged by run (None for a saved diagnosis), what each ran."""

    diagnoses: list[dict[str, Any]]
    requests: Any
    targets: list[str]


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

    \b
    Examples:
      probe check RUN_DIR --assert 'p99(POST /predict) < 200ms' --assert 'no leak'
      probe check after --baseline before --max-regression 5%
      probe check after1 after2 after3 --baseline before1 --baseline before2 \\
          --baseline before3
      probe check after --baseline before/diagnosis.json --json
    """
    from probe.analyzers.gate import evaluate

    if not assertions and not baselines:
        raise ProbeError("nothing to check: give --assert EXPR and/or --baseline RUN_DIR")
    parsed = _parsed(assertions)
    allowed = _fraction(max_regression)
    current = _runs(list(run_dirs))
    checks = [
        _labelled(evaluate(a, d), path, len(run_dirs))
        for path, d in zip(run_dirs, current.diagnoses, strict=True)
        for a in parsed
    ]
    notes: list[str] = []
    found = _compare(list(baselines), current, allowed, notes) if baselines else []
    _verdict(checks, found, allowed if baselines else None, notes, as_json)


def _parsed(assertions: tuple[str, ...]) -> list[Any]:
    from probe.analyzers.gate import GateSyntaxError, parse_assertion

    parsed = []
    for text in assertions:
        try:
            parsed.append(parse_assertion(text))
        except GateSyntaxError as e:
            where = f"at column {e.column + 1}"
            raise ProbeError(f"cannot parse --assert {text!r} {where}: {e}") from None
    return parsed


def _labelled(result: Any, path: Path, runs: int) -> Any:
    from dataclasses import replace

    return replace(result, text=f"{result.text}  [{path.name}]") if runs > 1 else result


def _fraction(text: str) -> float:
    m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*(%?)\s*", text)
    if not m:
        raise ProbeError(f"--max-regression {text!r}: give a percentage (10%) or a fraction")
    return float(m.group(1)) / (100 if m.group(2) else 1)


def _runs(paths: list[Path]) -> _Side:
    """Run directories' diagnoses as diagnosis.json holds them, their requests, and what
    each ran (the target's name)."""
    import pandas as pd

    from probe.analyzers.analysis import analyze
    from probe.analyzers.gate import request_latencies
    from probe.reports import output
    from probe.rundir.reader import load

    diagnoses, requests, targets = [], [], []
    for i, path in enumerate(paths):
        run = load(path)
        diagnoses.append(json.loads(str(output("json").from_analysis(analyze(run)).render())))
        requests.append(request_latencies(run.tables["spans"], run=i))
        targets.append(str((run.meta.get("target") or {}).get("name") or ""))
    return _Side(diagnoses, pd.concat(requests, ignore_index=True), targets)


def _baseline(paths: list[Path]) -> _Side:
    if all(p.is_dir() for p in paths):
        return _runs(paths)
    if len(paths) > 1:
        raise ProbeError("--baseline: give run directories, or one saved diagnosis.json")
    path = paths[0]
    try:
        d = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, ValueError) as e:
        raise ProbeError(f"cannot read the baseline {path}: {e}") from None
    from probe.analyzers.diagnosis import SCHEMA

    if not isinstance(d, dict) or d.get("schema") != SCHEMA:
        found = d.get("schema") if isinstance(d, dict) else type(d).__name__
        raise ProbeError(f"the baseline {path} is not a probe diagnosis ({SCHEMA}; has {found!r})")
    return _Side([d], None, [])


def _compare(paths: list[Path], current: _Side, allowed: float, notes: list[str]) -> list[Any]:
    from probe.analyzers.gate import regressions, request_names

    base = _baseline(paths)
    theirs = set().union(*(request_names(d, base.requests) for d in base.diagnoses))
    ours = set().union(*(request_names(d, current.requests) for d in current.diagnoses))
    if not theirs & ours:
        raise ProbeError(
            f"nothing to compare with the baseline: no request name in common "
            f"(baseline: {', '.join(sorted(theirs)) or 'no requests'}; "
            f"this run: {', '.join(sorted(ours)) or 'no requests'}) -- a baseline of another "
            "service, or runs without requests?"
        )
    ran = {Path(t).name for t in base.targets if t} | {Path(t).name for t in current.targets if t}
    if len(ran) > 1:
        notes.append(f"the runs compared ran different targets: {', '.join(sorted(ran))}")
    return regressions(
        base.diagnoses,
        current.diagnoses,
        allowed,
        baseline_requests=base.requests,
        current_requests=current.requests,
    )


def _verdict(
    checks: list[Any], found: list[Any], allowed: float | None, notes: list[str], as_json: bool
) -> None:
    from probe.reports.gate import GateText
    from probe.reports.json import json_safe

    gate = GateText.from_results(checks, found, max_regression=allowed, notes=notes)
    if as_json:
        click.echo(json.dumps(json_safe(gate.to_dict()), indent=2))
    else:
        click.echo(gate.render())
    if not gate.passed:
        raise SystemExit(EXIT_FAILED)
