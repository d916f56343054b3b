"""What grows: allocation sites, gc types and named containers, from the run's tables
(pandas: ``probe run``'s diagnosis) or the watchdog's snapshots (plain dicts: the
in-process watchdog, which must not import pandas into the watched service)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from probe.analyzers.constants import constant
from probe.analyzers.leaks.trend import steady, trend
from probe.analyzers.leaks.words import (
    held_by,
    pile_notes,
    pile_text,
    piled,
    small_objects_part,
    what_holds,
)

if TYPE_CHECKING:
    import pandas as pd

    from probe.watchdog.formats import AttributionSnapshot

__all__ = [
    "PileSettings",
    "growing_sites",
    "growing_types",
    "held_by",
    "malloc_share",
    "pile_notes",
    "pile_text",
    "piled",
    "piling_up",
    "shares_of_the_rise",
    "small_objects_part",
    "small_objects_share",
    "snapshot_growth",
    "what_holds",
]

# pymalloc serves requests of at most 512 bytes (SMALL_REQUEST_THRESHOLD in CPython's
# Objects/obmalloc.c) from blocks in 16-byte size classes (ALIGNMENT on 64-bit builds):
# one live block (``sys.getallocatedblocks()``) holds 16 to 512 bytes.
SMALL_BLOCK_MIN_BYTES = 16
SMALL_BLOCK_MAX_BYTES = 512


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
    """Object types whose live count grew from the first gc count to the last, the ones
    that grew at most counts first (``steady``: a leaked type climbs with the work, a
    cache's entries or a batch's buffers come and go). A type missing from a count (not
    among its most numerous) counts as 0 there."""
    import pandas as pd  # here: the watchdog imports this module into the service

    if gc_types["snapshot"].nunique() < 2:
        return []
    counts = gc_types.pivot_table(
        index="type", columns="snapshot", values="count", aggfunc="sum", fill_value=0
    ).sort_index(axis=1)
    grew = counts.iloc[:, -1] - counts.iloc[:, 0]
    rises = (counts.diff(axis=1).iloc[:, 1:] > 0).sum(axis=1)
    steady = rises >= 0.6 * (counts.shape[1] - 1)
    table = pd.DataFrame({"grew": grew, "steady": steady})[grew > 0]
    table = table.sort_values(["steady", "grew"], ascending=[False, False]).head(top)
    return [
        {"type": str(k), "count_grew": int(r.grew), "steady": bool(r.steady)}
        for k, r in table.iterrows()
    ]


def small_objects_share(
    grew_bytes: float, blocks_t_s: np.ndarray, blocks: np.ndarray
) -> tuple[float, float] | None:
    """Bounds on the share of a memory rise of ``grew_bytes`` that Python's small objects
    can account for, from the live blocks read over the same stretch (``blocks_t_s``,
    ``blocks``): their rise (the Theil-Sen line's, so that the cyclic collector's
    saw-tooth does not decide it) times the least and the most a block holds. With no
    gc count (``--memory`` off) this still tells a leak of many small objects (a dict
    keyed by request ids: tens of blocks a request) from one of large buffers or native
    memory (a bytearray appended to, numpy arrays, a C library's allocations: no block at
    all). None with fewer than three readings or no rise to share."""
    rise = _rise(blocks_t_s, blocks) if grew_bytes > 0 else None
    if rise is None:
        return None
    rise = max(0.0, rise)
    return (
        min(1.0, rise * SMALL_BLOCK_MIN_BYTES / grew_bytes),
        min(1.0, rise * SMALL_BLOCK_MAX_BYTES / grew_bytes),
    )


def malloc_share(grew_bytes: float, t_s: np.ndarray, in_use: np.ndarray) -> float | None:
    """The share of a memory rise of ``grew_bytes`` that the bytes glibc's malloc had
    handed out rose by over the same stretch (their Theil-Sen line's rise, within 0-1):
    every Python object over 512 bytes and every native allocation, where pymalloc's
    small objects live in arenas of their own, outside malloc. Measured on the memory
    corpus's leaks: 16 KiB of ctypes memory a request, a bytearray appended to and 256-KB
    buffers kept 1.00-1.05 of their rise; a dict of ~4-KB responses of short strings
    0.005, a list of log lines 0.04, the leaky sample's cache 0.20. None with fewer than
    three readings."""
    rise = _rise(t_s, in_use) if grew_bytes > 0 else None
    return None if rise is None else min(1.0, max(0.0, rise / grew_bytes))


def shares_of_the_rise(
    slope_bytes_per_s: float,
    blocks: tuple[np.ndarray, np.ndarray],
    in_use: tuple[np.ndarray, np.ndarray] | None,
) -> tuple[tuple[float, float] | None, float | None]:
    """A leak's rise over the stretch the live blocks were read in (``blocks``: (t_s,
    count)), at its rate, shared out: ``small_objects_share``'s bounds, and
    ``malloc_share`` from malloc's bytes in use over the same stretch (``in_use``:
    (t_s, bytes); None where unread). ``probe run``'s verdict and ``probe watch``'s
    alerts share it out so."""
    t, count = np.asarray(blocks[0], dtype="float64"), blocks[1]
    if len(t) < 2:
        return None, None
    grew = slope_bytes_per_s * float(t[-1] - t[0])
    malloc = None
    if in_use is not None:
        mt = np.asarray(in_use[0], dtype="float64")
        inside = (mt >= t[0]) & (mt <= t[-1])
        malloc = malloc_share(grew, mt[inside], np.asarray(in_use[1])[inside])
    return small_objects_share(grew, t, count), malloc


def _rise(t_s: np.ndarray, values: np.ndarray) -> float | None:
    """What the Theil-Sen line of ``values`` rose by from the first reading to the last
    (NaN readings left out); None with fewer than three."""
    t = np.asarray(t_s, dtype="float64")
    v = np.asarray(values, dtype="float64")
    keep = np.isfinite(t) & np.isfinite(v)
    t, v = t[keep], v[keep]
    if len(t) < 3 or t[-1] <= t[0]:
        return None
    return trend(t, v).slope * float(t[-1] - t[0])


@dataclass(frozen=True)
class PileSettings:
    """What a count of the process's threads, descriptors or pending tasks must do, over
    the stretch it is judged on (``probe run``'s serving window, ``probe watch``'s
    window), to be named as piling up."""

    min_rise: int = constant(
        10,
        "ten more: a pool that grows to its size within the judged part (a "
        "ThreadPoolExecutor to min(32, cores + 4), anyio's to its 40 threads) is not "
        "steady, and ten is a few requests' worth where each keeps one",
    )
    sustain: float = constant(
        0.6, "the memory tests' sustain: a pile keeps its pace, a pool filling up slows down"
    )
    alpha: float = constant(0.01, "Mann-Kendall significance, the memory tests'")
    min_readings: int = constant(
        6,
        "six readings that all rise give Mann-Kendall's p = 0.004 (its normal "
        "approximation; five give 0.014, over alpha); the descriptors, read once a second, "
        "give a 6-s run seven",
    )


def piling_up(
    series: dict[str, tuple[np.ndarray, np.ndarray]],
    request_end_s: np.ndarray | None = None,
    *,
    judged_from: float = -math.inf,
    settings: PileSettings | None = None,
) -> list[dict[str, Any]]:
    """The counts of ``series`` (what -> (t_s, count): the process's threads, its open
    descriptors, an event loop's pending tasks) that climb steadily: each thread holds
    its stack and its objects until it ends, each pending task its coroutine's frame,
    each socket its buffers, so a leak that comes with them is theirs (a thread a
    request that never ends: 19 KiB a request, blocks and malloc's bytes hardly rising).
    ``request_end_s`` (on the same clock) gives the pile per request; readings before
    ``judged_from`` are left out."""
    s = settings or PileSettings()
    out = []
    for what, (t_s, counts) in series.items():
        t, c = np.asarray(t_s, dtype="float64"), np.asarray(counts, dtype="float64")
        keep = np.isfinite(t) & np.isfinite(c) & (t >= judged_from)
        t, c = t[keep], c[keep]
        if len(t) < s.min_readings or t[-1] <= t[0]:
            continue
        half = len(t) // 2
        older, newer = trend(t[:half], c[:half]).slope, trend(t[half:], c[half:]).slope
        whole = trend(t, c)
        rise = whole.slope * float(t[-1] - t[0])
        if not (
            whole.significant(s.alpha)
            and rise >= s.min_rise
            and steady(older, newer, sustain=s.sustain)
        ):
            continue
        pile: dict[str, Any] = {"what": what, "first": int(c[0]), "last": int(c[-1])}
        pile["per_s"] = round(whole.slope, 2)
        if request_end_s is not None:
            ends = np.asarray(request_end_s, dtype="float64")
            served = int(((ends >= t[0]) & (ends <= t[-1])).sum())
            pile["per_request"] = round(rise / served, 3) if served else None
        out.append(pile)
    return out


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
