"""The leak verdict on a recorded series (``probe run``'s diagnosis; ``probe watch``'s last
word on a process that lived too briefly for the live tests): leak, no leak, or
undetermined, judged at once.

A leak retains bytes per unit of work at a steady rate; warm-up (imports, pools, caches
filling) decays with time whatever the load. So the growth is judged against the work
done when the requests are known -- the memory floor against the cumulative count of
requests finished -- and against time otherwise. The first ``warmup_share`` of the series
is dropped (start-up is not the service's behaviour), the rest cut into ``bins`` floors
(each bin's minimum: garbage collection, arena release and batch buffers make memory
saw-tooth; a leak raises the floor). Then, in order, each shape gets its answer:

* fewer than ``min_floors`` floors: **undetermined** (too few points; a longer run);
* no significant rise (Mann-Kendall at ``alpha``, Sen's lower bound above 0): **no leak**;
* a rise too small to matter (``min_growth_bytes`` and ``min_growth_share`` of the
  level): **no leak** in this run -- a slower leak needs a longer look (``probe watch``);
* the floors are one jump between two levels rather than a line: **no leak** when they
  stay flat for at least half of ``min_floors`` after it (a one-off allocation: a cache
  filled, a pool grew); **undetermined** when the jump is more recent, or the floor still
  climbs after it by a growth that matters (a leak's first allocator step looks the same);
* growth slowing down (the newer half of the floors climbs at less than
  ``sustain`` of the older): warm-up. **No leak** when the newer half no longer rises
  significantly, **undetermined** while it does (a leak under a warm-up looks the same);
  slowing less, to under ``steady_pace``, but beyond chance (the halves' Sen intervals
  apart): **undetermined** too;
* a rise within ``swing_factor`` of the swings around the trend: **undetermined** (on a
  short run a saw-tooth slower than the bins climbs as much);
* else a **leak**: steady growth per request (or per second), well above the noise.

Python's live heap (pymalloc's allocated blocks, read beside the series) is a second
witness that moves in no allocator steps: when it fell while the floor rose, a leak is
not Python objects being kept (undetermined); when the floor's shape was open (slowing,
or within its swings) but the live heap grew steadily along the same axis, both halves
at a steady pace, Python objects are kept per request: a **leak**. And a leak keeps what
is alive climbing: when neither the live blocks nor malloc's bytes in use rose over the
judged part, or neither climbed in both its halves (a store of the last seconds' work,
whose size follows the request rate, sets new highs the allocator keeps), the floor's rise
is left **undetermined**.

Steps are not plateaus: a staircase of allocator steps that keeps climbing has its
floors on a line (both halves climb), so it is growth; one step is not.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from probe.analyzers.constants import constant
from probe.analyzers.leaks.growth import shares_of_the_rise
from probe.analyzers.leaks.rate import SETTLE_AT_A_STEADY_RATE, rate_rise_explains, served_from
from probe.analyzers.leaks.trend import (
    Trend,
    best_step,
    bin_floors,
    bin_starts,
    estimate_onset,
    step_fits_better,
    trend,
)
from probe.analyzers.leaks.verdict import (
    LEAK,
    NO_LEAK,
    SETTLE,
    UNDETERMINED,
    LeakVerdict,
    State,
    time_to_limit,
    too_few_readings,
)

__all__ = ["RecordedSettings", "covering_the_run", "judge_recorded"]


@dataclass(frozen=True)
class RecordedSettings:
    bins: int = constant(40, "the floors the trend is fitted to (20 a half for the halves test)")
    warmup_share: float = constant(
        0.25, "start-up (imports, first allocations) held within the first quarter of the run"
    )
    min_floors: int = constant(
        8, "four floors a half: Theil-Sen's 29% breakdown point tolerates one outlier in 4"
    )
    min_readings: int = constant(8, "below eight readings no trend test has power")
    alpha: float = constant(0.01, "Mann-Kendall significance, the live detector's")
    min_growth_bytes: float = constant(
        2 * 1024 * 1024,
        "glibc's heap grows and trims in steps up to its 32 MiB mmap bound; "
        "2 MiB is a few such steps, below which one step decides",
    )
    min_growth_share: float = constant(0.02, "2% of the level: what a reviewer would notice")
    sustain: float = constant(
        0.6,
        "the live detector's: the newer half climbs at 0.6 of the older or more "
        "(a leak at ~1.0, warm-up with tau = 20 min at 0.47 over a 30-min window)",
    )
    steady_pace: float = constant(
        0.8,
        "a steady leak's newer half ran at 0.86-1.01 of its older across the corpus's "
        "eight leaking runs (load and allocator steps move it); a pace that fell further, "
        "significantly, is not called steady",
    )
    swing_factor: float = constant(
        2.0,
        "the healthy sample's 1-s saw-tooth over a 6-s run rose 0.5-1.1x its swings; "
        "the leaky sample's rise is 23x",
    )
    min_requests: int = constant(
        20, "fewer requests in the serving window make a coarse axis: judge against time"
    )
    min_cpu_s: float = constant(
        0.5,
        "the process's CPU clock as read from /proc counts in 10-ms ticks (USER_HZ = 100): "
        "40 floors need 40 distinct readings of it, 0.4 s, rounded up",
    )
    min_coverage: float = constant(
        0.5,
        "memory readings over less than half the run cannot tell a warm-up that levels off "
        "later from a leak (seen: the sidecar's series ended at 4.6 s of a 13-s run, on a "
        "host with four CPU-bound processes on two cores)",
    )
    min_heap_fall: float = constant(
        0.1,
        "a tenth of the live blocks: the healthy sample's fell by about half within its run, "
        "the staircase leak's (256-KB buffers, no small blocks) moved 0.3%",
    )
    min_heap_readings: int = constant(
        6, "Mann-Kendall at 1% needs six readings in a row to fall (p = 0.0014 at n = 6)"
    )
    min_heap_rise: float = constant(
        0.1, "a tenth of the live blocks, as min_heap_fall: what no cache refill hides"
    )


def judge_recorded(
    t_s: np.ndarray,
    bytes_: np.ndarray,
    *,
    request_end_s: np.ndarray | None = None,
    requests_done: tuple[np.ndarray, np.ndarray] | None = None,
    limit_bytes: float | None = None,
    settings: RecordedSettings | None = None,
    slowed: str = "",
    heap: tuple[np.ndarray, np.ndarray] | None = None,
    malloc_in_use: np.ndarray | None = None,
    full_collection: dict[str, Any] | None = None,
    cpu: tuple[np.ndarray, np.ndarray] | None = None,
    started_s: float | None = None,
) -> LeakVerdict:
    """Judge a recorded memory series against the work when ``request_end_s`` gives it
    (the requests' end times) or ``requests_done`` ((t_s, done)); where neither counts
    enough requests, against the process's CPU time when ``cpu`` gives it ((t_s, CPU
    seconds used so far)): a worker whose jobs come in bursts with idle gaps between them
    climbs in time by steps, which read as a warm-up slowing down (bursty_ledger.py,
    undecorated, 36 s: "the newer half climbs at 0.59 of the older", undetermined), and
    along its CPU as the line its per-job leak is. Else against time. ``heap``: Python's live
    heap read beside it ((t_s, allocated blocks)), ``malloc_in_use`` the bytes malloc held
    at those readings (NaN where unread). All on the series' clock. ``full_collection``:
    what was alive before and after a full cyclic collection at the run's end
    (``HeapSampler.full_collection``, with ``at_s`` on the series' clock): readings from
    then on are left out, as what it freed (glibc gives back the top of its heap) and
    the teardown after it are not the service's doing. ``started_s``: when start-up's
    imports ended (``_judged_part``). ``slowed``: why the service ran slower than
    unobserved (tracemalloc). Then a rise too small to matter may be a slowed leak, and a
    steady rise a stretched start-up: both are undetermined; no leak stays no leak (flat
    memory is flat, slowed or not)."""
    s = settings or RecordedSettings()
    parts = _judged_part(_clean(t_s, bytes_), full_collection, started_s, s)
    if isinstance(parts, LeakVerdict):
        return parts
    whole, (t, y) = parts
    along = _axis(t, request_end_s, requests_done, cpu, s)
    x, basis = along(t), along.basis
    fx, fy = bin_floors(x, y, s.bins)
    level = float(np.median(fy))
    if len(fy) < s.min_floors:
        return _undetermined(f"too few readings after warm-up ({len(fy)} floors)", len(fy), level)
    in_use = None if heap is None or malloc_in_use is None else _clean(heap[0], malloc_in_use)
    heap = None if heap is None else _clean(*heap)
    kept = _heap_kept_pace(heap, (t[0], t[-1]), along, s)
    state, reason, judged_from = _judge(x, y, fx, fy, s, slowed=slowed, kept=kept)
    state, reason = _when_slowed(state, reason, slowed)
    verdict = _rated(state, reason, (x, t, y), judged_from, basis, whole, level, limit_bytes, s)
    verdict = _against_the_request_rate(verdict, whole, (t, y), along, s)
    if heap is None:
        return verdict
    verdict = _against_the_python_heap(verdict, whole[0], *heap, s)
    if in_use is not None:
        verdict = _against_malloc(verdict, whole[0], heap, in_use, s)
        verdict = _against_a_full_collection(verdict, whole[0], heap, in_use, full_collection, s)
    return _held_by_small_objects(verdict, whole[0], heap, in_use, s)


def _judged_part(
    series: tuple[np.ndarray, np.ndarray],
    full_collection: dict[str, Any] | None,
    started_s: float | None,
    s: RecordedSettings,
) -> tuple[tuple[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]] | LeakVerdict:
    """(the series up to the final collection, its part after warm-up), or the verdict
    when too little is left. Warm-up is the first ``warmup_share`` of the series, or
    start-up's imports where they ran longer (``started_s``, where measured:
    ``analyzers.stacks.IMPORTS``): a 1.5-s job importing torch for 1 s read "memory grows
    126 MiB/s, confidence 99%" from the imports alone."""
    t, y = series
    if full_collection and full_collection.get("at_s") is not None:
        before = t <= float(full_collection["at_s"])
        t, y = t[before], y[before]
    if len(t) < s.min_readings or t[-1] - t[0] <= 0:
        return too_few_readings(len(t))
    warm_until = t[0] + s.warmup_share * (t[-1] - t[0])
    imports = started_s is not None and started_s > warm_until
    serving = t >= (started_s if imports else warm_until)
    if imports and serving.sum() < s.min_readings:
        return _undetermined(
            f"too few readings after start-up's imports ({int(serving.sum())}: they ran "
            f"until {started_s - t[0]:.1f} s of the {t[-1] - t[0]:.1f}-s series)",
            0,
            float(np.median(y)),
        )
    return (t, y), (t[serving], y[serving])


