"""Leak detection over a memory time series: robust trend tests, and what grows.

Two entry points share one set of statistics:

* ``detect_leak(t_s, bytes_)`` judges a recorded series at once (``probe run``'s
  diagnosis, and ``probe watch``'s final word on a process that lived too briefly for
  the live tests below). The first ``warmup_share`` is dropped; the rest is cut into
  ``bins`` equal bins.
* ``LeakWatch`` judges a live series reading by reading (``probe watch``, the in-process
  watchdog) in bounded memory: readings are folded into bins of ``bin_s`` (ten readings
  at the default interval) kept in a ring buffer, plus the last ``fast_window_s`` of raw
  readings.

The statistics, and why these:

* **Floors.** Garbage collection, arena release and cache flushes make memory saw-tooth;
  a leak raises the *floor* of the saw-tooth. Each bin keeps its minimum, and the slow
  test compares floors over spans at least as long as a collection cycle.
* **Theil-Sen slope** (the median of pairwise slopes, Sen 1968): a step or a few outliers
  do not move it where least squares would follow them; **Sen's interval**, from the
  Mann-Kendall variance, bounds it without assuming a noise distribution.
* **Mann-Kendall** (Kendall 1975; normal approximation, variance ``n(n-1)(2n+5)/18``):
  is the rise monotone beyond chance? Rank-based, so one-off outliers and the noise's
  shape do not matter. A bootstrap would give the same bound at a thousand times the
  cost, which a watchdog checking every second cannot pay.

Trend tests alone mistake healthy shapes for leaks, so the live tests add what tells
them apart -- each shape names the test that rejects it:

* the **slow test** (``window_s``, 30 min): the window's floors rise significantly
  (Mann-Kendall at ``alpha``, Sen's lower bound > 0), by a growth that matters
  (``min_growth_bytes`` and ``min_growth_share`` of the level); the newest floors stand
  above every floor of the ``recall_s`` before the window (**new high**: a cache that
  fills and is flushed, or a saw-tooth slower than the bins, climbs every cycle but
  never past its earlier peaks); the growth is **steady**: each half of the window climbs
  at ``sustain`` of the faster half, of the whole window and of the window before it
  (warm-up that plateaus decelerates -- with tau = 20 min the newer half of a 30-min
  window climbs at 0.47 of the older, a leak at 1.0 -- and a step rises in one half
  only), and a line fits the floors better than one jump between two levels; and all of
  this holds for ``confirm_share`` of a window (a step riding a cache's climbs can pass
  for a few minutes, a leak keeps passing).
* the **fast test** (``fast_window_s``, 60 s) for leaks fast enough to matter in
  minutes: the level now (median of the last tenth of the window) stands above every
  bin's median of the ``recall_s`` before the window by ``fast_margin`` of it (a
  saw-tooth and a cache climb fast but back to where they have been; in 60 s only a
  growth of ``fast_margin`` of the level per minute clears this), and *both halves* of
  the window climb significantly and at a like pace (**both halves**: a one-off step
  rises in one half only).
* **Warm-up**: nothing is judged in the first ``warmup_s`` (a setting: services differ),
  and the steadiness test covers the slow end of warm-ups that outlast it.

The false-alarm rate is measured on 200 simulated 24-hour series of every healthy shape,
and the detection delays on leaks of 10 KB/s and 1 MB/s (``benchmarks/leak_corpus.py``).

``growing_sites`` and ``growing_types`` diff tracemalloc and gc snapshots (pandas tables)
to say what grows; the rest of this module needs numpy only, so that the in-process
watchdog can use it without importing pandas into the watched service.
"""

from __future__ import annotations

import itertools
import math
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    import pandas as pd

    from probe.watchdog.formats import AttributionSnapshot

__all__ = [
    "LeakVerdict",
    "LeakWatch",
    "Trend",
    "WatchSettings",
    "detect_leak",
    "estimate_onset",
    "growing_sites",
    "growing_types",
    "snapshot_growth",
    "trend",
]

