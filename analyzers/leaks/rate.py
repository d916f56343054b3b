"""A floor's rise against the request rate: a store bounded in time, or a leak (numpy only).

A leak keeps bytes per request, so its floor climbs with the requests' count; a store
bounded in time (sessions that expire, a cache of the last minutes' results) holds the
last T seconds' requests, so its size follows the *rate*. While the rate holds, such a
store stays level; when the rate rises, it grows by the rate's rise -- per request, like
a leak, and its live blocks with it, so no witness of what is alive tells them apart.
Nor does the floor's shape: under a linear ramp a store follows the rate (a line in
time), a leak the count (a parabola), and for a 20% ramp the count's bend from its chord
is ~2% of its rise, well inside a floor's noise.

What does bound it: the store is at most what the requests added to the floor since they
began (``served_from_bytes``: the process's memory by the first finished request), and
it grows with the rate by the rate's rise. So where the rate rose significantly
(Mann-Kendall on the segments' rates) and that bound accounts for all of the floor's rise
but a growth too small to matter, the rise is not called a leak: a store bounded in time
or a leak cannot be told apart until the rate holds steady, when a store levels and a
leak keeps climbing. The bound includes what a leak itself has added since serving
began, so on a service that has served for hours a rising rate could hold a leak's
verdict off for as long as the rate rises; where earlier floors are kept (the live
detector), the store is also bounded by the least the requests had added per unit of
rate before (a store's holds, a leak's grows). It never turns a leak into "no leak".

Measured (2026-12-03, ``tests.memory_series.served_ramp``, the live detector at its
defaults): 54 session stores under ramps of 30 min, 1 h and 4 h to 1.3, 2
and 3 times the rate, TTLs 2, 10 and 30 min, two seeds: 42 read as leaks judged in time,
1 with the requests counted (the rate tripled in 30 min, TTL 2 min: the floors' estimate
errs by more than a growth too small to matter). A leak of 100 B a request beginning
with a 2-h ramp beside the store: flagged 31-32 min after its onset; 50 B: 1.4-2.1 h.
Over a day whose rate rises 30 -> 120 a second and falls back, on each healthy shape of
``tests.memory_series`` with a store: 2 of 20 leaks in time, 0 counted; a leak of 100 B a
request from the start on a flat base: flagged at 7.5 h counted (2.4 h in time, where
the stores alone were flagged too).

A traffic spike under the live fast test (``spike_explains``, 2026-12-03, same series
with the rate stepping 20 -> 40-100 a second in 1-10 min, TTLs 1-10 min, sessions of 9
and 30 KB): the fast test flagged 15 of 36 stores, now none; a leak of 10 KB a request
kept from the spike on is flagged 120 s after it (81 s before), 2 KB a request (200
KB/s: a fast climb only with the store's) by the slow test at 24.5 min (84 s before, by
the fast test); a 1-MB/s leak at a steady 100 a second 53-60 s with smooth counts,
57-111 s (53-60 s before) where the count swings +-50-90% every 10 s. And a real one
(``leaks.live``' ``_fast_rate_rise``).

Used by the recorded-run verdict (``leaks.recorded``) and the live detector
(``leaks.live``), on the same terms: the floor's rise and the rate's rise both read as
the last quarter against the first (medians of floors, means of their rates). The bound
is exact for a store of constant bytes a request, which a real one is not: under
``benchmarks/watch_ramp.py``'s staircase a served store's RSS a live session crept 7%
in 2.5 min and the live slow test flagged it (2026-12-03); the live detector now runs
this check on the live Python heap too where it is read (``leaks.live``'s
``_heap_rate_rise``). The recorded-run verdict does not yet.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from statistics import NormalDist

import numpy as np

from probe.analyzers.leaks.trend import trend

__all__ = [
    "SETTLE_AT_A_STEADY_RATE",
    "RateRise",
    "rate_rise_explains",
    "served_from",
    "spike_explains",
]


@dataclass(frozen=True)
class RateRise:
    """A floor's rise that the request rate's rise accounts for."""

    early_per_s: float  # requests a second, the first quarter's
    late_per_s: float  # and the last quarter's
    store_bytes: float  # the bound on the store when the first quarter ran
    grew_bytes: float  # the floor's rise, last quarter against the first

    @property
    def rise(self) -> float:
        return self.late_per_s / self.early_per_s - 1.0

    def reason(self) -> str:
        return (
            f"the request rate rose {self.rise:.0%} meanwhile ({self.early_per_s:,.0f} to "
            f"{self.late_per_s:,.0f} a second): a store of the last seconds' requests, at "
            f"most the {self.store_bytes / 1e6:.1f} MB the requests had added, grows with "
            f"it by up to {self.rise * self.store_bytes / 1e6:.1f} MB, all of the floor's "
            f"{self.grew_bytes / 1e6:.1f} MB but a growth too small to matter: a store "
            "bounded in time, or a leak"
        )


SETTLE_AT_A_STEADY_RATE = (
    "at a steady request rate (probe load --rate) a store bounded in time stays level, a "
    "leak climbs"
)


def rate_rise_explains(
    floors: tuple[np.ndarray, np.ndarray],
    count_at: Callable[[np.ndarray], np.ndarray],
    served: tuple[float, float],
    matters_bytes: float,
    alpha: float,
    earlier: tuple[np.ndarray, np.ndarray] | None = None,
) -> RateRise | None:
    """The rate's rise when it accounts for the floor's, else None.

    ``floors``: (the start of each floor's span, the floors) of the judged part, spans of
    one width; ``count_at``: the requests finished by any instants; ``served``: when the
    first request had finished and the memory then (``served_from``); ``matters_bytes``:
    a growth too small to matter below it; ``earlier``: floors before the judged part, of
    the same width, where they were kept (the live detector's history).

    A store's size follows the rate over its own reach (how long it keeps a request):
    tried are the rate over one span centred on each floor's start (a floor is its
    span's least reading, and a store growing with the rate is least where its span
    starts: paired with its span's mean rate, a store's floor stood half a span behind
    it), and the rate over the reach before each floor's start, for reaches of a quarter,
    half and all of the judged part, where the requests were counted that far back (a
    store that keeps requests 30 min goes on growing for 30 min after the rate stops
    rising). Any reach that accounts for the rise explains it.

    The store is at most what the requests added; where ``earlier`` floors were kept, it
    is also at most the rate times the least that the requests had added per unit of
    rate at any earlier floor a reach after they began (a store's size per unit of rate
    holds; what a leak added per unit of rate grows with the count: over a day of
    traffic rising from 30 to 120 a second, the first bound alone excused a leak of 100
    B a request for the 12 h the rate rose)."""
    starts, fy = floors
    width = float(np.median(np.diff(starts))) if len(starts) > 1 else 0.0
    if len(fy) < 5 or not width > 0:
        return None
    span = float(starts[-1] - starts[0]) + width
    tried = [(width / 2, width)]  # (where a floor's rate ends after its start, its reach)
    tried += [(0.0, reach) for reach in (span / 4, span / 2, span) if reach > width]
    for after, reach in tried:
        ends = starts + after
        if ends[0] - reach < served[0]:
            continue  # counted from before the requests began: no rate to read there
        per_rate = (
            None if earlier is None else _least_per_rate(earlier, count_at, served, after, reach)
        )
        rise = _explains(
            _rates(count_at, ends, reach), fy, served[1], per_rate, matters_bytes, alpha
        )
        if rise is not None:
            return rise
    return None


def _rates(
    count_at: Callable[[np.ndarray], np.ndarray], ends: np.ndarray, reach: float
) -> np.ndarray:
    """Requests a second over the ``reach`` before each of ``ends``."""
    done = count_at(np.concatenate([ends - reach, ends]))
    return (done[len(ends) :] - done[: len(ends)]) / reach


def _least_per_rate(
    earlier: tuple[np.ndarray, np.ndarray],
    count_at: Callable[[np.ndarray], np.ndarray],
    served: tuple[float, float],
    after: float,
    reach: float,
) -> float | None:
    """The least that the requests had added to a floor per unit of rate, over the
    ``earlier`` floors whose rate was read a reach after the requests began (a store
    filled); None where there is none."""
    starts, fy = earlier
    ends = starts + after
    filled = ends - reach >= served[0] + reach
    if not filled.any():
        return None
    rates = _rates(count_at, ends[filled], reach)
    rated = rates > 0
    if not rated.any():
        return None
    return float(np.min((fy[filled][rated] - served[1]) / rates[rated]))


def _explains(
    rates: np.ndarray,
    fy: np.ndarray,
    served_from_bytes: float,
    per_rate: float | None,
    matters: float,
    alpha: float,
) -> RateRise | None:
    """``rate_rise_explains`` for one reach: the floors' ``rates`` rose significantly, and
    a store of at most what the requests added (and ``per_rate`` times the rate, where
    known), grown by their rise, accounts for all of the floors' rise but a growth too
    small to matter."""
    if not np.all(np.isfinite(rates)) or not trend(np.arange(len(rates)), rates).significant(alpha):
        return None
    q = max(len(fy) // 4, 1)
    early, late = float(np.mean(rates[:q])), float(np.mean(rates[-q:]))
    if early <= 0:
        return None
    start = float(np.median(fy[:q]))
    store = start - served_from_bytes
    if per_rate is not None:
        store = min(store, per_rate * early)
    rise = RateRise(
        early_per_s=early,
        late_per_s=late,
        store_bytes=max(store, 0.0),
        grew_bytes=float(np.median(fy[-q:])) - start,
    )
    if rise.grew_bytes - matters > rise.rise * rise.store_bytes:
        return None
    return rise


def spike_explains(
    then: tuple[np.ndarray, np.ndarray],
    now: tuple[float, float],
    count_at: Callable[[np.ndarray], np.ndarray],
    served: tuple[float, float],
    matters_bytes: float,
    alpha: float,
    reaches: list[float],
    earlier: tuple[np.ndarray, np.ndarray] | None = None,
) -> RateRise | None:
    """The rate's rise when it accounts for a climb in minutes (the live fast test's),
    else None. ``then``: instants before the climb and the floors there; ``now``: (now,
    the level now); the rest as ``rate_rise_explains``'s, ``reaches`` the spans a store
    may keep requests for.

    A traffic spike is a step, not a trend: over the few floors of a climb Mann-Kendall
    has no power, and a store goes on filling for its reach after the rate has stepped up
    and holds (at a steady rate now, above the rate before). So for each instant of
    ``then`` and each reach, the rate over the reach before it is compared with the rate
    over the same reach up to now, as counts: significant where the rise clears the
    Poisson spread of the two counts at ``alpha`` shared among the comparisons (bursty
    traffic clears it more easily, which can only hold a fast verdict back, never turn
    one to "no leak"); and the store then, bounded as ``rate_rise_explains`` bounds it,
    grown by the rise, must account for all of the climb since but a growth too small to
    matter. Where the climb began is not known (a floor's noise blurs it): any instant
    that explains it does."""
    t, floors = then
    t1, level = now
    z = NormalDist().inv_cdf(1.0 - alpha / max(len(t) * len(reaches), 1))
    for reach in reaches:
        counted = t - reach >= served[0]
        if not counted.any():
            continue
        ta, fa = t[counted], floors[counted]
        before = _rates(count_at, ta, reach) * reach  # requests, for their Poisson spread
        after = float(_rates(count_at, np.array([t1]), reach)[0]) * reach
        store = fa - served[1]
        if earlier is not None:
            per_rate = _least_per_rate(earlier, count_at, served, 0.0, reach)
            store = store if per_rate is None else np.minimum(store, per_rate * before / reach)
        with np.errstate(divide="ignore", invalid="ignore"):
            rise = np.where(before > 0, after / before - 1.0, 0.0)
        rose = (before > 0) & (after - before >= z * np.sqrt(after + before))
        fits = rose & (level - fa - matters_bytes <= rise * np.maximum(store, 0.0))
        if fits.any():
            k = int(np.flatnonzero(fits)[0])
            return RateRise(
                early_per_s=float(before[k]) / reach,
                late_per_s=after / reach,
                store_bytes=max(float(store[k]), 0.0),
                grew_bytes=level - float(fa[k]),
            )
    return None


def served_from(
    t: np.ndarray, y: np.ndarray, done: np.ndarray, width_s: float
) -> tuple[float, float]:
    """When the first request had finished (the reading by which ``done``, the count at
    each reading of ``t``, first rose) and the floor of ``y`` over ``width_s`` from there:
    what the process held before its requests began adding, a least reading as the
    floors are (one reading would sit above them by the noise: on a series of +-5%
    noise, 15 MB on 300). Not the series' first reading: a series that starts with the
    process (the in-process watchdog's) holds the imports and the model, and
    leaky_cache.py's 45 MB land within one reading (0.1 s) of its first requests; bounded
    from the start, the store counted them (1 run in 6-8 of test_watch here, and a
    clean-clone CI run on ea05dfb). This one misses the store's fill up to that reading,
    so it bounds the store lower: it excuses less."""
    began = int(np.argmax(done > done[0])) if done[-1] > done[0] else 0
    return float(t[began]), float(np.min(y[began:][t[began:] <= t[began] + width_s]))