def _when_slowed(state: State, reason: str, slowed: str) -> tuple[State, str]:
    """A leak read from a service slowed by ``slowed`` may be a stretched start-up."""
    if slowed and state == LEAK:
        return UNDETERMINED, f"{reason}, but with the service slowed by {slowed}"
    return state, reason


def _rated(
    state: State,
    reason: str,
    judged: tuple[np.ndarray, np.ndarray, np.ndarray],
    judged_from: float,
    basis: str,
    whole: tuple[np.ndarray, np.ndarray],
    level: float,
    limit_bytes: float | None,
    s: RecordedSettings,
) -> LeakVerdict:
    """The verdict with its rates: the floors' trend over the part judged (``judged``:
    its work axis, times and readings; after a one-off step, from ``judged_from`` on),
    per request and per second, and what it means for the limit."""
    x, t, y = judged
    fx, fy = bin_floors(x, y, s.bins)
    part = x >= judged_from  # after a one-off step, the part after it was judged
    fx, fy = fx[fx >= judged_from], fy[fx >= judged_from]
    tr = trend(fx, fy)
    # the rate in time too (what the report draws and the limit is reached by)
    in_time = trend(*bin_floors(t[part], y[part], s.bins)) if basis != "time" else tr
    leak = state == LEAK
    return LeakVerdict(
        state=state,
        reason=reason,
        settle=SETTLE if not leak else "",
        slope_bytes_per_s=in_time.slope,
        slope_low=in_time.low,
        slope_high=in_time.high,
        bytes_per_request=tr.slope if basis == "requests" else None,
        basis=basis,
        confidence=1.0 - tr.p_up,
        onset_s=estimate_onset(*bin_floors(*whole, s.bins)) if leak else None,
        level_bytes=level,
        points=len(fy),
        seconds_to_limit=(
            time_to_limit(limit_bytes, float(y[-1]), in_time.slope) if leak else None
        ),
        limit_bytes=limit_bytes,
        intercept_bytes=in_time.intercept,
        at_s=float(t[-1]),
    )


