"""The heap sampler: cheap witnesses of what the Python heap holds.

RSS says how much memory the process holds, but moves in allocator steps (glibc grows
its heap by 128 KiB and more, hands big blocks to mmap, keeps freed memory for reuse)
and counts everything: the interpreter, native libraries, probe. Two cheap readings
from inside tell what the service's Python objects do:

* ``sys.getallocatedblocks()``, every collector tick (10 Hz): the blocks pymalloc has
  handed out and not got back -- every small object (<= 512 bytes) alive. A leak of
  Python objects raises it by the same count per request, whatever the allocator does
  with pages. It costs ~0.3 ms with 3 million blocks; on a larger heap the readings
  are spaced to keep their cost under half a percent of the time.
* the bytes glibc's malloc has handed out and not got back (``mallinfo2()``: chunks in
  use in its arenas plus the chunks it mapped on their own), read beside the blocks:
  every native allocation alive, and every Python object over 512 bytes. Memory freed
  but kept by the allocator is not in it, where RSS counts it: a thread-per-request
  server's arenas (one per thread, up to eight per core) kept ~250 MB of freed memory
  after 40 s of load while the bytes in use went up and down around 150 MB
  (``tests/threads_corpus/services/search_flask.py``). None where the C library has no
  ``mallinfo2`` (musl, glibc before 2.33, not Linux), and at readings its own cost
  budget skipped: the call walks every arena's free lists under their locks.
* gc object counts by type (``gc.get_objects()``), only when asked (``probe run``
  asks with ``--memory``, at its snapshots): one count of a million objects takes
  ~70 ms holding the GIL, and it is **not safe from another thread in general**: the
  list ``gc.get_objects()`` returns holds a second reference to every tracked object,
  including a tuple that ``tuple(generator)`` is still building, and CPython's resize of
  it then fails in the target ("SystemError: bad argument to internal function": seen in
  CI on the tagging sample when types were counted every 5 s in every run).

Rows: ``heap`` (ts_ns, allocated_blocks, malloc_in_use_bytes) and ``gc_types`` (ts_ns,
snapshot, type, count: every type at the first count, then the ``top_types`` most
numerous types and the ``top_types`` that grew most since the count before).
"""

from __future__ import annotations

import ctypes
import gc
import sys
import time
from collections import Counter
from collections.abc import Callable
from typing import Any

from probe.samplers.ticker import CostBudget

__all__ = ["HeapSampler", "full_collection_witness", "malloc_in_use_reader", "type_name"]


class _Mallinfo2(ctypes.Structure):
    # glibc's struct mallinfo2 (malloc.h, 2.33+): ten size_t fields in this order
    _fields_ = [
        (name, ctypes.c_size_t)
        for name in (
            "arena", "ordblks", "smblks", "hblks", "hblkhd",
            "usmblks", "fsmblks", "uordblks", "fordblks", "keepcost",
        )
    ]  # fmt: skip


def malloc_in_use_reader() -> Callable[[], int] | None:
    """A reader of the bytes malloc has handed out and not got back (arena chunks in use,
    ``uordblks``, plus mapped chunks, ``hblkhd``), or None without glibc's ``mallinfo2``."""
    try:
        # through PyDLL: the call keeps the GIL (~0.1 ms). Through CDLL it let the GIL go
        # and waited up to 4 ms for it back under load, which the cost budget then
        # charged as the reading's cost, spacing the readings three times wider.
        mallinfo2 = ctypes.PyDLL(None).mallinfo2
    except (AttributeError, OSError):
        return None
    mallinfo2.restype = _Mallinfo2
    mallinfo2.argtypes = []

    def read() -> int:
        info = mallinfo2()
        return int(info.uordblks + info.hblkhd)

    return read


def full_collection_witness(
    blocks: Callable[[], int],
    in_use: Callable[[], int] | None,
    *,
    clock: Callable[[], Any],
    timer: Callable[[], float] = time.perf_counter,
    collect: Callable[[], int] = gc.collect,
    enabled: Callable[[], bool] = gc.isenabled,
) -> dict[str, Any] | None:
    """What is alive before and after a full cyclic collection (live blocks, malloc's
    bytes in use), when it ran (``at``, on ``clock``) and what it cost: the leak verdicts'
    witness of garbage in reference cycles, taken at a run's end (``probe run``'s session,
    ``probe watch``'s agent). Garbage that survived into the oldest generation is freed
    only by a full pass, which a short run may never see, and a rise of it reads like kept
    memory. CPython makes one at interpreter shutdown anyway. None when the target turned
    the collector off (its garbage is never freed: kept)."""
    if not enabled():
        return None
    at = clock()
    before = (blocks(), in_use() if in_use is not None else None)
    started = timer()
    freed = collect()
    seconds = timer() - started
    after = (blocks(), in_use() if in_use is not None else None)
    return {
        "at": at,
        "blocks_before": before[0],
        "blocks_after": after[0],
        "malloc_in_use_before": before[1],
        "malloc_in_use_after": after[1],
        "objects_freed": freed,
        "seconds": round(seconds, 4),
    }


