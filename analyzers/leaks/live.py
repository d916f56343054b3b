"""The live leak detector: a memory series judged reading by reading, in bounded memory.

``LiveLeakDetector`` judges a live series reading by reading (``probe watch``, the
in-process watchdog) in bounded memory: readings are folded into bins of ``bin_s`` (ten
readings at the default interval) kept in a ring buffer, plus the last ``fast_window_s``
of raw readings. A recorded series is judged at once by ``leaks.recorded``; the
statistics both use are in ``leaks.trend``.

The statistics, and why these:

* **Floors.** Each bin keeps its minimum, and the slow test compares floors over spans
  at least as long as a collection cycle; Theil-Sen and Mann-Kendall (``leaks.trend``)
  judge them.

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
* the **request rate** (where the requests are counted: ``probe watch``'s agent, the
  in-process watchdog): a store bounded in time (sessions that expire) grows with the
  rate, steadily and above every earlier floor under a morning's ramp; where the rate
  rose significantly over the window and such a store accounts for the floor's rise
  (``leaks.rate``), the slow test says undetermined until the rate holds; where a traffic
  spike accounts for the fast test's climb (``leaks.rate.spike_explains``: the rate
  stepped up against any instant of the window, and the store then, grown by the step,
  holds the climb), the fast test says undetermined instead of leak. The check is
  exact for a store of constant bytes a request, and a real one's RSS a request creeps
  (the allocator's pools and arenas): where the live Python heap is read too (its
  blocks), a rise of the blocks the rate accounts for leaves the memory's extra to the
  allocator, up to as much again as the store's own share (``_heap_rate_rise``).
* **Warm-up**: nothing is judged in the first ``warmup_s`` (a setting: services differ),
  and the steadiness test covers the slow end of warm-ups that outlast it: the first
  window is judged once half a window of floors stands before it to compare with
  (``first_judged_s``, warm-up plus a window and a half), never against nothing.

The false-alarm rate is measured on 200 simulated 24-hour series of every healthy shape,
and the detection delays on leaks of 10 KB/s and 1 MB/s (``benchmarks/leak_corpus.py``).

"""

from __future__ import annotations

import itertools
import math
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from probe.analyzers.leaks.rate import (
    SETTLE_AT_A_STEADY_RATE,
    RateRise,
    rate_rise_explains,
    spike_explains,
)
from probe.analyzers.leaks.recorded import RecordedSettings, judge_recorded
from probe.analyzers.leaks.trend import (
    Trend,
    estimate_onset,
    steady,
    step_fits_better,
    trend,
)
from probe.analyzers.leaks.verdict import (
    LEAK,
    NO_LEAK,
    UNDETERMINED,
    LeakVerdict,
    time_to_limit,
    trend_fields,
)

__all__ = ["DetectorSettings", "LiveLeakDetector", "TracedStart", "final_verdict"]


@dataclass(frozen=True)
class DetectorSettings:
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

    @property
    def floor_group(self) -> int:
        """Bins a floor of the slow test is the least of: ``floors_per_window`` a window."""
        return max(1, round(self.window_s / self.floors_per_window / self.bin_s))

    @property
    def first_judged_s(self) -> float:
        """When the slow test first judges: after warm-up, half a window of floors to
        compare the first window against, and that window (of whole bins)."""
        return self.warmup_s + 1.5 * self.floor_group * self.floors_per_window * self.bin_s

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
        if self.recall_s < self.window_s / 2:
            raise ValueError(
                "recall_s must reach half a window back: the first window is judged against "
                "the half before it"
            )
        if self.fast_window_s < 8 * self.interval_s:
            raise ValueError("the fast window must hold at least 8 readings")