def _judge(
    x: np.ndarray,
    y: np.ndarray,
    fx: np.ndarray,
    fy: np.ndarray,
    s: RecordedSettings,
    *,
    after_step: bool = False,
    slowed: str = "",
    kept: str = "",
) -> tuple[State, str, float]:
    """The verdict, its reason, and from where on x the floors were judged (the order of
    the module doc); ``slowed`` as ``judge_recorded``'s; ``kept``: how Python's live heap
    grew steadily over the same part, when it did (``_heap_kept_pace``)."""
    tr = trend(fx, fy)
    level = float(np.median(fy))
    growth = tr.slope * float(fx[-1] - fx[0])
    whole = -math.inf
    if not tr.significant(s.alpha):
        return NO_LEAK, "no significant upward trend in the memory floor", whole
    if growth < max(s.min_growth_bytes, s.min_growth_share * level):
        return (*_too_small(growth, slowed), whole)
    if step_fits_better(fx, fy, tr):
        return _one_step(x, y, fx, fy, s, after_step, slowed)
    open_shape = _open_shape(x, y, fx, fy, tr, growth, s)
    if open_shape is None:
        steadily = f"memory floor rises steadily, {growth / 1e6:.1f} MB after warm-up"
        return LEAK, f"{steadily} (p = {tr.p_up:.1e})", whole
    state, reason = open_shape
    if kept and state == UNDETERMINED:
        rose = f"memory floor rose {growth / 1e6:.1f} MB after warm-up (p = {tr.p_up:.1e})"
        return LEAK, f"{rose} and {kept} ({reason})", whole
    return state, reason, whole


