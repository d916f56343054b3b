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
* gc object counts by type (``gc.get_objects()``), only when asked (``probe run``
  asks with ``--memory``, at its snapshots): one count of a million objects takes
  ~70 ms holding the GIL, and it is **not safe from another thread in general**: the
  list ``gc.get_objects()`` returns holds a second reference to every tracked object,
  including a tuple that ``tuple(generator)`` is still building, and CPython's resize of
  it then fails in the target ("SystemError: bad argument to internal function": seen in
  CI on the tagging sample when types were counted every 5 s in every run).

Rows: ``heap`` (ts_ns, allocated_blocks) and ``gc_types`` (ts_ns, snapshot, type, count:
every type at the first count, then the ``top_types`` most numerous types and the
``top_types`` that grew most since the count before).
"""

from __future__ import annotations

import gc
import sys
import time
from collections import Counter
from collections.abc import Callable
from typing import Any

from probe.samplers.ticker import CostBudget

__all__ = ["HeapSampler", "type_name"]


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
        self._top_types = top_types
        self._blocks = allocated_blocks
        self._gc_objects = gc_objects
        self._timer = timer  # what a count costs, in seconds
        self.last_count_ns: int | None = None
        self._previous: Counter[type] = Counter()
        self._snapshot = 0
        self.count_cost_s = 0.0  # time spent counting types, all counts together
        self._rows: dict[str, list[tuple[Any, ...]]] = {"heap": [], "gc_types": []}

    def sample(self, *, count_types: bool = False, force: bool = False) -> None:
        """One reading of the allocated blocks when one is due (or ``force``: the last at
        stop); the type counts too when asked."""
        now = self._clock()
        if force or count_types or self._budget.due(now):
            self._rows["heap"].append((now, self._budget.spend(now, self._blocks)))
        if count_types:
            self._count_types(now)

    def _count_types(self, now: int) -> None:
        started = self._timer()
        counts = Counter(map(type, self._gc_objects()))  # C-level: no Python loop
        cost = self._timer() - started
        self.count_cost_s += cost
        self._snapshot += 1
        self.last_count_ns = now
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

    @property
    def counted(self) -> int:
        return self._snapshot

    def drain(self) -> dict[str, list[tuple[Any, ...]]]:
        out = self._rows
        self._rows = {name: [] for name in out}
        return out
