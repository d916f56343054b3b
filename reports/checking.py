"""``probe check``'s steps, shared by the verb and the pytest plugin: load the runs,
diagnose them, judge the assertions and the regressions, and lay the verdict out.

``check(run_dirs, baselines=..., assertions=..., max_regression=...)`` -> ``GateText``
(``probe.reports.gate``). Bad input -- an assertion that does not parse, a baseline that
is not a probe diagnosis or shares no request with the runs -- raises ``ProbeError``
(exit status 2 at the CLI).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pandas as pd

from probe.analyzers.analysis import analyze
from probe.analyzers.diagnosis import SCHEMA
from probe.analyzers.gate import (
    Assertion,
    CheckResult,
    GateSyntaxError,
    evaluate,
    parse_assertion,
    regressions,
    request_latencies,
    request_names,
)
from probe.errors import ProbeError
from probe.reports import output
from probe.reports.gate import GateText
from probe.rundir.reader import load

__all__ = ["check", "parse_fraction", "parsed_assertions"]


@dataclass(frozen=True)
class _Side:
    """One side of a comparison: its runs' diagnoses (as diagnosis.json holds them),
    their requests tagged by run (None for a saved diagnosis), what each ran."""

    diagnoses: list[dict[str, Any]]
    requests: pd.DataFrame | None
    targets: list[str]


def check(
    run_dirs: list[Path],
    *,
    baselines: list[Path] | None = None,
    assertions: list[str] | None = None,
    max_regression: float = 0.10,
) -> GateText:
    """Judge ``run_dirs`` (one run, or repeats of it) against ``assertions`` and, with
    ``baselines`` (runs, or one saved diagnosis.json), against a regression of more than
    ``max_regression``."""
    baselines, assertions = list(baselines or []), list(assertions or [])
    if not assertions and not baselines:
        raise ProbeError("nothing to check: give --assert EXPR and/or --baseline RUN_DIR")
    parsed = parsed_assertions(assertions)
    current = _runs(list(run_dirs))
    checks = [
        _labelled(evaluate(a, d), path, len(run_dirs))
        for path, d in zip(run_dirs, current.diagnoses, strict=True)
        for a in parsed
    ]
    notes: list[str] = []
    found = _compare(baselines, current, max_regression, notes) if baselines else []
    allowed = max_regression if baselines else None
    return GateText.from_results(checks, found, max_regression=allowed, notes=notes)


def parsed_assertions(texts: list[str]) -> list[Assertion]:
    out = []
    for text in texts:
        try:
            out.append(parse_assertion(text))
        except GateSyntaxError as e:
            where = f"at column {e.column + 1}"
            raise ProbeError(f"cannot parse --assert {text!r} {where}: {e}") from None
    return out


def parse_fraction(text: str) -> float:
    """``10%`` or ``0.1`` -> 0.1."""
    m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*(%?)\s*", text)
    if not m:
        raise ProbeError(f"--max-regression {text!r}: give a percentage (10%) or a fraction")
    return float(m.group(1)) / (100 if m.group(2) else 1)


def _labelled(result: CheckResult, path: Path, runs: int) -> CheckResult:
    return replace(result, text=f"{result.text}  [{path.name}]") if runs > 1 else result


def _runs(paths: list[Path]) -> _Side:
    diagnoses, requests, targets = [], [], []
    for i, path in enumerate(paths):
        run = load(path)
        diagnoses.append(json.loads(str(output("json").from_analysis(analyze(run)).render())))
        waited = (diagnoses[-1].get("run") or {}).get("waited_for_cpu") or {}
        # the machine's part of each request: only where other processes held the cores
        samples = run.tables["samples"] if waited.get("others_held_cores") else None
        requests.append(
            request_latencies(
                run.tables["spans"], run=i, samples=samples, threads=run.tables.get("threads")
            )
        )
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
    if not isinstance(d, dict) or d.get("schema") != SCHEMA:
        found = d.get("schema") if isinstance(d, dict) else type(d).__name__
        raise ProbeError(f"the baseline {path} is not a probe diagnosis ({SCHEMA}; has {found!r})")
    return _Side([d], None, [])


def _compare(paths: list[Path], current: _Side, allowed: float, notes: list[str]) -> list[Any]:
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
    assert current.requests is not None  # run directories always have their requests
    return regressions(
        base.diagnoses,
        current.diagnoses,
        allowed,
        baseline_requests=base.requests,
        current_requests=current.requests,
    )