_Z99 = 2.5758  # two-sided 99%, for Sen's interval


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
    test: str = "run"  # which test spoke: "run" (a recorded series), "fast", "slow"
    at_s: float | None = None  # when the verdict was reached (same clock as the series)
    growing_containers: list[dict[str, Any]] = field(default_factory=list)  # watchdog only

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
            "test": self.test,
            "seconds_to_limit": (
                None if self.seconds_to_limit is None else round(self.seconds_to_limit, 1)
            ),
            "intercept_bytes": round(self.intercept_bytes),  # the fit: intercept + slope * t
            "limit_bytes": self.limit_bytes,
            "top_sites": self.top_sites,
            "growing_types": self.growing_types,
            "growing_containers": self.growing_containers,
        }


def _none(reason: str, points: int = 0, level: float = 0.0) -> LeakVerdict:
    return LeakVerdict(
        detected=False,
        slope_bytes_per_s=0.0,
        slope_low=0.0,
        slope_high=0.0,
        confidence=0.0,
        onset_s=None,
        level_bytes=level,
        points=points,
        reason=reason,
    )


@dataclass(frozen=True)
class Trend:
    slope: float  # Theil-Sen, bytes per second
    low: float  # Sen's 99% interval
    high: float
    p_up: float  # one-sided Mann-Kendall p-value for an upward trend
    intercept: float


def trend(t: np.ndarray, y: np.ndarray) -> Trend:
    """Theil-Sen slope with Sen's interval and the Mann-Kendall p-value (``len(y) >= 3``)."""
    n = len(y)
    i, j = np.triu_indices(n, k=1)
    dy = y[j] - y[i]
    s = float(np.sign(dy).sum())
    var = n * (n - 1) * (2 * n + 5) / 18.0
    z = (s - math.copysign(1.0, s)) / math.sqrt(var) if s != 0 else 0.0
    p_up = 0.5 * math.erfc(z / math.sqrt(2))
    slopes = np.sort(dy / np.maximum(t[j] - t[i], 1e-12))
    m = len(slopes)
    c = _Z99 * math.sqrt(var)
    lo_i = int(max(0, math.floor((m - c) / 2)))
    hi_i = int(min(m - 1, math.ceil((m + c) / 2)))
    slope = float(np.median(slopes))
    return Trend(
        slope, float(slopes[lo_i]), float(slopes[hi_i]), p_up, float(np.median(y - slope * t))
    )


def estimate_onset(t: np.ndarray, y: np.ndarray) -> float:
    """When the growth began: the knot of the least-squares hinge (flat, then a line)."""
    n = len(t)
    if n < 4:
        return float(t[0])
    knots = t[: n - 2]
    x = np.maximum(0.0, t[None, :] - knots[:, None])  # one row per candidate knot
    xc = x - x.mean(axis=1, keepdims=True)
    yc = y - y.mean()
    sxx = (xc * xc).sum(axis=1)
    sxy = (xc * yc).sum(axis=1)
    sse = float((yc * yc).sum()) - np.where(sxx > 0, sxy * sxy / np.maximum(sxx, 1e-300), 0.0)
    return float(knots[int(np.argmin(sse))])


def _steady(older: float, newer: float, *paces: float, sustain: float) -> bool:
    """Both halves of a window climb, each at ``sustain`` of the faster half and of every
    other pace given (the whole window's, the window before's): a leak keeps its pace, a
    step climbs in one half only, warm-up slows down."""
    return min(older, newer) >= sustain * max(older, newer, *paces) > 0


def _step_fits_better(t: np.ndarray, y: np.ndarray, tr: Trend) -> bool:
    """Is ``y`` better described by one jump between two flat levels than by the line?
    A one-off step riding a cache's climbs passes the trend tests; it fails this one."""
    line_sse = float(((y - (tr.intercept + tr.slope * t)) ** 2).sum())
    n = len(y)
    c1, c2 = np.cumsum(y), np.cumsum(y * y)
    k = np.arange(1, n)  # split after k points
    left = c2[k - 1] - c1[k - 1] ** 2 / k
    right = (c2[-1] - c2[k - 1]) - (c1[-1] - c1[k - 1]) ** 2 / (n - k)
    return float((left + right).min()) < line_sse


def _bin_floors(t: np.ndarray, y: np.ndarray, bins: int) -> tuple[np.ndarray, np.ndarray]:
    """Mean time and minimum reading of each of ``bins`` equal time bins (empty ones dropped)."""
    edges = np.linspace(t[0], t[-1], bins + 1)
    which = np.clip(np.searchsorted(edges, t, side="right") - 1, 0, bins - 1)
    starts = np.flatnonzero(np.r_[True, which[1:] != which[:-1]])
    counts = np.diff(np.r_[starts, len(t)])
    return np.add.reduceat(t, starts) / counts, np.minimum.reduceat(y, starts)


