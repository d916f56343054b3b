"""Trend statistics on memory series: robust slopes, tests and shapes (numpy only).

* **Theil-Sen slope** (the median of pairwise slopes, Sen 1968): a step or a few outliers
  do not move it where least squares would follow them; **Sen's interval**, from the
  Mann-Kendall variance, bounds it without assuming a noise distribution. Its breakdown
  point is 29%: with fewer than four points one outlier decides it.
* **Mann-Kendall** (Kendall 1975; normal approximation, variance ``n(n-1)(2n+5)/18``):
  is the rise monotone beyond chance? Rank-based, so one-off outliers and the noise's
  shape do not matter. A bootstrap would give the same bound at a thousand times the
  cost, which a watchdog checking every second cannot pay.
* **Floors.** Garbage collection, arena release, caches and batch buffers make memory
  saw-tooth and burst; a leak raises the *floor*: the lowest the process returns to.
  ``bin_floors`` takes each bin's minimum: a saw-tooth's troughs and a burst's
  baseline hold it flat, a leak lifts it at every trough.
* **Shapes.** A leak keeps its pace (``steady``); warm-up slows down; a one-off
  allocation is one step (``step_fits_better``); allocator steps make a staircase,
  which a line fits better than one step.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

__all__ = [
    "Trend",
    "best_step",
    "bin_floors",
    "bin_starts",
    "estimate_onset",
    "steady",
    "step_fits_better",
    "trend",
]

_Z99 = 2.5758  # two-sided 99%, for Sen's interval


@dataclass(frozen=True)
class Trend:
    slope: float  # Theil-Sen, bytes per unit of x
    low: float  # Sen's 99% interval
    high: float
    p_up: float  # one-sided Mann-Kendall p-value for an upward trend
    intercept: float

    def significant(self, alpha: float) -> bool:
        """A rise beyond chance: Mann-Kendall at ``alpha`` and Sen's lower bound above 0."""
        return self.p_up < alpha and self.low > 0


def trend(x: np.ndarray, y: np.ndarray) -> Trend:
    """Theil-Sen slope with Sen's interval and the Mann-Kendall p-value (``len(y) >= 3``)."""
    n = len(y)
    i, j = np.triu_indices(n, k=1)
    dy = y[j] - y[i]
    s = float(np.sign(dy).sum())
    var = n * (n - 1) * (2 * n + 5) / 18.0
    z = (s - math.copysign(1.0, s)) / math.sqrt(var) if s != 0 else 0.0
    p_up = 0.5 * math.erfc(z / math.sqrt(2))
    slopes = np.sort(dy / np.maximum(x[j] - x[i], 1e-12))
    m = len(slopes)
    c = _Z99 * math.sqrt(var)
    lo_i = int(max(0, math.floor((m - c) / 2)))
    hi_i = int(min(m - 1, math.ceil((m + c) / 2)))
    slope = float(np.median(slopes))
    return Trend(
        slope, float(slopes[lo_i]), float(slopes[hi_i]), p_up, float(np.median(y - slope * x))
    )


def estimate_onset(x: np.ndarray, y: np.ndarray) -> float:
    """When the growth began: the knot of the least-squares hinge (flat, then a line)."""
    n = len(x)
    if n < 4:
        return float(x[0])
    knots = x[: n - 2]
    hinge = np.maximum(0.0, x[None, :] - knots[:, None])  # one row per candidate knot
    hc = hinge - hinge.mean(axis=1, keepdims=True)
    yc = y - y.mean()
    sxx = (hc * hc).sum(axis=1)
    sxy = (hc * yc).sum(axis=1)
    sse = float((yc * yc).sum()) - np.where(sxx > 0, sxy * sxy / np.maximum(sxx, 1e-300), 0.0)
    return float(knots[int(np.argmin(sse))])


def steady(older: float, newer: float, *paces: float, sustain: float) -> bool:
    """Both halves of a window climb, each at ``sustain`` of the faster half and of every
    other pace given (the whole window's, the window before's): a leak keeps its pace, a
    step climbs in one half only, warm-up slows down."""
    return min(older, newer) >= sustain * max(older, newer, *paces) > 0


def step_fits_better(x: np.ndarray, y: np.ndarray, tr: Trend) -> bool:
    """Is ``y`` better described by one jump between two flat levels than by the line?
    A one-off allocation is one jump; a leak, and a staircase of allocator steps, a line.

    Judged on absolute deviations (each level at its median, the line Theil-Sen's), not
    squares: one reading far off -- a burst freed at the end, a teardown -- would
    otherwise outweigh a whole window of floors on a line."""
    line = float(np.abs(y - (tr.intercept + tr.slope * x)).sum())
    return best_step(y)[1] < line


def best_step(y: np.ndarray) -> tuple[int, float]:
    """Where one jump between two flat levels fits ``y`` best: (the first index after the
    jump, the summed absolute deviations from the two levels' medians)."""
    fits = [
        float(np.abs(y[:k] - np.median(y[:k])).sum() + np.abs(y[k:] - np.median(y[k:])).sum())
        for k in range(1, len(y))
    ]
    k = int(np.argmin(fits))
    return k + 1, fits[k]


def bin_floors(x: np.ndarray, y: np.ndarray, bins: int) -> tuple[np.ndarray, np.ndarray]:
    """Mean x and minimum reading of each of ``bins`` equal bins of x (empty ones dropped)."""
    starts = np.flatnonzero(np.r_[True, np.diff(_bin_of(x, bins)) != 0])
    counts = np.diff(np.r_[starts, len(x)])
    return np.add.reduceat(x, starts) / counts, np.minimum.reduceat(y, starts)


def bin_starts(x: np.ndarray, bins: int) -> np.ndarray:
    """Where each of ``bin_floors``' bins of x starts (the same bins, empty ones dropped)."""
    edges = np.linspace(x[0], x[-1], bins + 1)
    return edges[np.unique(_bin_of(x, bins))]


def _bin_of(x: np.ndarray, bins: int) -> np.ndarray:
    """Which of ``bins`` equal bins of x (sorted) each value falls in."""
    edges = np.linspace(x[0], x[-1], bins + 1)
    return np.clip(np.searchsorted(edges, x, side="right") - 1, 0, bins - 1)
