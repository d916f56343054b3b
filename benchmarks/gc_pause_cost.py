"""What timing the garbage collector's collections costs (``probe.samplers.gc_pauses``):
a loop that allocates containers as fast as Python can, and so collects as often as
anything will, timed plain, with a callback that does nothing in ``gc.callbacks`` (what
CPython's callback machinery costs: an info dict built, two calls a collection), and
with probe's. Arms alternate in blocks within one process, the median of the rounds
taken; printed: each arm's time over plain, the cost per collection in microseconds,
and the collections a second the loop made.

The ratio is that loop's worst case: a service makes a collection per ~700 containers
it allocates and keeps for a while, so the cost is this per collection times its
collections a second (the reference workloads, ``../shared/workloads``: 11-16 a second;
rerank_catalog in tests/threads_corpus: ~2,700).

    python benchmarks/gc_pause_cost.py [--rounds 20]
"""

from __future__ import annotations

import argparse
import gc
import statistics
import time
from collections.abc import Callable
from typing import Any

from probe.samplers.gc_pauses import GcPauses


def churn(n: int = 400_000) -> None:
    """Containers kept a thousand at a time: a young collection every ~700 allocations."""
    kept: list[Any] = []
    for i in range(n):
        kept.append([i, (i,)])
        if len(kept) > 1000:
            kept.clear()


def timed(callback: Callable[[str, dict[str, int]], None] | None) -> float:
    if callback is not None:
        gc.callbacks.append(callback)
    try:
        started = time.perf_counter()
        churn()
        return time.perf_counter() - started
    finally:
        if callback is not None:
            gc.callbacks.remove(callback)


def collections_in_one_churn() -> int:
    before = sum(s["collections"] for s in gc.get_stats())
    churn()
    return sum(s["collections"] for s in gc.get_stats()) - before


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=20)
    args = parser.parse_args()
    probe = GcPauses()
    arms: dict[str, Callable[[str, dict[str, int]], None] | None] = {
        "plain": None,
        "empty callback": lambda phase, info: None,
        "probe's callback": probe._on_collection,
    }
    times: dict[str, list[float]] = {name: [] for name in arms}
    timed(None)  # warm
    for _ in range(args.rounds):
        for name, callback in arms.items():
            times[name].append(timed(callback))
        probe.drain()
    n = collections_in_one_churn()
    plain = statistics.median(times["plain"])
    print(f"{n} collections a loop of {plain * 1e3:.1f} ms: {n / plain:,.0f} a second")
    for name in arms:
        t = statistics.median(times[name])
        print(f"{name:18s} {t / plain:.4f} x plain   {(t - plain) / n * 1e6:5.2f} us a collection")


if __name__ == "__main__":
    main()
