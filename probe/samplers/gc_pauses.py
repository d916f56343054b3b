"""The garbage collector's pauses: every collection CPython's cyclic collector makes in
the target, timed through ``gc.callbacks``.

A collection holds the GIL from start to end: no Python thread of the process runs,
and the stack sampler's ticks wait for it to finish (a 50-ms full collection is ticks
missed); a tick read during it shows the frame whose allocation set it off, as if that
code ran. So the stacks cannot say how much of a run the collector took; its own
callbacks can, exactly and cheaply: CPython calls them at the start and the end of each
collection, from the collecting thread, and nowhere else.

What a collection costs grows with what it walks: a young one (generation 0 or 1) the
objects allocated since the last, a full one (generation 2) every container the
process holds -- a catalog, a vocabulary, a model's config kept as Python objects, a
few hundred thousand of them, is tens of milliseconds a walk. CPython 3.11 makes a full
collection once the objects promoted to the oldest generation since the last one reach
a quarter of those that survived it (``gc_collect_main``'s ``long_lived_pending``), so a
service whose requests keep their objects past a couple of young collections makes
them again and again while its long-lived heap stays put.

Rows (``gc_pauses``): the young collections add up per generation between two collector
ticks (ts_ns: the end of the last counted, collections, pause_ns in all, longest_ns);
each full collection is a row of its own, with the thread that made it (``thread_id``:
where the allocation that set it off ran) and the live heap it walked (``heap_blocks``:
``sys.getallocatedblocks()`` read at its start, before its clock starts). The heap
sampler's readings, 50-150 ms apart, cannot stand for it: on rerank_catalog the heap
moves by 5% within a query, and a reading taken up to a tick before each collection
put the part start-up left alive anywhere from 0.55 to 1.0 of the walks across runs
(exactly read: 0.97 in each). The reading walks pymalloc's pools, ~0.1% of a full
collection's own walk (340,000 to 12 million blocks: 4-205 us against 3-222 ms).

Each thread's own collections add up too (``collected_here_s``): the CPU a thread of
probe spends paces its readings (``probe.samplers.ticker``), and a collection is the
target's heap work, made on whichever thread allocated when the collector was due. A
22-ms full collection on the stack sampler's thread, counted as one task tick's cost,
stopped the task sampler for the 1.4 s left of a CI run of a FastAPI app
(``tests/integration/test_http_spans.py``): an async route's requests then read as no
time at all.

Cost: two Python calls a collection. A service allocating hard makes a few thousand
young collections a second: 2-4 us each, nearly all of it CPython's for calling any callback
(``benchmarks/gc_pause_cost.py``).
"""

from __future__ import annotations

import gc
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

from probe.rundir.schema import FULL_GENERATION

__all__ = ["GcPauses"]


class GcPauses:
    """Times the target's collections; ``install`` at the run's start, ``uninstall`` at its
    end (before probe's own closing collection), ``drain`` at each flush."""

    def __init__(
        self,
        *,
        clock: Callable[[], int] = time.perf_counter_ns,
        thread_id: Callable[[], int] = threading.get_native_id,
        callbacks: list[Any] | None = None,
        allocated_blocks: Callable[[], int] = sys.getallocatedblocks,
    ) -> None:
        self._clock = clock
        self._thread_id = thread_id
        self._allocated_blocks = allocated_blocks
        self._heap_blocks = 0  # at the start of the full collection under way
        self._callbacks = gc.callbacks if callbacks is None else callbacks
        self._started_ns = 0
        # per young generation: collections, pause_ns, longest_ns, last end (ns)
        self._young = [[0, 0, 0, 0], [0, 0, 0, 0]]
        self._rows: list[tuple[Any, ...]] = []
        self._here = threading.local()  # .ns: the collections made on that thread
        self.installed = False

    def install(self) -> None:
        if not self.installed:
            self._callbacks.append(self._on_collection)
            self.installed = True

    def uninstall(self) -> None:
        if self.installed:
            self.installed = False
            try:
                self._callbacks.remove(self._on_collection)
            except ValueError:  # the target cleared gc.callbacks itself
                pass

    def _on_collection(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            if info["generation"] >= FULL_GENERATION:
                self._heap_blocks = self._allocated_blocks()
            self._started_ns = self._clock()
            return
        now = self._clock()
        pause = now - self._started_ns
        here = self._here
        here.ns = getattr(here, "ns", 0) + pause
        generation = info["generation"]
        if generation < FULL_GENERATION:
            young = self._young[generation]
            young[0] += 1
            young[1] += pause
            if pause > young[2]:
                young[2] = pause
            young[3] = now
        else:
            self._rows.append(
                (now, generation, 1, pause, pause, self._thread_id(), self._heap_blocks)
            )

    def collected_here_s(self) -> float:
        """Seconds of collections made on the calling thread since ``install``."""
        return getattr(self._here, "ns", 0) / 1e9

    def drain(self) -> dict[str, list[tuple[Any, ...]]]:
        # swapped, not reset in place: a collection on another thread may be adding to
        # them now (a callback is Python code: the GIL can pass mid-way), and adds to the
        # ones it fetched, which this reads after
        rows, self._rows = self._rows, []
        counted, self._young = self._young, [[0, 0, 0, 0], [0, 0, 0, 0]]
        rows.extend(
            (young[3], generation, young[0], young[1], young[2], None, None)
            for generation, young in enumerate(counted)
            if young[0]
        )
        return {"gc_pauses": rows}