def _open_shape(
    x: np.ndarray,
    y: np.ndarray,
    fx: np.ndarray,
    fy: np.ndarray,
    tr: Trend,
    growth: float,
    s: RecordedSettings,
) -> tuple[State, str] | None:
    """A significant, material rise on a line whose shape still leaves it open: slowing
    down (warm-up), or within its swings; None when it is steady and clear of them."""
    # each half's pace by Theil-Sen on the floors: one burst freed (or a teardown at the
    # end) does not move it, where a running minimum would take every floor down with it
    half = len(fy) // 2
    older, newer = trend(fx[:half], fy[:half]), trend(fx[half:], fy[half:])
    pace = newer.slope / max(older.slope, tr.slope)
    if pace < s.sustain:
        if not newer.significant(s.alpha):
            return NO_LEAK, "warm-up: the floor rose, then levelled off"
        return (
            UNDETERMINED,
            f"growth is slowing down (the newer half climbs at {pace:.2f} of the older): "
            "warm-up, or a leak under a warm-up",
        )
    if pace < s.steady_pace and older.low > newer.high:
        return (
            UNDETERMINED,
            f"growth slowed to {pace:.2f} of its pace within the run, beyond chance: "
            "a warm-up's tail, or a leak whose pace follows the load",
        )
    residual = y - (tr.slope * x + tr.intercept)
    swing = float(np.percentile(residual, 90) - np.percentile(residual, 10))
    if growth < s.swing_factor * swing:
        return (
            UNDETERMINED,
            f"a rise of {growth / 1e6:.1f} MB within swings of {swing / 1e6:.1f} MB: not yet "
            "distinguishable from a saw-tooth",
        )
    return None


def _heap_kept_pace(
    heap: tuple[np.ndarray, np.ndarray] | None,
    judged_s: tuple[float, float],
    along: _Axis,
    s: RecordedSettings,
) -> str:
    """How Python's live heap grew over the judged span (``judged_s``) along the same
    axis as the floor (``along``: requests finished, CPU seconds, or seconds), when it
    grew steadily: its floors significantly up in both halves, the newer at ``steady_pace``
    of the older or more, by ``min_heap_rise`` of its level, and up in both halves in time
    too. "" when it did not, was read too rarely to tell, or was not read at all (``heap``
    None).
    Live blocks count the objects kept, in no allocator steps: an RSS floor whose pace
    the allocator's steps and reuse move is no evidence against a heap that keeps its own."""
    if heap is None:
        return ""
    inside = (heap[0] >= judged_s[0]) & (heap[0] <= judged_s[1])
    t, blocks = heap[0][inside], heap[1][inside]
    x = along(t)
    if len(x) < 2 or x[-1] <= x[0]:
        return ""
    fx, fy = bin_floors(x, blocks, s.bins)
    half = len(fy) // 2
    if half < s.min_heap_readings:
        return ""
    tr = trend(fx, fy)
    older, newer = trend(fx[:half], fy[:half]), trend(fx[half:], fy[half:])
    rose = tr.slope * float(fx[-1] - fx[0])
    steady = (
        older.significant(s.alpha)
        and newer.significant(s.alpha)
        and newer.slope >= s.steady_pace * older.slope
        and rose >= s.min_heap_rise * float(np.median(fy))
        # and in time: a heap whose size follows the request rate climbs along the
        # requests while the rate drifts up (_against_a_pause_of_what_is_alive)
        and bool(_climbs_in_both_halves(t, blocks, s))
    )
    if not steady:
        return ""
    unit = {"requests": "a request", "cpu": "a CPU second"}.get(along.basis, "a second")
    return (
        f"Python's live heap grew steadily with it, {tr.slope:,.0f} blocks {unit} "
        f"(the newer half at {newer.slope / older.slope:.2f} of the older's pace)"
    )


def _too_small(growth: float, slowed: str) -> tuple[State, str]:
    """A rise too small to matter: no leak in this run -- unless the service ran slowed,
    when a leak grows less in the same time."""
    small = f"growth too small to matter in this run ({growth / 1e6:.2f} MB)"
    if slowed:
        return UNDETERMINED, f"{small}, but with the service slowed by {slowed}"
    return NO_LEAK, small


