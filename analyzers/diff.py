"""Predicted vs realized: what RUN_B gained over RUN_A, beside what A's diagnosis predicted.

``compare(a, b, applied=None)`` -> ``Comparison``. Realized speedups are ratios of B over
A: throughput (requests per second over the serving window), latency (A's p50 over
B's), and per stage the time each request spends in it (``path_s`` per request).

A batch job (no requests in either run) is measured by its wall time instead: the same
job, run to its end both times, took A's wall time before and B's after, so the realized
speedup is A's over B's, and per stage the time the job's path spent in it. That holds only
for runs that did the whole job: a run stopped by ``--duration``, a signal or an error,
or one that exited non-zero, did not, and is not compared. The
prediction is that of the recommendations named by ``applied`` (several fixes on
disjoint stages combine by Amdahl); without ``applied``, that of A's top recommendation
(the change the diagnosis asked for).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pandas as pd

from probe.analyzers.amdahl import amdahl_combined
from probe.analyzers.diagnosis import Diagnosis
from probe.analyzers.recommendations import Recommendation

__all__ = ["Comparison", "StageChange", "compare", "held_error"]


@dataclass(frozen=True)
class StageChange:
    stage: str
    a_ms: float | None  # per request, or over the whole job (``Comparison.basis``)
    b_ms: float | None
    speedup: float | None


# how a run may end and still have done its whole job (probe.launcher's ``ended_by``)
_JOB_DONE = ("completed", "sys.exit")


@dataclass(frozen=True)
class Comparison:
    throughput_a: float | None
    throughput_b: float | None
    throughput_speedup: float | None
    latency_p50_a_ms: float | None
    latency_p50_b_ms: float | None
    latency_speedup: float | None
    job_wall_a_s: float | None
    job_wall_b_s: float | None
    job_speedup: float | None
    basis: str  # "throughput" (served requests), "job" (batch wall time), or "" (neither)
    stages: list[StageChange]
    applied: list[str]
    predicted: float | None
    matched_by: str  # "given", "top" or "sweep" (a batch sweep's), or "" when none
    error: float | None  # |predicted - realized| / realized, on the basis's speedup
    notes: list[str]
    # the note naming the applied fixes RUN_A has no recommendation for ("" if none)
    unmatched: str = ""
    # the range the one fix compared states it realizes (its figure is conservative:
    # ``evidence.speedup_range``), and the error as the figure is held to it
    # (``held_error``: only falling short counts; inf outside the range); None without
    stated_range: tuple[float, float] | None = None
    held: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "throughput": {
                "a": self.throughput_a,
                "b": self.throughput_b,
                "speedup": self.throughput_speedup,
            },
            "latency_p50_ms": {
                "a": self.latency_p50_a_ms,
                "b": self.latency_p50_b_ms,
                "speedup": self.latency_speedup,
            },
            "job_wall_s": {
                "a": self.job_wall_a_s,
                "b": self.job_wall_b_s,
                "speedup": self.job_speedup,
            },
            "basis": self.basis,
            "stages_per": "job" if self.basis == "job" else "request",
            "stages": [s.__dict__ for s in self.stages],
            "applied": self.applied,
            "predicted_speedup": self.predicted,
            "matched_by": self.matched_by,
            "relative_error": self.error,
            "stated_range": list(self.stated_range) if self.stated_range else None,
            # null outside the stated range (within_stated_range false), or without one
            "held_error": self.held if self.held is not None and math.isfinite(self.held) else None,
            "within_stated_range": (
                None if self.stated_range is None or self.held is None else math.isfinite(self.held)
            ),
            "notes": self.notes,
        }


def _ratio(x: float | None, y: float | None) -> float | None:
    if x is None or y is None or y <= 0 or not math.isfinite(x):
        return None
    return x / y


def _per_request_ms(d: Diagnosis) -> dict[str, float]:
    table = d.breakdown.stages
    n = d.breakdown.requests.count
    out: dict[str, float] = {}
    for name, row in table.iterrows():
        if n:
            out[str(name)] = float(row["path_s"]) * 1e3 / n
        elif pd.notna(row["count"]) and row["count"] > 0:
            out[str(name)] = float(row["total_s"]) * 1e3 / float(row["count"])
    return out


def _per_job_ms(d: Diagnosis) -> dict[str, float]:
    """Each stage's time on the job's path over the whole run."""
    table = d.breakdown.stages
    return {str(name): float(row["path_s"]) * 1e3 for name, row in table.iterrows()}


def _whole_job(d: Diagnosis, name: str) -> tuple[float | None, str | None]:
    """(the job's wall time, None) for a run that did its whole job; (None, why) if not."""
    ended_by, status = d.run.get("ended_by"), d.run.get("exit_status")
    if ended_by not in _JOB_DONE or status not in (0, None):
        how = f"ended by {ended_by or 'an unknown cause'}"
        if status not in (0, None):
            how += f", exit status {status}"
        return None, (
            f"{name} did not run its job to the end ({how}): its wall time is not the job's, "
            "so no realized speedup; compare runs that ran the same job to completion"
        )
    wall = d.run.get("wall_s")
    if not wall or wall <= 0:
        return None, f"{name} recorded no wall time"
    return float(wall), None


def _predict(recs: list[Recommendation]) -> float:
    """Several fixes at once: Amdahl over the disjoint shares the path fixes touch, times
    each throughput fix (those estimate the request rate of the whole service, with the
    path fixes' one-off costs, such as a cold start, already left out of their demands)."""
    parts = [(r.p, r.s) for r in recs if r.scope == "path"]
    speedup = amdahl_combined(parts) if parts else 1.0
    for r in recs:
        if r.scope == "throughput":
            speedup *= r.estimated_speedup
    return speedup


@dataclass(frozen=True)
class _Realized:
    basis: str
    speedup: float | None
    stages_a: dict[str, float]
    stages_b: dict[str, float]
    wall_a: float | None = None
    wall_b: float | None = None


def _realized(a: Diagnosis, b: Diagnosis, notes: list[str]) -> _Realized:
    """What B gained, on the basis both runs share: served requests, or one batch job."""
    served_a, served_b = a.breakdown.requests.count, b.breakdown.requests.count
    if served_a and served_b:
        speedup = _ratio(b.run.get("throughput_per_s"), a.run.get("throughput_per_s"))
        return _Realized("throughput", speedup, _per_request_ms(a), _per_request_ms(b))
    if served_a or served_b:
        notes.append(
            f"no requests in RUN_{'A' if served_b else 'B'}, {max(served_a, served_b)} in the "
            "other: a service and a batch job are not compared (throughput needs "
            "probe.request spans, or one outermost stage, in both)"
        )
        return _Realized("", None, {}, {})
    # two batch runs: the same job's wall time before and after
    (wall_a, why_a), (wall_b, why_b) = _whole_job(a, "RUN_A"), _whole_job(b, "RUN_B")
    notes += [why for why in (why_a, why_b) if why]
    speedup = _ratio(wall_a, wall_b)
    if speedup is None:
        return _Realized("", None, {}, {}, wall_a, wall_b)
    notes.append(
        "no requests in either run: the realized speedup is the job's wall time, "
        "RUN_A's over RUN_B's (it holds when both runs did the same work)"
    )
    return _Realized("job", speedup, _per_job_ms(a), _per_job_ms(b), wall_a, wall_b)


def _chosen(a: Diagnosis, applied: list[str] | None) -> tuple[list[Recommendation], str, str]:
    """The recommendations B applied, how they were picked ("given", "top" or ""), and a
    note naming those of ``applied`` RUN_A has no recommendation for ("" if none).
    ``applied``: ids, each the highest-ranked recommendation of that id, or ``ID@STAGE``
    for the one on that stage (its full name, or its function without the file)."""
    ranked = _ranked(a)
    if applied:
        picked = {key: _pick(key, ranked) for key in applied}
        missing = [key for key, r in picked.items() if r is None]
        unmatched = (
            f"RUN_A's diagnosis has no recommendation {', '.join(missing)} "
            f"(it has: {', '.join(_named(ranked, ranked)) or 'none'})"
            if missing
            else ""
        )
        chosen = [r for r in picked.values() if r is not None]
        return chosen, "given" if chosen else "", unmatched
    if a.recommendations:
        # Without --applied: the top recommendation, the change the diagnosis asked for.
        # (Picking whichever prediction lands closest would flatter the estimates.)
        speed = [r for r in a.recommendations if r.id != "fix_leak"]
        return [(speed or a.recommendations)[0]], "top", ""
    return [], "", ""


def _pick(key: str, ranked: list[Recommendation]) -> Recommendation | None:
    """``ID`` or ``ID@STAGE`` (``_chosen``) among the ranked recommendations. Two stages
    may get the same fix (vectorize_python on two loops): an id alone took the last of
    them, the smaller estimate, before."""
    rid, _, stage = key.partition("@")
    return next(
        (
            r
            for r in ranked
            if r.id == rid and (not stage or stage in (r.stage, r.stage.split(" (")[0]))
        ),
        None,
    )


def _ranked(a: Diagnosis) -> list[Recommendation]:
    """What ``--applied`` picks from, best first: the recommendations, then the fixes
    under their bar (applied with others, they compound)."""
    return [*a.recommendations, *a.minor_recommendations]


def _named(chosen: list[Recommendation], ranked: list[Recommendation]) -> list[str]:
    """``chosen`` as ``--applied`` would name them among ``ranked``: the id, with
    ``@STAGE`` where more than one stage has it (the diff's text then says which; the
    error, all of them)."""
    shared = Counter(r.id for r in ranked)
    return [f"{r.id}@{r.stage}" if shared[r.id] > 1 else r.id for r in chosen]


def held_error(predicted: float, realized: float, stated: Sequence[float] | None) -> float:
    """How far a realization missed its prediction, as the predictions are held to it:
    the relative error; but where the fix's model states a conservative figure and the
    range such fixes realised (``evidence.speedup_range``: a loop's gain from numpy is not
    in its profile), only a realization short of the figure counts against it, and one
    outside the range misses it entirely (inf)."""
    if not stated:
        return abs(predicted - realized) / realized
    if not stated[0] <= realized <= stated[1]:
        return math.inf
    return max(0.0, (predicted - realized) / realized)


def compare(
    a: Diagnosis,
    b: Diagnosis,
    applied: list[str] | None = None,
    *,
    prediction: tuple[str, float] | None = None,
) -> Comparison:
    """B against A. ``prediction``: (what was changed, the speedup predicted for it) made
    outside A's diagnosis (``probe batch-sweep``'s advice), in place of its
    recommendations."""
    la, lb = a.run["latency_ms"]["p50"], b.run["latency_ms"]["p50"]
    notes: list[str] = []
    real = _realized(a, b, notes)
    stages = [
        StageChange(
            stage=n, a_ms=ms, b_ms=real.stages_b.get(n), speedup=_ratio(ms, real.stages_b.get(n))
        )
        for n, ms in real.stages_a.items()
    ] + [
        StageChange(stage=n, a_ms=None, b_ms=ms, speedup=None)
        for n, ms in real.stages_b.items()
        if n not in real.stages_a
    ]
    unmatched = ""
    if prediction is not None:
        chosen: list[Recommendation] = []
        matched = "sweep"
        predicted: float | None = prediction[1]
    else:
        chosen, matched, unmatched = _chosen(a, applied)
        notes += [unmatched] if unmatched else []
        predicted = _predict(chosen) if chosen else None
    error = held = None
    stated = _stated_range(chosen)
    if predicted is not None and real.speedup:
        error = abs(predicted - real.speedup) / real.speedup
        held = held_error(predicted, real.speedup, stated) if stated else None
    return Comparison(
        throughput_a=a.run.get("throughput_per_s"),
        throughput_b=b.run.get("throughput_per_s"),
        throughput_speedup=real.speedup if real.basis == "throughput" else None,
        latency_p50_a_ms=la,
        latency_p50_b_ms=lb,
        latency_speedup=_ratio(la, lb),
        job_wall_a_s=real.wall_a,
        job_wall_b_s=real.wall_b,
        job_speedup=real.speedup if real.basis == "job" else None,
        basis=real.basis,
        stages=stages,
        applied=[prediction[0]] if prediction is not None else _named(chosen, _ranked(a)),
        predicted=predicted,
        matched_by=matched,
        error=error,
        notes=notes,
        unmatched=unmatched,
        stated_range=stated,
        held=held,
    )


def _stated_range(chosen: list[Recommendation]) -> tuple[float, float] | None:
    """The range the one fix compared states it realizes (``evidence.speedup_range``), if
    it states one; None for several fixes at once (their combination states none)."""
    if len(chosen) != 1:
        return None
    stated = chosen[0].evidence.get("speedup_range")
    return (float(stated[0]), float(stated[1])) if stated and len(stated) == 2 else None
