"""The memory sampler (``--memory``): tracemalloc snapshots by allocation site.

tracemalloc costs 5-6x on allocation-heavy code with one frame per traceback, ~18x with
five (W1, measured), which is why it is opt-in and one frame (the allocating line) by
default. Each snapshot is stored as its top ``top_sites`` allocation sites (grouped by
traceback; ``site`` is the most recent frame) plus one ``<other>`` row with the rest, so
per-snapshot totals stay exact while the table stays small. Allocations made by probe
itself and by tracemalloc are filtered out. (gc counts by type are taken in every run, by
the heap sampler.)
"""

from __future__ import annotations

import os
import time
import tracemalloc
from collections.abc import Callable
from typing import Any

__all__ = ["MemorySampler"]

_PROBE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class MemorySampler:
    """Takes tracemalloc snapshots; ``sample()`` is called every few seconds."""

    def __init__(
        self,
        *,
        clock: Callable[[], int] = time.perf_counter_ns,
        frames: int = 1,
        top_sites: int = 200,
    ) -> None:
        self._clock = clock
        self._frames = frames
        self._top_sites = top_sites
        self._started_tracing = False
        self._snapshot = 0
        self._rows: dict[str, list[tuple[Any, ...]]] = {"memory_sites": []}
        self._filters = [
            tracemalloc.Filter(False, tracemalloc.__file__),
            tracemalloc.Filter(False, os.path.join(_PROBE_DIR, "*")),
            tracemalloc.Filter(False, "<frozen importlib._bootstrap*>"),
        ]

    def start(self) -> None:
        if not tracemalloc.is_tracing():
            tracemalloc.start(self._frames)
            self._started_tracing = True

    def stop(self) -> None:
        if self._started_tracing and tracemalloc.is_tracing():
            tracemalloc.stop()
        self._started_tracing = False

    def sample(self) -> None:
        now = self._clock()
        self._snapshot += 1
        if tracemalloc.is_tracing():
            self._sample_sites(now, tracemalloc.take_snapshot().filter_traces(self._filters))

    def _sample_sites(self, now: int, snapshot: tracemalloc.Snapshot) -> None:
        stats = snapshot.statistics("traceback")
        rows = self._rows["memory_sites"]
        for stat in stats[: self._top_sites]:
            frames = list(stat.traceback)  # oldest first
            leaf = frames[-1] if frames else None
            site = f"{leaf.filename}:{leaf.lineno}" if leaf else "<unknown>"
            trace = " <- ".join(f"{f.filename}:{f.lineno}" for f in reversed(frames))
            rows.append((now, self._snapshot, site, trace, stat.size, stat.count))
        rest = stats[self._top_sites :]
        if rest:
            rows.append(
                (
                    now,
                    self._snapshot,
                    "<other>",
                    "",
                    sum(s.size for s in rest),
                    sum(s.count for s in rest),
                )
            )

    def drain(self) -> dict[str, list[tuple[Any, ...]]]:
        out = self._rows
        self._rows = {name: [] for name in out}
        return out