def detect_leak(
    t_s: np.ndarray,
    bytes_: np.ndarray,
    *,
    bins: int = 40,
    warmup_share: float = 0.25,
    alpha: float = 0.01,
    min_growth_bytes: float = 2 * 1024 * 1024,
    min_growth_share: float = 0.02,
    swing_factor: float = 2.0,
    limit_bytes: float | None = None,
) -> LeakVerdict:
    """Judge a recorded series: its floors after warm-up rise significantly, by a growth
    that matters and outgrows the swings around the trend ``swing_factor`` times (on a
    short run a saw-tooth whose bins are shorter than its period would otherwise pass for
    a leak: the healthy sample's 1-s saw-tooth over a 6-s run rose 0.5-1.1x its swings
    across runs, and once passed a factor of 1; the leaky sample's rise is 23x)."""
    t = np.asarray(t_s, dtype="float64")
    y = np.asarray(bytes_, dtype="float64")
    keep = np.isfinite(t) & np.isfinite(y)
    t, y = t[keep], y[keep]
    if len(t) < 8 or t[-1] - t[0] <= 0:
        return _none("too few memory readings to judge a trend", len(t))
    order = np.argsort(t, kind="stable")
    t, y = t[order], y[order]
    whole = (t, y)
    start = t[0] + warmup_share * (t[-1] - t[0])
    t, y = t[t >= start], y[t >= start]
    floor_t, floor_y = _bin_floors(t, y, bins)
    n = len(floor_y)
    level = float(np.median(floor_y))
    if n < 6:
        return _none("too few memory readings after warm-up", n, level)
    tr = trend(floor_t, floor_y)
    growth = tr.slope * float(floor_t[-1] - floor_t[0])
    enough = growth >= max(min_growth_bytes, min_growth_share * level)
    residual = y - (tr.slope * t + tr.intercept)
    swing = float(np.percentile(residual, 90) - np.percentile(residual, 10))
    clear = growth >= swing_factor * swing
    detected = bool(tr.p_up < alpha and tr.low > 0 and enough and clear)
    return LeakVerdict(
        detected=detected,
        slope_bytes_per_s=tr.slope,
        slope_low=tr.low,
        slope_high=tr.high,
        confidence=1.0 - tr.p_up,
        onset_s=estimate_onset(*_bin_floors(*whole, bins)) if detected else None,
        level_bytes=level,
        points=n,
        reason=_run_reason(tr, detected, alpha, enough, growth, swing),
        seconds_to_limit=_time_to_limit(limit_bytes, float(y[-1]), tr.slope) if detected else None,
        limit_bytes=limit_bytes,
        intercept_bytes=tr.intercept,
        at_s=float(t[-1]),
    )


def _run_reason(
    tr: Trend, detected: bool, alpha: float, enough: bool, growth: float, swing: float
) -> str:
    if detected:
        return f"memory floor rises {tr.slope / 1e6:.3f} MB/s (p = {tr.p_up:.1e})"
    if tr.p_up >= alpha:
        return "no significant upward trend"
    if not enough:
        return f"trend too small to matter ({growth / 1e6:.2f} MB over the window)"
    return (
        f"rise of {growth / 1e6:.1f} MB within swings of {swing / 1e6:.1f} MB: "
        "not yet distinguishable from a saw-tooth (a longer run will tell)"
    )


def _time_to_limit(limit: float | None, level: float, slope: float) -> float | None:
    if not limit or slope <= 0:
        return None
    return max(0.0, (limit - level) / slope)


