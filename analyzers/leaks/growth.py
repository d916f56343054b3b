"""What grows: allocation sites, gc types and named containers, from the run's tables
(pandas: ``probe run``'s diagnosis) or the watchdog's snapshots (plain dicts: the
in-process watchdog, which must not import pandas into the watched service)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from probe.analyzers.leaks.trend import trend

if TYPE_CHECKING:
    import pandas as pd

    from probe.watchdog.formats import AttributionSnapshot

__all__ = ["growing_sites", "growing_types", "snapshot_growth"]


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