def type_name(t: type) -> str:
    """``dict``, ``collections.OrderedDict``: builtins bare, the rest with their module."""
    module = t.__module__
    return t.__qualname__ if module == "builtins" else f"{module}.{t.__qualname__}"


class HeapSampler:
    def __init__(
        self,
        *,
        clock: Callable[[], int] = time.perf_counter_ns,
        top_types: int = 50,
        allocated_blocks: Callable[[], int] = sys.getallocatedblocks,
        malloc_in_use: Callable[[], int] | None = None,
        gc_objects: Callable[[], list[Any]] = gc.get_objects,
        timer: Callable[[], float] = time.perf_counter,
        budget_share: float = 0.005,
    ) -> None:
        self._clock = clock
        # the blocks read walks every pymalloc pool holding the GIL (~1 ms on a 1-GB heap
        # of small objects): readings are spaced to keep it under this share of the time
        # (0.5%: an eighth of the stack sampler's own CPU at 100 Hz, 0.25 s in a 6.25-s run
        # of the leaky sample in CI)
        self._budget = CostBudget(budget_share, timer)
        # mallinfo2 walks every arena's free lists, taking each arena's lock: with many
        # threads' arenas fragmented it took milliseconds. It has a budget of its own, so
        # that it never thins the blocks readings.
        self._malloc_budget = CostBudget(budget_share, timer)
        self._top_types = top_types
        self._blocks = allocated_blocks
        self._malloc_in_use = malloc_in_use
        self._gc_objects = gc_objects
        self._timer = timer  # what a count costs, in seconds
        self._previous: Counter[type] = Counter()
        self._snapshot = 0
        self.count_cost_s = 0.0  # time spent counting types, all counts together
        self._rows: dict[str, list[tuple[Any, ...]]] = {"heap": [], "gc_types": []}

    def sample(self, *, count_types: bool = False, force: bool = False) -> None:
        """One reading of the allocated blocks when one is due (or ``force``: the last at
        stop); the type counts too when asked."""
        now = self._clock()
        if force or count_types or self._budget.due(now):
            blocks = self._budget.spend(now, self._blocks)
            in_use = None
            if self._malloc_in_use is not None and (force or self._malloc_budget.due(now)):
                in_use = self._malloc_budget.spend(now, self._malloc_in_use)
            self._rows["heap"].append((now, blocks, in_use))
        if count_types:
            self._count_types(now)

    def _count_types(self, now: int) -> None:
        started = self._timer()
        counts = Counter(map(type, self._gc_objects()))  # C-level: no Python loop
        cost = self._timer() - started
        self.count_cost_s += cost
        self._snapshot += 1
        # The first count keeps every type: the baseline growth is measured from (a few
        # thousand rows, once). Then the most numerous types, and the ones that grew most
        # since the count before: a leaking type is often few objects beside the
        # interpreter's thousands of functions and tuples, never among the most numerous.
        grew = counts - self._previous
        kept = (
            {t for t, _ in counts.most_common(self._top_types)} if self._previous else set(counts)
        )
        kept.update(t for t, _ in grew.most_common(self._top_types))
        self._previous = counts
        self._rows["gc_types"].extend((now, self._snapshot, type_name(t), counts[t]) for t in kept)

    def full_collection(
        self,
        *,
        collect: Callable[[], int] = gc.collect,
        enabled: Callable[[], bool] = gc.isenabled,
    ) -> dict[str, Any] | None:
        """At the run's end: ``full_collection_witness`` on the sampler's clock (``at_ns``).
        What the process's memory does from then on is this collection's doing and the
        teardown's, not the service's."""
        witness = full_collection_witness(
            self._blocks,
            self._malloc_in_use,
            clock=self._clock,
            timer=self._timer,
            collect=collect,
            enabled=enabled,
        )
        if witness is not None:
            witness["at_ns"] = witness.pop("at")
        return witness

    @property
    def counted(self) -> int:
        return self._snapshot

    def drain(self) -> dict[str, list[tuple[Any, ...]]]:
        out = self._rows
        self._rows = {name: [] for name in out}
        return out