@dataclass(frozen=True)
class WatchSettings:
    """The live detector's knobs; every default is argued in the module docstring."""

    interval_s: float = 1.0
    window_s: float = 1800.0
    fast_window_s: float = 60.0
    warmup_s: float = 600.0
    recall_s: float = 3600.0  # how far back "new high" looks (> a cache's flush period)
    alpha: float = 0.01
    fast_margin: float = 0.1
    sustain: float = 0.6
    min_growth_bytes: float = 2 * 1024 * 1024
    min_growth_share: float = 0.02
    floors_per_window: int = 12
    confirm_share: float = 0.1  # of the window: the slow test must hold this long (a step
    # riding a cache's climb passes the tests for a few minutes, a leak keeps passing)
    history_s: float = 7 * 86400.0  # bins kept for the report's chart (bounded memory)

    @property
    def bin_s(self) -> float:
        return 10 * self.interval_s

    def __post_init__(self) -> None:
        for name in ("interval_s", "window_s", "fast_window_s"):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be positive")
        if self.warmup_s < 0:
            raise ValueError("warmup_s must not be negative")
        if self.window_s < self.floors_per_window * self.bin_s:
            raise ValueError(
                f"the window ({self.window_s:g} s) must hold {self.floors_per_window} bins "
                f"of {self.bin_s:g} s (ten readings at the interval)"
            )
        if self.fast_window_s < 8 * self.interval_s:
            raise ValueError("the fast window must hold at least 8 readings")


