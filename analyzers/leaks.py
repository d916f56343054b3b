"""Leak detection over a memory time series: a robust trend test, and what grows.

``detect_leak(t_s, bytes_)`` -> ``LeakVerdict``. The series is cut into equal time bins
and each bin keeps its *minimum*: garbage collection and cache clears make memory
saw-tooth, and the floor of the saw-tooth is what a leak raises. The first
``warmup_share`` of the series is dropped (imports, caches filling, pools growing to
their working size). On the remaining floors:

* Theil-Sen slope (the median of pairwise slopes, Sen 1968): one step up or a few
  outliers do not move it, where least squares would follow them;
* Mann-Kendall trend test (Kendall 1975, normal approximation with its variance
  ``n(n-1)(2n+5)/18``): is the rise monotone beyond chance? Its p-value gives the
  confidence, and Sen's interval from the same variance bounds the slope;
* a leak needs all of: a significant trend, a lower slope bound above zero, growth over
  the window that is not negligible (``min_growth_bytes`` and ``min_growth_share`` of
  the level) and that outgrows the swings around the trend (``swing_factor`` times the
  10th-90th percentile range of the residuals: on a short run, a saw-tooth whose bins
  are shorter than its period would otherwise pass for a leak).

``growing_sites(memory_sites)`` diffs tracemalloc snapshots by site: the sites whose
size grew the most between the first and the last snapshot after warm-up.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

__all__ = ["LeakVerdict", "detect_leak", "growing_sites", "growing_types"]


@dataclass(frozen=True)
class LeakVerdict:
    detected: bool
    slope_bytes_per_s: float
    slope_low: float
    slope_high: float
    confidence: float
    onset_s: float | None
    level_bytes: float
    points: int
    reason: str
    top_sites: list[dict[str, Any]] = field(default_factory=list)
    growing_types: list[dict[str, Any]] = field(default_factory=list)
    seconds_to_limit: float | None = None
    limit_bytes: float | None = None
    intercept_bytes: float = 0.0  # the fitted line: intercept + slope * t (t as given)

    def to_dict(self) -> dict[str, Any]:
        return {
            "detected": self.detected,
            "slope_bytes_per_s": round(self.slope_bytes_per_s, 1),
            "slope_interval_bytes_per_s": [round(self.slope_low, 1), round(self.slope_high, 1)],
            "confidence": round(self.confidence, 4),
            "onset_s": None if self.onset_s is None else round(self.onset_s, 2),
            "level_bytes": int(self.level_bytes),
            "points": self.points,
            "reason": self.reason,
            "seconds_to_limit": self.seconds_to_limit,
            "limit_bytes": self.limit_bytes,
            "top_sites": self.top_sites,
            "growing_types": self.growing_types,
        }


def _none(reason: str, points: int = 0, level: float = 0.0) -> LeakVerdict:
    return LeakVerdict(False, 0.0, 0.0, 0.0, 0.0, None, level, points, reason)


def _mann_kendall(y: np.ndarray) -> tuple[float, float]:
    """(S, variance of S) for the series ``y`` (no tie correction: floors rarely tie)."""
    n = len(y)
    diff = np.sign(y[None, :] - y[:, None])
    s = float(np.triu(diff, k=1).sum())
    var = n * (n - 1) * (2 * n + 5) / 18.0
    return s, var


def detect_leak(
    t_s: np.ndarray,
    bytes_: np.ndarray,
    *,
    bins: int = 40,
    warmup_share: float = 0.25,
    alpha: float = 0.01,
    min_growth_bytes: float = 2 * 1024 * 1024,
    min_growth_share: float = 0.02,
    swing_factor: float = 1.0,
    limit_bytes: float | None = None,
) -> LeakVerdict:
    t = np.asarray(t_s, dtype="float64")
    y = np.asarray(bytes_, dtype="float64")
    keep = np.isfinite(t) & np.isfinite(y)
    t, y = t[keep], y[keep]
    if len(t) < 8 or t[-1] - t[0] <= 0:
        return _none("too few memory readings to judge a trend", len(t))
    order = np.argsort(t, kind="stable")
    t, y = t[order], y[order]
    start = t[0] + warmup_share * (t[-1] - t[0])
    t, y = t[t >= start], y[t >= start]
    edges = np.linspace(t[0], t[-1], bins + 1)
    which = np.clip(np.searchsorted(edges, t, side="right") - 1, 0, bins - 1)
    frame = pd.DataFrame({"b": which, "t": t, "y": y}).groupby("b")
    floor_t = frame["t"].mean().to_numpy()
    floor_y = frame["y"].min().to_numpy()
    n = len(floor_y)
    level = float(np.median(floor_y))
    if n < 6:
        return _none("too few memory readings after warm-up", n, level)
    i, j = np.triu_indices(n, k=1)
    slopes = (floor_y[j] - floor_y[i]) / np.maximum(floor_t[j] - floor_t[i], 1e-9)
    slopes.sort()
    slope = float(np.median(slopes))
    s, var = _mann_kendall(floor_y)
    z = (s - np.sign(s)) / math.sqrt(var) if s != 0 else 0.0
    p_up = 0.5 * math.erfc(z / math.sqrt(2))  # one-sided: growth only
    z_crit = 2.5758  # two-sided 99% for Sen's interval
    c = z_crit * math.sqrt(var)
    m = len(slopes)
    lo_i = int(max(0, math.floor((m - c) / 2)))
    hi_i = int(min(m - 1, math.ceil((m + c) / 2)))
    low, high = float(slopes[lo_i]), float(slopes[hi_i])
    span = float(floor_t[-1] - floor_t[0])
    growth = slope * span
    enough = growth >= max(min_growth_bytes, min_growth_share * level)
    # The rise must also outgrow the swings around it: a saw-tooth whose bins are
    # shorter than its period leaves its floors noisy, and a short run cannot tell a
    # heap settling from a leak. Swings: the 10th-90th percentile range of the readings
    # around the fitted line.
    intercept = float(np.median(floor_y - slope * floor_t))
    residual = y - (slope * t + intercept)
    swing = float(np.percentile(residual, 90) - np.percentile(residual, 10))
    clear = growth >= swing_factor * swing
    detected = bool(p_up < alpha and low > 0 and enough and clear)
    if detected:
        reason = f"memory floor rises {slope / 1e6:.3f} MB/s (p = {p_up:.1e})"
    elif p_up >= alpha:
        reason = "no significant upward trend"
    elif not enough:
        reason = f"trend too small to matter ({growth / 1e6:.2f} MB over the window)"
    else:
        reason = (
            f"rise of {growth / 1e6:.1f} MB within swings of {swing / 1e6:.1f} MB: "
            "not yet distinguishable from a saw-tooth (a longer run will tell)"
        )
    onset = float(floor_t[0]) if detected else None
    to_limit = None
    if detected and limit_bytes and slope > 0:
        to_limit = max(0.0, (limit_bytes - float(y[-1])) / slope)
    return LeakVerdict(
        detected,
        slope,
        low,
        high,
        1.0 - p_up,
        onset,
        level,
        n,
        reason,
        seconds_to_limit=to_limit,
        limit_bytes=limit_bytes,
        intercept_bytes=intercept,
    )


def growing_sites(memory_sites: pd.DataFrame, top: int = 5) -> list[dict[str, Any]]:
    """Allocation sites that grew most between the first and last tracemalloc snapshot."""
    sites = memory_sites[memory_sites["site"] != "<other>"]
    if sites["snapshot"].nunique() < 2:
        return []
    first, last = sites["snapshot"].min(), sites["snapshot"].max()
    span_s = (
        float(
            sites.loc[sites["snapshot"] == last, "ts_ns"].max()
            - sites.loc[sites["snapshot"] == first, "ts_ns"].min()
        )
        / 1e9
    )
    size = sites.pivot_table(
        index="site", columns="snapshot", values="size_bytes", aggfunc="sum", fill_value=0
    )
    count = sites.pivot_table(
        index="site", columns="snapshot", values="count", aggfunc="sum", fill_value=0
    )
    grew = (size[last] - size[first]).sort_values(ascending=False)
    grew = grew[grew > 0].head(top)
    tracebacks = sites.drop_duplicates("site").set_index("site")["traceback"]
    return [
        {
            "site": str(site),
            "grew_bytes": int(delta),
            "bytes_per_s": round(delta / span_s, 1) if span_s > 0 else None,
            "count_grew": int(count.loc[site, last] - count.loc[site, first]),
            "traceback": str(tracebacks.get(site, "") or ""),
        }
        for site, delta in grew.items()
    ]


def growing_types(gc_types: pd.DataFrame, top: int = 5) -> list[dict[str, Any]]:
    """Object types whose live count grew from the first gc snapshot to the last."""
    if gc_types["snapshot"].nunique() < 2:
        return []
    counts = gc_types.pivot_table(
        index="type", columns="snapshot", values="count", aggfunc="sum", fill_value=0
    )
    first, last = counts.columns.min(), counts.columns.max()
    grew = (counts[last] - counts[first]).sort_values(ascending=False)
    return [{"type": str(k), "count_grew": int(v)} for k, v in grew[grew > 0].head(top).items()]
