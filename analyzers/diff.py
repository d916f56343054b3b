"""Predicted vs realized: what RUN_B gained over RUN_A, beside what A's diagnosis predicted.

``compare(a, b, applied=None)`` -> ``Comparison``. Realized speedups are ratios of B over
A: throughput (requests per second over the serving window), latency (A's p50 over
B's), and per stage the time each request spends in it (``path_s`` per request). The
prediction is that of the recommendations named by ``applied`` (several fixes on
disjoint stages combine by Amdahl); without ``applied``, that of A's top recommendation
(the change the diagnosis asked for).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import pandas as pd

from probe.analyzers.amdahl import amdahl_combined
from probe.analyzers.diagnosis import Diagnosis
from probe.analyzers.recommendations import Recommendation

__all__ = ["Comparison", "StageChange", "compare"]


@dataclass(frozen=True)
class StageChange:
    stage: str
    a_ms_per_request: float | None
    b_ms_per_request: float | None
    speedup: float | None


@dataclass(frozen=True)
class Comparison:
    throughput_a: float | None
    throughput_b: float | None
    throughput_speedup: float | None
    latency_p50_a_ms: float | None
    latency_p50_b_ms: float | None
    latency_speedup: float | None
    stages: list[StageChange]
    applied: list[str]
    predicted: float | None
    matched_by: str  # "given" or "top", or "" when nothing was predicted
    error: float | None  # |predicted - realized| / realized, on throughput
    notes: list[str]

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
            "stages": [s.__dict__ for s in self.stages],
            "applied": self.applied,
            "predicted_speedup": self.predicted,
            "matched_by": self.matched_by,
            "relative_error": self.error,
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


def compare(a: Diagnosis, b: Diagnosis, applied: list[str] | None = None) -> Comparison:
    ta, tb = a.run.get("throughput_per_s"), b.run.get("throughput_per_s")
    la, lb = a.run["latency_ms"]["p50"], b.run["latency_ms"]["p50"]
    realized = _ratio(tb, ta)
    stages_a, stages_b = _per_request_ms(a), _per_request_ms(b)
    stages = [
        StageChange(
            stage=name,
            a_ms_per_request=ms,
            b_ms_per_request=stages_b.get(name),
            speedup=_ratio(ms, stages_b.get(name)),
        )
        for name, ms in stages_a.items()
    ] + [
        StageChange(stage=n, a_ms_per_request=None, b_ms_per_request=ms, speedup=None)
        for n, ms in stages_b.items()
        if n not in stages_a
    ]
    notes: list[str] = []
    by_id = {r.id: r for r in a.recommendations}
    chosen: list[Recommendation] = []
    matched = ""
    if applied:
        missing = [i for i in applied if i not in by_id]
        if missing:
            known = ", ".join(by_id) or "none"
            notes.append(
                f"RUN_A's diagnosis has no recommendation {', '.join(missing)} (it has: {known})"
            )
        chosen = [by_id[i] for i in applied if i in by_id]
        matched = "given" if chosen else ""
    elif a.recommendations:
        # Without --applied: the top recommendation, the change the diagnosis asked for.
        # (Picking whichever prediction lands closest would flatter the estimates.)
        speed = [r for r in a.recommendations if r.id != "fix_leak"]
        chosen = [(speed or a.recommendations)[0]]
        matched = "top"
    predicted = _predict(chosen) if chosen else None
    error = None
    if predicted is not None and realized:
        error = abs(predicted - realized) / realized
    if not a.breakdown.requests.count or not b.breakdown.requests.count:
        notes.append(
            "no requests in one of the runs: throughput needs probe.request spans "
            "(or one outermost stage)"
        )
    return Comparison(
        throughput_a=ta,
        throughput_b=tb,
        throughput_speedup=realized,
        latency_p50_a_ms=la,
        latency_p50_b_ms=lb,
        latency_speedup=_ratio(la, lb),
        stages=stages,
        applied=[r.id for r in chosen],
        predicted=predicted,
        matched_by=matched,
        error=error,
        notes=notes,
    )