class LeakWatch:
    """Live leak detection in bounded memory: feed ``add(t, bytes)``, read ``verdict``.

    ``add`` returns the verdict the moment a leak is first flagged (then ``None`` again:
    the leak stays flagged, its rate and time to limit keep being updated in ``verdict``).
    Readings must come in time order; the clock is the caller's.
    """

    def __init__(self, settings: WatchSettings | None = None, limit_bytes: float | None = None):
        self.settings = s = settings or WatchSettings()
        self.limit_bytes = limit_bytes
        self._raw: deque[tuple[float, float]] = deque(
            maxlen=int(math.ceil(s.fast_window_s / s.interval_s)) + 4
        )
        cap = int(math.ceil(s.history_s / s.bin_s)) + 1
        self._bt = np.zeros(cap)  # bin mean time
        self._bmin = np.zeros(cap)
        self._bmed = np.zeros(cap)
        self._bmax = np.zeros(cap)
        self._bins = 0  # bins closed so far (the ring holds the last ``cap``)
        self._open_t: list[float] = []
        self._open_y: list[float] = []
        self._open_start: float | None = None
        self._t0: float | None = None
        self._last_t = -math.inf
        self._envelope: float | None = None
        self._slow_since: float | None = None
        self._level_n = max(3, int(s.fast_window_s / s.interval_s) // 10)
        self.readings = 0
        self.leak: LeakVerdict | None = None
        self._status: LeakVerdict = _none("warming up")
        self._stale = False
        g = max(1, round(s.window_s / s.floors_per_window / s.bin_s))
        self._group = g
        self._window_bins = g * s.floors_per_window
        self._recall_groups = max(1, int(math.ceil(s.recall_s / (g * s.bin_s))))

    # -- ingestion ---------------------------------------------------------------------
    def add(self, t_s: float, bytes_: float) -> LeakVerdict | None:
        if not (math.isfinite(t_s) and math.isfinite(bytes_)) or t_s <= self._last_t:
            return None  # out of order or unreadable: dropped, never raised
        self._last_t = t_s
        self.readings += 1
        if self._t0 is None:
            self._t0 = t_s
        self._raw.append((t_s, bytes_))
        was_leaking = self.leak is not None
        if self._open_start is None:
            self._open_start = t_s
        elif t_s - self._open_start >= self.settings.bin_s:
            self._close_bin()
            self._open_start = t_s
            self._bin_closed()
        self._open_t.append(t_s)
        self._open_y.append(bytes_)
        if self.leak is None:
            self._judge_fast(t_s)
        return self.leak if self.leak is not None and not was_leaking else None

    def _close_bin(self) -> None:
        y = np.asarray(self._open_y)
        k = self._bins % len(self._bt)
        self._bt[k] = sum(self._open_t) / len(self._open_t)
        self._bmin[k], self._bmax[k], self._bmed[k] = y.min(), y.max(), float(np.median(y))
        self._bins += 1
        self._open_t, self._open_y = [], []

    def _last_bins(self, n: int) -> tuple[np.ndarray, ...]:
        """(time, min, median, max) of the last ``n`` closed bins, oldest first."""
        n = min(n, self._bins, len(self._bt))
        idx = np.arange(self._bins - n, self._bins) % len(self._bt)
        return self._bt[idx], self._bmin[idx], self._bmed[idx], self._bmax[idx]

    def bins(self) -> dict[str, np.ndarray]:
        """Every kept bin (time, min, median, max): the series behind the report's chart."""
        t, lo, med, hi = self._last_bins(len(self._bt))
        return {"t_s": t, "min": lo, "median": med, "max": hi}

    # -- the tests -----------------------------------------------------------------------
    def _judged_from(self) -> float:
        assert self._t0 is not None
        return self._t0 + self.settings.warmup_s

    def _judge_fast(self, now: float) -> None:
        s = self.settings
        if self._envelope is None or now - s.fast_window_s < self._judged_from():
            return
        # cheap pre-test on every reading: the median of the last few readings
        last = sorted(y for _, y in itertools.islice(reversed(self._raw), self._level_n))
        level = last[len(last) // 2]
        if level - self._envelope < s.fast_margin * self._envelope:
            return
        start = now - s.fast_window_s
        raw = [(t, y) for t, y in self._raw if t >= start]
        if len(raw) < 8:
            return
        t = np.fromiter((v for v, _ in raw), float, len(raw))
        y = np.fromiter((v for _, v in raw), float, len(raw))
        half = len(t) // 2
        older, newer, tr = trend(t[:half], y[:half]), trend(t[half:], y[half:]), trend(t, y)
        if older.p_up >= s.alpha or newer.p_up >= s.alpha or tr.low <= 0:
            return
        # a step inside one half makes that half significant and steep, the other flat
        if not _steady(older.slope, newer.slope, tr.slope, sustain=s.sustain):
            return
        reason = (
            f"memory rose {(level - self._envelope) / 1e6:.1f} MB above its recent high "
            f"in {s.fast_window_s:g} s, climbing steadily ({tr.slope / 1e6:.3f} MB/s)"
        )
        self._flag(tr, level, len(t), reason, "fast", now)

    def _update_envelope(self) -> None:
        """The fast test's reference: the highest bin median of the ``recall_s`` that ended
        before the fast window (a bin later, at worst: computed once per bin, not per reading)."""
        s = self.settings
        bt, _, bmed, _ = self._last_bins(int(math.ceil((s.recall_s + s.fast_window_s) / s.bin_s)))
        start = self._last_t - s.fast_window_s
        before = (bt < start - s.bin_s / 2) & (bt >= start - s.recall_s)
        self._envelope = float(bmed[before].max()) if before.any() else None

    def _bin_closed(self) -> None:
        if self.leak is not None:
            self._update_leak()
            return
        self._update_envelope()
        window = self._slow_window()
        if window is None:
            self._status = replace(self._status, reason="warming up", at_s=self._last_t)
            return
        wt, wy, ht, history = window
        if len(history) and wy[-2:].max() <= history.max():
            # the cheap test first: most readings of a healthy service end here
            self._slow_since = None
            self._stale = True
            return
        self._judge_slow(wt, wy, ht, history, flag=True)

    def _slow_window(
        self,
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None:
        """Floors of the window (times, floors) and of the ``recall_s`` before it, grouped
        from the newest bin back so both sides have the same width (a min over more readings
        is lower: unequal groups would bias the comparison)."""
        s = self.settings
        g, w = self._group, self._window_bins
        bt, bmin, _, _ = self._last_bins(w + self._recall_groups * g)
        if len(bt) < w or bt[-w] - s.bin_s / 2 < self._judged_from():
            return None
        usable = len(bt) - len(bt) % g
        ft = bt[len(bt) - usable :].reshape(-1, g).mean(axis=1)
        fy = bmin[len(bt) - usable :].reshape(-1, g).min(axis=1)
        k = s.floors_per_window
        # Warm-up is neither judged nor compared against: a start-up jump in the window
        # before read as "it climbed faster then" and held a steady leak off until the jump
        # left the recall (the leaky sample's model load, 50 MB at 3.5 s: CI's red test).
        ht, hy = ft[:-k], fy[:-k]
        served = ht - g * s.bin_s / 2 >= self._judged_from() - s.bin_s / 2
        return ft[-k:], fy[-k:], ht[served], hy[served]

    @property
    def verdict(self) -> LeakVerdict:
        """The latest judgement: the leak once flagged, else the slow test's figures."""
        if self._stale and self.leak is None:
            window = self._slow_window()
            if window is not None:
                self._judge_slow(*window, flag=False)
            self._stale = False
        return self._status

    def _judge_slow(
        self,
        wt: np.ndarray,
        wy: np.ndarray,
        ht: np.ndarray,
        history: np.ndarray,
        *,
        flag: bool,
    ) -> None:
        s = self.settings
        k = len(wy)
        tr = trend(wt, wy)
        level = float(np.median(wy))
        growth = tr.slope * float(wt[-1] - wt[0])
        failed = self._slow_failures(wt, wy, ht, history, tr, growth, level)
        now = self._last_t
        if flag:
            if failed:
                self._slow_since = None
            elif self._slow_since is None:
                self._slow_since = now
        if not failed and (
            self._slow_since is None or now - self._slow_since < s.confirm_share * s.window_s
        ):
            since = 0.0 if self._slow_since is None else now - self._slow_since
            failed = [f"rising steadily for {since:.0f} s: confirming"]
        if failed or not flag:
            self._status = LeakVerdict(
                detected=False,
                slope_bytes_per_s=tr.slope,
                slope_low=tr.low,
                slope_high=tr.high,
                confidence=1.0 - tr.p_up,
                onset_s=None,
                level_bytes=level,
                points=k,
                reason=failed[0],
                intercept_bytes=tr.intercept,
                test="slow",
                at_s=now,
            )
            return
        span = f"{s.window_s / 60:g} min" if s.window_s >= 120 else f"{s.window_s:g} s"
        reason = (
            f"memory floor rose {growth / 1e6:.1f} MB in {span} at a steady "
            f"{tr.slope / 1e3:.1f} KB/s, above every earlier floor"
        )
        self._flag(tr, float(wy[-1]), k, reason, "slow", now)

    def _slow_failures(
        self,
        wt: np.ndarray,
        wy: np.ndarray,
        ht: np.ndarray,
        history: np.ndarray,
        tr: Trend,
        growth: float,
        level: float,
    ) -> list[str]:
        """Why the window's floors are not a leak: empty when every check passes."""
        s = self.settings
        k = len(wy)
        older = trend(wt[: k // 2], wy[: k // 2]).slope
        newer = trend(wt[k // 2 :], wy[k // 2 :]).slope
        # the window before this one: warm-up climbed faster then, a leak no faster. Only
        # with half a window of floors: over three or four, the start-up jump (nothing to a
        # full process in one bin) dominates Theil-Sen, whose breakdown point is 29%, and a
        # steady leak read as "not steady" until the jump left the recall.
        before = trend(ht[-k:], history[-k:]).slope if len(history) >= k // 2 else 0.0
        steady = _steady(older, newer, tr.slope, before, sustain=s.sustain)
        steady = steady and not _step_fits_better(wt, wy, tr)
        new_high = float(wy[-2:].max()) - (float(history.max()) if len(history) else -math.inf)
        checks = {
            "no significant upward trend": tr.p_up < s.alpha and tr.low > 0,
            f"growth too small to matter ({growth / 1e6:.2f} MB in the window)": growth
            >= max(s.min_growth_bytes, s.min_growth_share * level),
            "no new high: memory climbs back to where it has been (a cache, a saw-tooth)": (
                new_high >= 0.5 * growth
            ),
            "growth is not steady (a step, or warm-up reaching its plateau)": steady,
        }
        return [why for why, ok in checks.items() if not ok]

    def _flag(
        self, tr: Trend, level: float, points: int, reason: str, test: str, now: float
    ) -> LeakVerdict:
        s = self.settings
        bt, bmin, _, _ = self._last_bins(int(math.ceil((s.window_s + s.recall_s) / s.bin_s)) + 1)
        onset = estimate_onset(bt, bmin) if len(bt) >= 4 else now - s.fast_window_s
        self.leak = self._status = LeakVerdict(
            detected=True,
            slope_bytes_per_s=tr.slope,
            slope_low=tr.low,
            slope_high=tr.high,
            confidence=1.0 - tr.p_up,
            onset_s=onset,
            level_bytes=level,
            points=points,
            reason=reason,
            seconds_to_limit=_time_to_limit(self.limit_bytes, level, tr.slope),
            limit_bytes=self.limit_bytes,
            intercept_bytes=tr.intercept,
            test=test,
            at_s=now,
        )
        return self.leak

    def _update_leak(self) -> None:
        """Once flagged, the rate is re-estimated over the bins since the onset (at most a
        window of them), so the time to limit follows the leak."""
        assert self.leak is not None
        bt, bmin, _, _ = self._last_bins(self._window_bins)
        since = bt >= (self.leak.onset_s or -math.inf)
        if since.sum() < 4:
            return
        tr = trend(bt[since], bmin[since])
        level = float(self._raw[-1][1])
        self.leak = self._status = replace(
            self.leak,
            slope_bytes_per_s=tr.slope,
            slope_low=tr.low,
            slope_high=tr.high,
            confidence=1.0 - tr.p_up,
            level_bytes=level,
            intercept_bytes=tr.intercept,
            seconds_to_limit=_time_to_limit(self.limit_bytes, level, tr.slope),
            at_s=self._last_t,
        )

    def set_limit(self, limit_bytes: float | None) -> None:
        self.limit_bytes = limit_bytes
        if self.leak is not None:
            self._update_leak()


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


def snapshot_growth(snapshots: Sequence[AttributionSnapshot], top: int = 5) -> dict[str, list[Any]]:
    """What grew across the watchdog's attribution snapshots (``probe.watchdog.attribution``):
    allocation sites, gc types and named containers, largest growth first.

    A site's growth is its live bytes in the last snapshot minus the first (tracemalloc
    armed after start-up: everything it sees was allocated since), its rate the Theil-Sen
    slope over the snapshots, and ``steady`` says it grew between most consecutive
    snapshots -- a leak's sites climb with the trend, a churning buffer comes and goes.
    """
    snaps = [s for s in snapshots if isinstance(s, dict) and "t_s" in s]
    if not snaps:
        return {"top_sites": [], "growing_types": [], "growing_containers": []}
    first, last = snaps[0], snaps[-1]
    types: list[dict[str, Any]] = []
    for name, count in last.get("types", {}).items():
        grew = int(count) - int(first.get("types", {}).get(name, count))
        if grew > 0:
            types.append({"type": name, "count_grew": grew})
    types.sort(key=lambda x: -int(x["count_grew"]))
    containers = []
    for name, (kind, length) in last.get("containers", {}).items():
        before = first.get("containers", {}).get(name)
        grew = int(length) - (int(before[1]) if before else 0)
        if grew > 0:
            containers.append({"name": name, "type": kind, "items": int(length), "grew": grew})
    containers.sort(key=lambda x: -x["grew"])
    return {
        "top_sites": _growing_snapshot_sites(snaps)[:top],
        "growing_types": types[:top],
        "growing_containers": containers[:top],
    }


def _growing_snapshot_sites(snaps: list[AttributionSnapshot]) -> list[dict[str, Any]]:
    """The allocation sites that grew from the first snapshot to the last: the ones that
    climb with the trend first, then by how much they grew."""
    t = np.array([float(s["t_s"]) for s in snaps])

    def series(name: str, index: int) -> np.ndarray:
        return np.array([float((s.get("sites", {}).get(name) or [0, 0])[index]) for s in snaps])

    def rate_and_steady(y: np.ndarray) -> tuple[float | None, bool]:
        if len(y) < 2 or t[-1] <= t[0]:
            return None, True
        rate = trend(t, y).slope if len(y) >= 3 else float((y[-1] - y[0]) / (t[-1] - t[0]))
        steps = np.diff(y)
        return rate, bool((steps > 0).sum() >= 0.6 * len(steps))

    sites = []
    for name, (size, count, traceback) in snaps[-1].get("sites", {}).items():
        y = series(name, 0)
        grew = float(size) - float(y[0]) if len(snaps) > 1 else float(size)
        if grew <= 0:
            continue
        rate, steady = rate_and_steady(y)
        count_before = series(name, 1)[0] if len(snaps) > 1 else 0
        sites.append(
            {
                "site": name,
                "grew_bytes": int(grew),
                "live_bytes": int(size),
                "bytes_per_s": None if rate is None else round(rate, 1),
                "count_grew": int(count - count_before),
                "steady": steady,
                "traceback": traceback,
            }
        )
    # crumbs (under 1% of the largest growth: a cached regex, an import) are not what leaks
    largest = max((s["grew_bytes"] for s in sites), default=0)
    sites = [s for s in sites if s["grew_bytes"] >= 0.01 * largest]
    sites.sort(key=lambda s: (not s["steady"], -s["grew_bytes"]))
    return sites