def _one_step(
    x: np.ndarray,
    y: np.ndarray,
    fx: np.ndarray,
    fy: np.ndarray,
    s: RecordedSettings,
    after_step: bool,
    slowed: str,
) -> tuple[State, str, float]:
    """One jump between two levels: a one-off allocation (a cache filled, a pool grew, a
    model loaded) when the floor stays flat long enough after it; too soon to tell when it
    is recent. When the floor still climbs after it by a growth that matters, the part
    after the jump is judged on its own (once: a second jump is too much to tell)."""
    k, _ = best_step(fy)
    jump = float(np.median(fy[k:]) - np.median(fy[:k])) / 1e6
    after_x, after_y = fx[k:], fy[k:]
    if len(after_y) < s.min_floors // 2:
        return UNDETERMINED, _near_the_end(jump), -math.inf
    after = trend(after_x, after_y)
    climbs = after.slope * float(after_x[-1] - after_x[0])
    # a fall is measured against the level it fell to
    level = float(np.median(after_y if jump < 0 else fy))
    material = max(s.min_growth_bytes, s.min_growth_share * level)
    settled = not (after.significant(s.alpha) and climbs >= material)
    if jump < 0 and settled:
        return NO_LEAK, f"the floor fell {-jump:.1f} MB in one step: memory given back", -math.inf
    if after_step:  # a second jump: a staircase too short to read
        return (
            UNDETERMINED,
            (
                f"the floor rose in two steps (the second {jump:.1f} MB): too few to tell "
                "allocator steps of a leak from one-off allocations"
            ),
            -math.inf,
        )
    if settled:
        one_off = f"the floor rose {jump:.1f} MB in one step, then stayed flat"
        return NO_LEAK, f"{one_off}: a one-off allocation", -math.inf
    step = f"{'rose' if jump >= 0 else 'fell'} {abs(jump):.1f} MB in one step"
    if len(after_y) < s.min_floors:
        return (
            UNDETERMINED,
            f"the floor {step} and climbs after it ({climbs / 1e6:.1f} MB)",
            -math.inf,
        )
    cut = (fx[k - 1] + fx[k]) / 2
    state, reason, _ = _judge(
        x[x >= cut], y[x >= cut], after_x, after_y, s, after_step=True, slowed=slowed
    )
    one_off = f"a one-off {'step' if jump >= 0 else 'fall'} of {abs(jump):.1f} MB"
    return state, f"{reason}, after {one_off}", float(cut)


def _near_the_end(jump: float) -> str:
    """Why one step too near the end leaves the verdict open: a rise may be a leak's first
    step; a fall (memory let go: a cache dropped, the process's teardown) left too little
    after it."""
    if jump < 0:
        return (
            f"the floor rose, then fell {-jump:.1f} MB in one step near the end (memory let "
            "go, or the process's teardown): too little after it to tell"
        )
    return (
        f"the floor rose {jump:.1f} MB in one step near the end: too soon to tell a one-off "
        "allocation from a leak's first step"
    )