class LiveLeakDetector:
    """Live leak detection in bounded memory: feed ``add(t, bytes)``, read ``verdict``.

    ``add`` returns the verdict the moment a leak is first flagged (then ``None`` again:
    the leak stays flagged, its rate and time to limit keep being updated in ``verdict``).
    Readings must come in time order; the clock is the caller's.
    """

    def __init__(self, settings: DetectorSettings | None = None, limit_bytes: float | None = None):
        self.settings = s = settings or DetectorSettings()
        self.limit_bytes = limit_bytes
        self._raw: deque[tuple[float, float]] = deque(
            maxlen=int(math.ceil(s.fast_window_s / s.interval_s)) + 4
        )
        cap = int(math.ceil(s.history_s / s.bin_s)) + 1
        self._bt = np.zeros(cap)  # bin mean time
        self._bmin = np.zeros(cap)
        self._bmed = np.zeros(cap)
        self._bmax = np.zeros(cap)
        self._bdone = np.full(cap, np.nan)  # requests finished by the bin's last reading
        self._bdone_t = np.zeros(cap)  # and when that reading was taken
        self._bblocks = np.full(cap, np.nan)  # the least live Python blocks read in the bin
        self._bins = 0  # bins closed so far (the ring holds the last ``cap``)
        self._open_t: list[float] = []
        self._open_y: list[float] = []
        self._open_start: float | None = None
        self._open_done = math.nan
        self._open_blocks: list[float] = []
        self._first_done: float | None = None  # the first count read
        self._served_from: float | None = None  # the memory by the first finished request
        self._served_at = math.nan  # and when it had finished (the floor: of a bin from there)
        self._served_blocks = math.nan  # the live Python blocks then, the same way
        self._t0: float | None = None
        self._last_t = -math.inf
        self._envelope: float | None = None
        self._slow_since: float | None = None
        # the fast test held by the request rate's rise: its verdict, while it holds
        self._fast_held: LeakVerdict | None = None
        self._fast_checked: tuple[int, RateRise | None] = (-1, None)  # (at bin, its answer)
        self._level_n = max(3, int(s.fast_window_s / s.interval_s) // 10)
        self.readings = 0
        self.leak: LeakVerdict | None = None
        self._status = LeakVerdict(state=UNDETERMINED, reason="warming up")
        self._stale = False
        g = s.floor_group
        self._group = g
        self._window_bins = g * s.floors_per_window
        self._recall_groups = max(1, int(math.ceil(s.recall_s / (g * s.bin_s))))

    # -- ingestion ---------------------------------------------------------------------
    def add(
        self,
        t_s: float,
        bytes_: float,
        requests_done: float | None = None,
        python_blocks: float | None = None,
    ) -> LeakVerdict | None:
        """One reading; ``requests_done``: the requests the process had finished by then,
        where they are counted (the slow test then checks a rise against their rate);
        ``python_blocks``: its live Python heap then (``sys.getallocatedblocks()``), where
        it is read (the rate check's witness of what the allocator holds)."""
        if not (math.isfinite(t_s) and math.isfinite(bytes_)) or t_s <= self._last_t:
            return None  # out of order or unreadable: dropped, never raised
        self._last_t = t_s
        self.readings += 1
        if self._t0 is None:
            self._t0 = t_s
        self._count(t_s, bytes_, requests_done, python_blocks)
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
        self._open_done = math.nan if requests_done is None else float(requests_done)
        if python_blocks is not None and math.isfinite(python_blocks):
            self._open_blocks.append(float(python_blocks))
        if self.leak is None:
            self._judge_fast(t_s)
        return self.leak if self.leak is not None and not was_leaking else None

    def _count(self, t_s: float, bytes_: float, done: float | None, blocks: float | None) -> None:
        """Notes the memory (and live Python blocks) by the first finished request: the
        floor of a bin's readings from there (``leaks.rate.served_from``)."""
        if self._served_from is not None:
            if t_s <= self._served_at + self.settings.bin_s:
                self._served_from = min(self._served_from, bytes_)
                if blocks is not None and math.isfinite(blocks):
                    self._served_blocks = float(np.fmin(self._served_blocks, blocks))
            return
        if done is None or not math.isfinite(done):
            return
        if self._first_done is None:
            self._first_done = done
        elif done > self._first_done:
            self._served_from, self._served_at = bytes_, t_s
            self._served_blocks = math.nan if blocks is None else float(blocks)

    def _close_bin(self) -> None:
        y = np.asarray(self._open_y)
        k = self._bins % len(self._bt)
        self._bt[k] = sum(self._open_t) / len(self._open_t)
        self._bmin[k], self._bmax[k], self._bmed[k] = y.min(), y.max(), float(np.median(y))
        self._bdone[k], self._bdone_t[k] = self._open_done, self._open_t[-1]
        self._bblocks[k] = min(self._open_blocks) if self._open_blocks else math.nan
        self._bins += 1
        self._open_t, self._open_y, self._open_blocks = [], [], []

    def _ring(self, n: int) -> np.ndarray:
        """The ring indices of the last ``n`` closed bins (at most those kept), oldest first."""
        n = min(n, self._bins, len(self._bt))
        return np.arange(self._bins - n, self._bins) % len(self._bt)

    def _last_bins(self, n: int) -> tuple[np.ndarray, ...]:
        """(time, min, median, max) of the last ``n`` closed bins, oldest first."""
        idx = self._ring(n)
        return self._bt[idx], self._bmin[idx], self._bmed[idx], self._bmax[idx]

    def bins(self) -> dict[str, np.ndarray]:
        """Every kept bin (time, min, median, max): the series behind the report's chart;
        and, where requests were counted, the count by each bin's last reading and when
        it was read (NaN where not), and the least live Python blocks read in each bin:
        what the rate checks read, kept so that a verdict can be replayed from the
        report."""
        idx = self._ring(len(self._bt))
        t, lo, med, hi = self._bt[idx], self._bmin[idx], self._bmed[idx], self._bmax[idx]
        bins = {"t_s": t, "min": lo, "median": med, "max": hi}
        if np.isfinite(self._bdone[idx]).any():
            bins["requests_done"] = self._bdone[idx]
            bins["requests_done_t_s"] = self._bdone_t[idx]
        if np.isfinite(self._bblocks[idx]).any():
            bins["python_blocks_min"] = self._bblocks[idx]
        return bins

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
        if not steady(older.slope, newer.slope, tr.slope, sustain=s.sustain):
            return
        reason = (
            f"memory rose {(level - self._envelope) / 1e6:.1f} MB above its recent high "
            f"in {s.fast_window_s:g} s, climbing steadily ({tr.slope / 1e6:.3f} MB/s)"
        )
        rise = self._fast_rate_rise(min(last), level)
        if rise is None:
            self._flag(tr, level, len(t), reason, "fast", now)
            return
        self._fast_held = self._status = LeakVerdict(
            state=UNDETERMINED,
            **trend_fields(tr),
            level_bytes=level,
            points=len(t),
            reason=f"{reason}, but {rise.reason()}",
            settle=SETTLE_AT_A_STEADY_RATE,
            test="fast",
            at_s=now,
        )

    def _held_by_the_rate(self, now: float) -> LeakVerdict | None:
        """The fast test's verdict held by the rate's rise, while it is at most a fast
        window old (a slow test's "no leak" meanwhile would say more than is known)."""
        held = self._fast_held
        if held is None or held.at_s is None or now - held.at_s > self.settings.fast_window_s:
            return None
        return held

    def _fast_rate_rise(self, floor: float, level: float) -> RateRise | None:
        """Whether a traffic spike accounts for the fast test's climb (``leaks.rate.
        spike_explains``): a store bounded in time grows with a spike by up to its size
        times the spike, for as long as it keeps a request (simulated: a store of 1-10 min
        of sessions under a rate rising 2-5x in 1-10 min climbed 0.5-2 MB/s, and the fast
        test flagged it in 15 of 36 cases; ``tests.memory_series.served_ramp``,
        2026-12-03). ``floor``: the least of the last readings, compared with the floors
        before (``level``, their median, stands above a floor by half the noise: 15 MB on
        300 at +-5%, more than a growth too small to matter). Any instant of the window
        but the last bin may witness the rise, with reaches from a bin, doubling, to the
        window: first written as instants before the fast window and reaches from it,
        this missed a real one -- ``session_api:app_ttl`` (sessions kept 30 s) under
        ``probe watch --window 2m`` stepping 20 -> 60 a second, flagged as a fast leak 12
        s after the step, where ``/proc`` without probe read 53.6 -> 64.9 MB and flat
        (2026-12-03): the step lay inside the fast window, the store's reach under it. At
        most once a bin: the fast test runs at every reading."""
        if self._fast_checked[0] == self._bins:
            return self._fast_checked[1]
        s = self.settings
        rise = None
        counted = self._counted_bins()
        if counted is not None:
            idx, count_at = counted
            bt = self._bt[idx]
            # the instants the climb may have begun at: the window's bins but the last
            # (the climb's start is blurred by the floors' noise: any may witness it);
            # the floors before them bound the store per unit of rate
            then = (bt >= self._last_t - s.window_s) & (bt < self._last_t - s.bin_s)
            if then.any():
                first = int(np.flatnonzero(then)[0])
                # a store keeps requests for its own reach: from a bin, doubling
                reaches = [s.bin_s * 2**j for j in range(24)]
                reaches = [r for r in reaches if r < s.window_s] + [s.window_s]
                rise = spike_explains(
                    (bt[then], self._bmin[idx][then]),
                    (self._last_t, floor),
                    count_at,
                    self._served(idx),
                    max(s.min_growth_bytes, s.min_growth_share * level),
                    s.alpha,
                    reaches,
                    earlier=(bt[:first] - s.bin_s / 2, self._bmin[idx][:first]),
                )
        self._fast_checked = (self._bins, rise)
        return rise

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
            assert self._t0 is not None
            left = self._t0 + self.settings.first_judged_s - self._last_t
            reason = (
                "warming up"
                if self._last_t < self._judged_from()
                else f"gathering the first window and the half before it ({left:.0f} s left)"
            )
            held = self._held_by_the_rate(self._last_t)
            self._status = held or replace(self._status, reason=reason, at_s=self._last_t)
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
        ft, fy = _grouped(bt, bmin, g)
        k = s.floors_per_window
        # Warm-up is neither judged nor compared against: a start-up jump in the window
        # before read as "it climbed faster then" and held a steady leak off until the jump
        # left the recall (the leaky sample's model load, 50 MB at 3.5 s: CI's red test).
        ht, hy = ft[:-k], fy[:-k]
        served = ht - g * s.bin_s / 2 >= self._judged_from() - s.bin_s / 2
        # The steadiness test compares the window with the one before it, and warm-up is
        # not that: a first window judged with nothing served before it had no such test,
        # and a memo still filling (tests/memory_corpus' zipf_memo, its pace falling)
        # read as a leak under probe watch's quick settings (5-s warm-up, 8-s window). So
        # the first judgement waits for half a window of floors before it
        # (``DetectorSettings.first_judged_s``).
        if served.sum() < k // 2:
            return None
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
        rise = None
        if not failed:
            rise, why = self._rate_explains(growth, level, wy)
            failed = [why] if why else []
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
            reason = failed[0] if failed else "rising steadily: confirming"
            # still confirming a rise is not an answer yet, nor a rise the rate's may
            # explain; a failed check is one
            open_ = reason.startswith("rising steadily") or rise is not None
            state = UNDETERMINED if open_ else NO_LEAK
            held = self._held_by_the_rate(now)
            if state == NO_LEAK and held is not None:
                self._status = held  # the fast test's undetermined, not the slow one's no
                return
            self._status = LeakVerdict(
                state=state,
                **trend_fields(tr),
                onset_s=None,
                level_bytes=level,
                points=k,
                reason=reason,
                settle=SETTLE_AT_A_STEADY_RATE if rise is not None else "",
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

    def _rate_explains(
        self, growth: float, level: float, floors: np.ndarray
    ) -> tuple[RateRise | None, str]:
        """The rate's rise that accounts for a rise the slow test's checks passed (over the
        window's ``floors``), and the reason to give: the memory's own (``_rate_rise``),
        else its live Python heap's (``_heap_rate_rise``); (None, "") where neither does."""
        rise = self._rate_rise(level)
        if rise is not None:
            return rise, f"memory floor rose {growth / 1e6:.1f} MB, but {rise.reason()}"
        rise = self._heap_rate_rise(floors)
        return rise, "" if rise is None else _heap_rose_with_the_rate(growth, rise)

    def _counted_bins(self) -> tuple[np.ndarray, Callable[[np.ndarray], np.ndarray]] | None:
        """The kept bins since the requests were last counted without a hole (ring
        indices, oldest first) and the requests finished by any instants over them and up
        to the latest reading; None before the first request finished."""
        if self._served_from is None:
            return None
        idx = self._ring(len(self._bt))
        counted = np.isfinite(self._bdone[idx])
        if not counted.all():  # a count with a hole is not read across it
            idx = idx[np.flatnonzero(~counted)[-1] + 1 :]
        if not len(idx):
            return None
        ct, done = self._bdone_t[idx], self._bdone[idx]
        if math.isfinite(self._open_done) and self._last_t > ct[-1]:
            # the latest reading's count too: the last closed bin's is up to a bin old,
            # and a rate up to now read from it fell short by that bin's requests
            ct, done = np.append(ct, self._last_t), np.append(done, self._open_done)

        def count_at(at: np.ndarray) -> np.ndarray:
            return np.interp(at, ct, done)

        return idx, count_at

    def _heap_rate_rise(self, floors: np.ndarray) -> RateRise | None:
        """The rate check on the live Python heap (its blocks' floors, grouped and
        bounded as ``_rate_rise`` groups and bounds the memory's) where the memory's own
        failed: a store of Python objects whose blocks the rate's rise accounts for, and
        grew by more than a growth too small to matter (a store to speak of), leaves the
        rest of the memory's rise to what the allocator holds beside it -- up to as much
        again as the store's own share of the rise (``_allocator_share``). Measured why
        (counted sessions against the floors of the report's bins, 2026-12-03): a served
        store (``session_api:app_ttl``, TTL 180 s) under ``benchmarks/watch_ramp.py``'s
        staircase held ~9.5 KB of RSS a live session for 10 min, then ~10.2 KB by 12.5
        min (7% more), and the memory's rate check, exact for a store of constant bytes a
        session, read the extra as a leak at 13.2 min; in a second run, 9.6-11.0 KB over
        the run and 10.2-11.0 KB at a steady 16,200 sessions (an RSS saw-tooth of ~12 MiB),
        flagged at 16.6 min when replayed without its blocks -- whose floors rose with the
        sessions and held within +-300 of 2,354,000 once they held. ``floors``: the
        memory's over the window (``_slow_window``'s, grouped as the blocks' are). None
        where the blocks were not read over the window and a group before it."""
        s = self.settings
        counted = self._counted_bins()
        g, w = self._group, self._window_bins
        if counted is None or len(counted[0]) < w + g or not math.isfinite(self._served_blocks):
            return None
        idx, count_at = counted
        blocks = self._bblocks[idx]
        if not np.isfinite(blocks).all():
            return None
        wt, wb = _grouped(self._bt[idx[len(idx) - w :]], blocks[len(idx) - w :], g)
        gt, gb = _grouped(self._bt[idx[: len(idx) - w]], blocks[: len(idx) - w], g)
        half = g * s.bin_s / 2
        matters = s.min_growth_share * float(np.median(wb))
        served = (self._served(idx)[0], self._served_blocks)
        rise = rate_rise_explains(
            (wt - half, wb), count_at, served, matters, s.alpha, earlier=(gt - half, gb)
        )
        if rise is None or rise.grew_bytes < matters:
            return None
        return (
            rise if _allocator_share(floors, wb, self._served_from, self._served_blocks) else None
        )

    def _served(self, idx: np.ndarray) -> tuple[float, float]:
        assert self._served_from is not None
        return max(self._served_at, float(self._bdone_t[idx[0]])), self._served_from

    def _rate_rise(self, level: float) -> RateRise | None:
        """The request rate's rise over the slow test's window when it accounts for its
        floors' rise (``leaks.rate``), read from the bins ``_counted_bins`` keeps; None
        where they are not the window and a group before it. The floors before the
        window, grouped as the window's, bound the store per unit of rate."""
        s = self.settings
        counted = self._counted_bins()
        g, w = self._group, self._window_bins
        if counted is None or len(counted[0]) < w + g:
            return None
        idx, count_at = counted
        judged, before = idx[len(idx) - w :], idx[: len(idx) - w]
        wt, wy = _grouped(self._bt[judged], self._bmin[judged], g)
        gt, gy = _grouped(self._bt[before], self._bmin[before], g)
        half = g * s.bin_s / 2  # a floor's group starts half a group before its mean time
        matters = max(s.min_growth_bytes, s.min_growth_share * level)
        return rate_rise_explains(
            (wt - half, wy), count_at, self._served(idx), matters, s.alpha, earlier=(gt - half, gy)
        )

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
        keeps_pace = steady(older, newer, tr.slope, before, sustain=s.sustain)
        keeps_pace = keeps_pace and not step_fits_better(wt, wy, tr)
        new_high = float(wy[-2:].max()) - (float(history.max()) if len(history) else -math.inf)
        checks = {
            "no significant upward trend": tr.p_up < s.alpha and tr.low > 0,
            f"growth too small to matter ({growth / 1e6:.2f} MB in the window)": growth
            >= max(s.min_growth_bytes, s.min_growth_share * level),
            "no new high: memory climbs back to where it has been (a cache, a saw-tooth)": (
                new_high >= 0.5 * growth
            ),
            "growth is not steady (a step, or warm-up reaching its plateau)": keeps_pace,
        }
        return [why for why, ok in checks.items() if not ok]

    def _flag(
        self, tr: Trend, level: float, points: int, reason: str, test: str, now: float
    ) -> LeakVerdict:
        s = self.settings
        bt, bmin, _, _ = self._last_bins(int(math.ceil((s.window_s + s.recall_s) / s.bin_s)) + 1)
        onset = estimate_onset(bt, bmin) if len(bt) >= 4 else now - s.fast_window_s
        self.leak = self._status = LeakVerdict(
            state=LEAK,
            **trend_fields(tr),
            onset_s=onset,
            level_bytes=level,
            points=points,
            reason=reason,
            seconds_to_limit=time_to_limit(self.limit_bytes, level, tr.slope),
            limit_bytes=self.limit_bytes,
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
            **trend_fields(tr),
            level_bytes=level,
            seconds_to_limit=time_to_limit(self.limit_bytes, level, tr.slope),
            at_s=self._last_t,
        )

    def set_limit(self, limit_bytes: float | None) -> None:
        self.limit_bytes = limit_bytes
        if self.leak is not None:
            self._update_leak()


def _allocator_share(
    floors: np.ndarray, blocks: np.ndarray, served_bytes: float | None, served_blocks: float
) -> bool:
    """Whether the memory's rise over the window's ``floors`` is at most twice what its
    store would have grown by had its bytes a block held: the store's bytes at the first
    quarter (above ``served_bytes``) grown by the share its live ``blocks`` grew (above
    ``served_blocks``), last quarter against first as ``leaks.rate`` reads them. Twice:
    the allocator's extra beside a store may match the store's own rise, not outgrow it
    -- three times the creep measured (7% of a store of ~80 MB within 90 s, ~7 MB, beside
    the ~20 MB it grew by in that window: ``LiveLeakDetector._heap_rate_rise``), where a
    leak of large objects or native memory beside the store (few blocks, many bytes) goes
    on outgrowing it."""
    q = max(len(floors) // 4, 1)
    start, start_blocks = float(np.median(floors[:q])), float(np.median(blocks[:q]))
    if served_bytes is None or start_blocks <= served_blocks or start <= served_bytes:
        return False
    share = (float(np.median(blocks[-q:])) - start_blocks) / (start_blocks - served_blocks)
    return float(np.median(floors[-q:])) - start <= 2.0 * share * (start - served_bytes)


def _heap_rose_with_the_rate(growth: float, rise: RateRise) -> str:
    """The slow test's reason where the live Python heap's rise is the rate's (``rise``:
    in blocks) and the memory's is more."""
    return (
        f"memory floor rose {growth / 1e6:.1f} MB, more than the request rate's rise "
        f"accounts for, but the live Python heap rose with the rate ({rise.early_per_s:,.0f} "
        f"to {rise.late_per_s:,.0f} a second: {rise.grew_bytes:,.0f} blocks, within the "
        f"{rise.rise * rise.store_bytes:,.0f} a store bounded in time grows by): the rest "
        "is memory the allocator holds beside the store, large objects, or memory outside "
        "Python's heap; a store bounded in time, or a leak"
    )


def _grouped(bt: np.ndarray, bmin: np.ndarray, g: int) -> tuple[np.ndarray, np.ndarray]:
    """Floors of bins (times, minima) in groups of ``g``, grouped from the newest bin back
    (a part group at the oldest end dropped): (mean time, least minimum) of each."""
    usable = len(bt) - len(bt) % g
    return (
        bt[len(bt) - usable :].reshape(-1, g).mean(axis=1),
        bmin[len(bt) - usable :].reshape(-1, g).min(axis=1),
    )


_OUTLIVE_THE_TRACING = (
    "a run that outlives attribution's traced start and its stop by as long again "
    "(more requests, or --duration), or `--attribution off` for a command that lives seconds"
)


@dataclass(frozen=True)
class TracedStart:
    """Attribution traced the process from its start; its stop (the last snapshot began,
    tracing ended: seconds on the readings' clock), once it has been stopped."""

    stopping_s: float | None = None
    stopped_s: float | None = None


def final_verdict(
    detector: LiveLeakDetector,
    early: list[tuple[float, float]],
    elapsed_s: float,
    traced_start: TracedStart | None = None,
    work: list[tuple[float, float]] | None = None,
    heap: list[tuple[float, float]] | None = None,
    malloc_in_use: list[float] | None = None,
    full_collection: dict[str, Any] | None = None,
    cpu: list[tuple[float, float]] | None = None,
) -> LeakVerdict:
    """The last word when the process has ended: the live verdict, or -- for a process
    watched for less than ``first_judged_s``, which the live tests never judged, or one
    they had no answer for yet when it ended -- the recorded-run verdict on its readings
    (``early``: the first ones, (t_s, bytes)), against the requests finished when ``work``
    counts them ((t_s, requests done) on the same clock), with the live Python heap as
    its witness when ``heap`` gives it ((t_s, allocated blocks)), with ``malloc_in_use``
    and ``full_collection`` as ``judge_recorded``'s (``probe run``'s witnesses), ``cpu``
    ((t_s, the process's CPU seconds so far)) its axis where no requests are counted. Where
    ``work`` counted the requests over all of ``early``, a live "no leak" or "undetermined"
    is judged that way too, per request, and gives way to a leak found so: the live tests
    judge in time, and a leak that follows bursty work climbs in time by steps.

    ``traced_start``: the process was traced from its start (its readings have
    tracemalloc's own memory taken out), and when that was stopped, if it was. The series
    is judged on one regime, and the stop is neither: its snapshot copies every trace
    (measured on the leaky sample at 10 s: +67 MB for 7.6 s), and what it frees the
    service refills with its RSS flat (after ``malloc_trim``, the leaky sample's stood
    still ~7 s). So the judgement takes the part after the stop when the process lived at
    least as long again after it (the recorded test's first quarter, start-up to it, holds
    the refill), else the traced part -- and that part ran slowed by tracemalloc (a
    start-up stretched over it climbs as steadily as a leak: torch's import and a memo
    filling did, under probe watch at defaults), so it never says leak: undetermined.
    """
    v = detector.verdict
    s = detector.settings
    briefly = elapsed_s < s.first_judged_s
    # the live tests still warming up or confirming at the end, and ``early`` holds the
    # series to it: judged whole (a leak the end cut short of confirmation was missed)
    ends = bool(early) and elapsed_s - early[-1][0] <= 2 * s.interval_s + 1.0
    unanswered = v.state == UNDETERMINED and ends
    # the requests counted over the whole series: the live tests judge in time, and a
    # leak that follows bursty work climbs in time by steps they read as no trend (a
    # served session store under bursts of load: "no significant upward trend" where
    # ``probe run`` read 9.3 KB a request); judged per request as ``probe run`` judges it
    per_request = ends and _counted_throughout(work, early)
    if v.detected or len(early) < 8 or not (briefly or unanswered or per_request):
        return v
    readings, regime, slowed = _one_regime(early, traced_start)
    run = _judged_whole(
        detector, readings, slowed, (work, cpu), heap, malloc_in_use, full_collection
    )
    if not (briefly or unanswered) and (run.state != LEAK or run.basis != "requests"):
        return v  # the live tests' answer stands unless the requests say leak
    return replace(
        run,
        reason=f"{run.reason} (judged on the whole series{regime}: watched for "
        f"{elapsed_s:.0f} s, {_why_whole(briefly, unanswered)})",
    )


def _why_whole(briefly: bool, unanswered: bool) -> str:
    """Why the last word was judged on the whole series (``final_verdict``'s reasons)."""
    if briefly:
        return "less than warm-up plus a window and a half"
    if unanswered:
        return "the live tests' answer was still open at the end"
    return "its requests counted throughout, against which it grew steadily"


def _judged_whole(
    detector: LiveLeakDetector,
    readings: list[tuple[float, float]],
    slowed: str,
    axes: tuple[list[tuple[float, float]] | None, list[tuple[float, float]] | None],
    heap: list[tuple[float, float]] | None,
    malloc_in_use: list[float] | None,
    full_collection: dict[str, Any] | None,
) -> LeakVerdict:
    """The recorded-run verdict on the readings of one regime (``final_verdict``'s);
    ``axes``: the requests done and the CPU seconds used, (t_s, so far) each."""
    work, cpu = axes
    run = judge_recorded(
        *_columns(readings),
        requests_done=_columns(work) if work else None,
        cpu=_columns(cpu) if cpu else None,
        limit_bytes=detector.limit_bytes,
        slowed=slowed,
        heap=_columns(heap) if heap else None,
        malloc_in_use=np.array(malloc_in_use, dtype="float64") if heap and malloc_in_use else None,
        full_collection=full_collection,
    )
    if slowed and run.state == UNDETERMINED:
        run = replace(run, settle=_OUTLIVE_THE_TRACING)
    return run


def _counted_throughout(
    work: list[tuple[float, float]] | None, early: list[tuple[float, float]]
) -> bool:
    """Whether ``work`` counts requests over all of ``early`` (no hole: the count was
    kept from the first reading to the last), enough of them for a work axis."""
    if not work or not early:
        return False
    enough = RecordedSettings().min_requests
    return (
        work[0][0] <= early[0][0] + 1.0
        and work[-1][0] >= early[-1][0] - 1.0
        and work[-1][1] - work[0][1] >= enough
    )


def _columns(pairs: list[tuple[float, float]]) -> tuple[np.ndarray, np.ndarray]:
    """(t, value) pairs as two arrays."""
    if not pairs:
        return np.array([]), np.array([])
    first, second = zip(*pairs, strict=True)
    return np.array(first, dtype="float64"), np.array(second, dtype="float64")


def _one_regime(
    early: list[tuple[float, float]], traced: TracedStart | None
) -> tuple[list[tuple[float, float]], str, str]:
    """The readings of one regime, what to call it, and what slowed the service in it."""
    tracing = "tracemalloc (attribution's traced start)"
    if traced is None:
        return early, "", ""
    if traced.stopping_s is None or traced.stopped_s is None:
        return early, ", traced from its start to its end", tracing
    stopping, stopped = traced.stopping_s, traced.stopped_s
    before = [r for r in early if r[0] < stopping]
    after = [r for r in early if r[0] > stopped]
    if after and before and after[-1][0] - after[0][0] >= before[-1][0] - before[0][0]:
        return after, f" after attribution's traced start ({stopped:.0f} s)", ""
    return before, f" up to the end of attribution's traced start ({stopping:.0f} s)", tracing
