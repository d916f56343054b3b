"""The interpreter's own timings of a corpus script's garbage collections, no probe in it:
the truth a collector estimate is held to.

Runs ``python SCRIPT ARG...`` in this process with a ``gc.callbacks`` entry (CPython
calls it at the start and the end of every collection, from the collecting thread) and
prints, at exit, the run's wall time, the young and the full collections' count and
seconds, and each full collection: when it started (s from this script's start), how
long it took, and the live heap it walked (``sys.getallocatedblocks()`` at its start:
~0.1% of a full collection's own time). Only the collections' totals differ between an
as-it-comes run and its ``--fixed`` variant when the script's own code does not.

    cd tests/threads_corpus
    python gc_timings.py services/rerank_catalog.py
    python gc_timings.py services/rerank_catalog.py --fixed
"""

from __future__ import annotations

import atexit
import gc
import runpy
import sys
import time

FULL = 2  # CPython's oldest generation: a collection of it walks every container


class Timings:
    def __init__(self) -> None:
        self.began = time.perf_counter()
        self.young = [0, 0.0]  # collections, seconds
        self.full: list[tuple[float, float, int]] = []  # (start s, seconds, heap blocks)
        self._start = 0.0
        self._blocks = 0

    def on_collection(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            if info["generation"] >= FULL:
                self._blocks = sys.getallocatedblocks()
            self._start = time.perf_counter()
            return
        took = time.perf_counter() - self._start
        if info["generation"] >= FULL:
            self.full.append((self._start - self.began, took, self._blocks))
        else:
            self.young[0] += 1
            self.young[1] += took

    def report(self) -> None:
        wall = time.perf_counter() - self.began
        full_s = sum(took for _, took, _ in self.full)
        print(
            f"wall {wall:.2f} s; young collections {self.young[0]}, {self.young[1]:.2f} s; "
            f"full collections {len(self.full)}, {full_s:.2f} s",
            file=sys.stderr,
        )
        print("full collections: start s, ms, heap blocks", file=sys.stderr)
        for start, took, blocks in self.full:
            print(f"  {start:7.3f} {1e3 * took:7.1f} {blocks:10d}", file=sys.stderr)


def main() -> None:
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    timings = Timings()
    gc.callbacks.append(timings.on_collection)
    atexit.register(timings.report)
    sys.argv = sys.argv[1:]
    runpy.run_path(sys.argv[0], run_name="__main__")


if __name__ == "__main__":
    main()