def _clean(t_s: np.ndarray, bytes_: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    t = np.asarray(t_s, dtype="float64")
    y = np.asarray(bytes_, dtype="float64")
    keep = np.isfinite(t) & np.isfinite(y)
    order = np.argsort(t[keep], kind="stable")
    return t[keep][order], y[keep][order]


def _finished_by(
    t: np.ndarray,
    request_end_s: np.ndarray | None,
    requests_done: tuple[np.ndarray, np.ndarray] | None,
) -> np.ndarray | None:
    """The requests finished by each reading, when they are known."""
    if request_end_s is not None and len(request_end_s):
        ends = np.sort(np.asarray(request_end_s, dtype="float64"))
        return np.searchsorted(ends, t, side="right").astype("float64")
    done = _ordered(requests_done)
    if done is None:
        return None
    # a running maximum: the count never goes back (a reading out of order is the clock's)
    return np.interp(t, done[0], np.maximum.accumulate(done[1]))


@dataclass(frozen=True)
class _Axis:
    """What the floors are judged along: ``basis`` ("requests", "cpu" or "time"), and
    its value at any instants (the readings', the live heap's)."""

    basis: str
    at: Callable[[np.ndarray], np.ndarray] | None = None  # None: the time itself

    def __call__(self, t: np.ndarray) -> np.ndarray:
        return t if self.at is None else self.at(t)


def _axis(
    t: np.ndarray,
    request_end_s: np.ndarray | None,
    requests_done: tuple[np.ndarray, np.ndarray] | None,
    cpu: tuple[np.ndarray, np.ndarray] | None,
    s: RecordedSettings,
) -> _Axis:
    """The requests finished, when enough finish within the readings' span ``t``; else
    the process's CPU seconds, when they rise by ``min_cpu_s`` over it; else time."""
    done = _finished_by(t, request_end_s, requests_done)
    if done is not None and done[-1] - done[0] >= s.min_requests:

        def finished(at: np.ndarray) -> np.ndarray:
            by = _finished_by(at, request_end_s, requests_done)
            return np.zeros_like(at) if by is None else by

        return _Axis("requests", finished)
    used = _ordered(cpu)
    if used is not None:
        # a running maximum: the clock never goes back (a reading out of order is /proc's)
        ct, cv = used[0], np.maximum.accumulate(used[1])
        along = _Axis("cpu", lambda at: np.interp(at, ct, cv))
        x = along(t)
        if x[-1] - x[0] >= s.min_cpu_s:
            return along
    return _Axis("time")


def _ordered(pairs: tuple[np.ndarray, np.ndarray] | None) -> tuple[np.ndarray, np.ndarray] | None:
    """(t, value) with the unreadable pairs dropped, in time order; None under two."""
    if pairs is None:
        return None
    pt, pv = (np.asarray(a, dtype="float64") for a in pairs)
    keep = np.isfinite(pt) & np.isfinite(pv)
    if keep.sum() < 2:
        return None
    order = np.argsort(pt[keep], kind="stable")
    return pt[keep][order], pv[keep][order]


def _undetermined(reason: str, points: int, level: float = 0.0) -> LeakVerdict:
    return LeakVerdict(
        state=UNDETERMINED, reason=reason, settle=SETTLE, points=points, level_bytes=level
    )


def _against_the_python_heap(
    verdict: LeakVerdict,
    t_s: np.ndarray,
    heap_t_s: np.ndarray,
    allocated_blocks: np.ndarray,
    s: RecordedSettings,
) -> LeakVerdict:
    """A leak checked against Python's live heap (``sys.getallocatedblocks()``, read
    beside the memory series ``t_s``): kept Python objects add live blocks. When those
    fell significantly over the judged part of the run while the floor rose, the rise is
    not Python objects being kept -- the allocator holding on to what was freed (measured:
    ``healthy_service.py`` run two at a time on 2 cores, its cache cleared every second:
    RSS up ~30 MB in 10 s while its live blocks fell from ~550k to ~250k; four LEAK
    verdicts in 40 runs, one on a series cut short), or a leak outside Python's heap:
    undetermined. A heap that stays flat proves nothing (a leak of large buffers,
    ``staircase.py``'s 256 KB blocks, adds no small block)."""
    if verdict.state != LEAK or not len(t_s):
        return verdict
    ht = np.asarray(heap_t_s, dtype="float64")[:-1]  # the last: the census at the run's end
    blocks = np.asarray(allocated_blocks, dtype="float64")[:-1]
    judged = _in_judged_part(ht, t_s, s) & np.isfinite(blocks)
    if judged.sum() < s.min_heap_readings:
        return verdict
    falling = trend(ht[judged], -blocks[judged])
    fell = falling.slope * float(ht[judged][-1] - ht[judged][0])
    if not falling.significant(s.alpha) or fell < s.min_heap_fall * np.median(blocks[judged]):
        return verdict
    first, last = blocks[judged][0], blocks[judged][-1]
    return replace(
        verdict,
        state=UNDETERMINED,
        reason=(
            f"{verdict.reason}, but Python's live heap shrank meanwhile ({first / 1e3:,.0f}k "
            f"to {last / 1e3:,.0f}k allocated blocks): the allocator keeping freed memory, "
            "or a leak outside Python's heap"
        ),
        settle=SETTLE,
    )


def _against_malloc(
    verdict: LeakVerdict,
    t_s: np.ndarray,
    heap: tuple[np.ndarray, np.ndarray],
    in_use: tuple[np.ndarray, np.ndarray],
    s: RecordedSettings,
) -> LeakVerdict:
    """A leak checked against what is alive: the bytes malloc has handed out (every native
    allocation, every Python object over 512 bytes) and Python's live blocks (every
    smaller one), read together. Kept memory raises one or the other. When neither rose
    significantly and by a growth that matters (the floor's standard for the bytes,
    ``min_heap_rise`` for the blocks) over the judged part while the floor did, the rise
    is memory freed and kept by the allocator: glibc gives each thread an arena (up to
    eight per core) and returns little of it (``search_flask.py``, a thread per request:
    RSS up 60 MB in a 6-s run while the bytes in use rose and fell around 150 MB; it
    levels off within minutes). That is bounded, but one short run cannot tell it from a
    leak slower than the noise: undetermined, with what would settle it. ``heap`` and
    ``in_use``: (times, allocated blocks) and (times, bytes in use), cleaned, in time
    order."""
    if verdict.state != LEAK or not len(t_s):
        return verdict
    # the last reading of each: the census at the run's end (as _against_the_python_heap)
    (nt, native), (ht, blocks) = ((a[:-1], b[:-1]) for a, b in (in_use, heap))
    native_part, python_part = _in_judged_part(nt, t_s, s), _in_judged_part(ht, t_s, s)
    if min(native_part.sum(), python_part.sum()) < s.min_heap_readings:
        return verdict
    native_read = (nt[native_part], native[native_part])
    python_read = (ht[python_part], blocks[python_part])
    bytes_matter = max(s.min_growth_bytes, s.min_growth_share * verdict.level_bytes)
    blocks_matter = s.min_heap_rise * float(np.median(python_read[1]))
    if _rose(*native_read, s, floors=True, matters=bytes_matter) or _rose(
        *python_read, s, floors=False, matters=blocks_matter
    ):
        return _against_a_pause_of_what_is_alive(verdict, native_read, python_read, s)
    low, high = np.percentile(native[native_part], [10, 90]) / 1e6
    return replace(
        verdict,
        state=UNDETERMINED,
        reason=(
            f"{verdict.reason}, but what is alive did not rise with it (the bytes malloc "
            f"has handed out stayed within {low:.0f}-{high:.0f} MB, Python's live blocks "
            "did not grow by a tenth): memory freed and kept by the allocator (glibc's "
            "arenas, one per thread), or a leak slower than the noise"
        ),
        settle=(
            f"{SETTLE}; freed memory kept by glibc levels off (MALLOC_ARENA_MAX=2 in the "
            "service's environment bounds it), a leak does not"
        ),
    )


def _against_a_pause_of_what_is_alive(
    verdict: LeakVerdict,
    native: tuple[np.ndarray, np.ndarray],
    python: tuple[np.ndarray, np.ndarray],
    s: RecordedSettings,
) -> LeakVerdict:
    """A leak checked against the pace of what is alive: kept memory raises what holds it
    (malloc's bytes in use, or Python's live blocks) all along, so one of them climbs
    significantly in each half of the judged part, as the floor does. When neither does,
    what is alive rose and then paused while the floor went on rising: a heap whose
    size follows the load, its new highs kept by the allocator, not memory kept per
    request. Measured on ``session_api.py``'s ``app_ttl`` (sessions expire after 2 s) in
    10-s runs under ``probe run --load``: its floor crept ~5 MB after the store filled
    while the store's size moved +-10% with the request rate, and one CI run read
    "rises steadily, 5.6 MB after warm-up" (2026-12-01); over 30 runs here (8 beside a
    CPU hog) neither witness climbed in both halves, while each of the memory corpus's
    34 leaking series has one that does. ``native`` and ``python``: the judged part's
    (times, bytes in use) and (times, allocated blocks). Too few readings in a half to
    tell: the verdict stands."""
    if verdict.state != LEAK:
        return verdict
    climbs = [_climbs_in_both_halves(*native, s), _climbs_in_both_halves(*python, s)]
    if None in climbs or any(climbs):
        return verdict
    return replace(
        verdict,
        state=UNDETERMINED,
        reason=(
            f"{verdict.reason}, but what is alive did not keep climbing with it (neither the "
            "bytes malloc has handed out nor Python's live blocks rose in both halves of "
            "the judged part): a heap whose size follows the load, its highs kept by the "
            "allocator, or a leak slower than the noise"
        ),
        settle=(
            f"{SETTLE}; a store bounded in time or size levels off, a leak keeps what is "
            "alive climbing"
        ),
    )


def _against_the_request_rate(
    verdict: LeakVerdict,
    whole: tuple[np.ndarray, np.ndarray],
    judged: tuple[np.ndarray, np.ndarray],
    along: _Axis,
    s: RecordedSettings,
) -> LeakVerdict:
    """A leak along the requests checked against their rate (``leaks.rate``): where the
    rate rose significantly over the judged part and a store of the last seconds'
    requests accounts for the floor's rise, undetermined. Measured on
    ``session_api.py``'s ``app_ttl`` (sessions expire after 2 s): a clean-clone CI run
    (2026-12-02) read "rises steadily, 5.8 MB after warm-up" at 100% while its requests
    finished at ~950-1,020 a second, then ~1,160 (other work on the host had likely
    slowed the first part), its live blocks 478k to 555k. Not judged along CPU or time."""
    t, y = judged
    if verdict.state != LEAK or along.basis != "requests" or len(t) < 2:
        return verdict
    starts = bin_starts(t, s.bins)
    floors = (starts, bin_floors(t, y, s.bins)[1])
    matters = max(s.min_growth_bytes, s.min_growth_share * verdict.level_bytes)
    served = served_from(whole[0], whole[1], along(whole[0]), float(starts[1] - starts[0]))
    rise = rate_rise_explains(floors, along, served, matters, s.alpha)
    if rise is None:
        return verdict
    return replace(
        verdict,
        state=UNDETERMINED,
        reason=f"{verdict.reason}, but {rise.reason()}",
        settle=f"{SETTLE}; {SETTLE_AT_A_STEADY_RATE}",
    )


def _climbs_in_both_halves(t: np.ndarray, y: np.ndarray, s: RecordedSettings) -> bool | None:
    """Whether the floors of ``y`` rise significantly in each half of its span (the
    floor's own halves test, ``bins`` shared between them); None when a half has fewer
    than ``min_heap_readings`` readings."""
    read = np.isfinite(y)
    t, y = t[read], y[read]
    if len(t) < 2:
        return None
    middle = (t[0] + t[-1]) / 2
    halves = [(t < middle), (t >= middle)]
    if min(h.sum() for h in halves) < s.min_heap_readings:
        return None
    return all(trend(*bin_floors(t[h], y[h], s.bins // 2)).significant(s.alpha) for h in halves)


def _against_a_full_collection(
    verdict: LeakVerdict,
    t_s: np.ndarray,
    heap: tuple[np.ndarray, np.ndarray],
    in_use: tuple[np.ndarray, np.ndarray],
    full: dict[str, Any] | None,
    s: RecordedSettings,
) -> LeakVerdict:
    """A leak checked against a full collection at the run's end: when it brought both
    what malloc held and Python's live blocks back to (within a growth that matters of)
    their levels where the judged part began, what grew was garbage in reference cycles
    awaiting the cyclic collector's full pass, not memory kept. A short run may see no
    full pass at all: ``tests/memory_corpus/services/cycle_garbage.py`` makes its first
    at 14.9 s, and a 10-s run of it read "leak" (p = 3e-19) on RSS, blocks and bytes
    alike, while 150 s unobserved held at 84-91 MiB from ~37 s on (``search_flask.py``'s
    connections sit in cycles too; one of its runs in eight once read "leak, 100%", not
    seen again in 58 runs). RSS itself need not fall (the allocator keeps what is
    freed): undetermined, never leak. The collection itself must have freed a growth
    that matters: memory a batch job's ``main()`` held in its locals is gone (by
    reference counts) before it runs, and that is no evidence of garbage. ``heap`` and
    ``in_use`` as ``_against_malloc``'s."""
    if verdict.state != LEAK or not full or full.get("malloc_in_use_after") is None:
        return verdict
    (nt, native), (ht, blocks) = ((a[:-1], b[:-1]) for a, b in (in_use, heap))
    native_part, python_part = _in_judged_part(nt, t_s, s), _in_judged_part(ht, t_s, s)
    if min(native_part.sum(), python_part.sum()) < s.min_heap_readings:
        return verdict
    # where the judged part began: the median of its first fifth of readings
    native_start = float(np.median(native[native_part][: max(1, native_part.sum() // 5)]))
    blocks_start = float(np.median(blocks[python_part][: max(1, python_part.sum() // 5)]))
    bytes_matter = max(s.min_growth_bytes, s.min_growth_share * verdict.level_bytes)
    native_after, blocks_after = float(full["malloc_in_use_after"]), float(full["blocks_after"])
    if native_after > native_start + bytes_matter:
        return verdict
    if blocks_after > blocks_start * (1.0 + s.min_heap_rise):
        return verdict
    freed = float(full["malloc_in_use_before"]) - native_after
    freed_blocks = float(full["blocks_before"]) - blocks_after
    if freed < bytes_matter and freed_blocks < blocks_start * s.min_heap_rise:
        return verdict  # already gone before the collection: it witnessed nothing
    freed /= 1e6
    return replace(
        verdict,
        state=UNDETERMINED,
        reason=(
            f"{verdict.reason}, but a full collection at the run's end freed {freed:.0f} MB "
            f"of malloc's bytes and brought them ({native_after / 1e6:.0f} MB) and Python's "
            f"live blocks ({blocks_after / 1e3:,.0f}k) back to where the judged part began: "
            "garbage in reference cycles awaiting the collector's full pass, which this "
            "run did not see"
        ),
        settle=(
            f"{SETTLE}: over minutes the collector's full passes show whether the floor comes back"
        ),
    )


def _held_by_small_objects(
    verdict: LeakVerdict,
    t_s: np.ndarray,
    heap: tuple[np.ndarray, np.ndarray],
    in_use: tuple[np.ndarray, np.ndarray] | None,
    s: RecordedSettings,
) -> LeakVerdict:
    """A leak's rise over the judged part, shared out between Python's small objects and
    malloc's bytes in use (``growth.shares_of_the_rise``): the fix differs (a container
    to bound, or large buffers and native memory)."""
    if verdict.state != LEAK or not len(t_s):
        return verdict
    ht, blocks = heap[0][:-1], heap[1][:-1]  # the last: the census at the run's end
    judged = _in_judged_part(ht, t_s, s)
    if judged.sum() < 3:
        return verdict
    share, malloc = shares_of_the_rise(
        verdict.slope_bytes_per_s, (ht[judged], blocks[judged]), in_use
    )
    return replace(verdict, small_objects_share=share, malloc_share=malloc)


def _in_judged_part(times: np.ndarray, t_s: np.ndarray, s: RecordedSettings) -> np.ndarray:
    """Which of ``times`` fall in the part of the memory series ``t_s`` that is judged:
    after its first ``warmup_share``, up to its last reading."""
    t = np.asarray(t_s, dtype="float64")
    first, last = float(np.min(t)), float(np.max(t))
    return (times >= first + s.warmup_share * (last - first)) & (times <= last)


def _rose(
    t: np.ndarray, y: np.ndarray, s: RecordedSettings, *, floors: bool, matters: float
) -> bool:
    """A significant rise (of the bins' floors when ``floors``) by at least ``matters``."""
    tr = trend(*bin_floors(t, y, s.bins)) if floors else trend(t, y)
    return tr.significant(s.alpha) and tr.slope * float(t[-1] - t[0]) >= matters


def covering_the_run(
    verdict: LeakVerdict,
    t_s: np.ndarray,
    duration_s: float,
    settings: RecordedSettings | None = None,
) -> LeakVerdict:
    """A leak read from memory readings that stop early in the run is an open question."""
    s = settings or RecordedSettings()
    if verdict.state != LEAK or duration_s <= 0 or len(t_s) < 2:
        return verdict
    covered = float(np.max(t_s) - np.min(t_s))
    if covered >= s.min_coverage * duration_s:
        return verdict
    return replace(
        verdict,
        state=UNDETERMINED,
        reason=f"{verdict.reason}, but the memory readings cover only {covered:.1f} s of the "
        f"{duration_s:.1f}-s run",
        settle="a run whose memory readings last to its end (they stopped early: on a host "
        "short of CPU the niced sampler of the process's memory can starve)",
    )
