"""What a stack-sampler tick costs warm and as it comes at 100 Hz: after 10 ms asleep.

The sampler sleeps 10 ms between ticks, and a tick holds the GIL while it runs: the
target's threads wait for that long. Timed back to back, a tick is a few microseconds
of Python; timed as the sampler runs it, after a sleep, its code and data have left the
caches (and on a virtual machine the idle vCPU may have left the core) and it takes
many times that. This prints, for ``--gap`` sleeps of 0 (back to back), 1 ms and 10 ms
(the 100-Hz tick), the median wall time of:

- ``noop``: an empty Python call, the floor;
- ``walk``: ``sys._current_frames()`` and a walk of one 20-frame stack, the least a
  Python tick must do;
- ``sample``: ``StackSampler.sample()`` with one other thread, parked 20 frames deep.

All in one thread with nothing else running: what is measured is the cost of coming
back cold, not contention. Run it on the machine whose figures you quote.

    python benchmarks/tick_cold_cost.py [--ticks 200]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import threading
import time
from collections.abc import Callable

from probe.samplers.stacks import StackSampler

DEPTH = 20


def parked(depth: int, release: threading.Event) -> None:
    if depth:
        parked(depth - 1, release)
    else:
        release.wait()


def median_us(fn: Callable[[], object], gap_s: float, ticks: int) -> float:
    times = []
    for _ in range(ticks):
        if gap_s:
            time.sleep(gap_s)
        started = time.perf_counter_ns()
        fn()
        times.append(time.perf_counter_ns() - started)
    return statistics.median(times) / 1e3


def main() -> None:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--ticks", type=int, default=200, help="timed calls per case and gap")
    args = p.parse_args()
    release = threading.Event()
    other = threading.Thread(target=parked, args=(DEPTH, release), daemon=True)
    other.start()
    time.sleep(0.1)
    sampler = StackSampler()
    ident = other.ident

    def noop() -> None:
        pass

    def walk() -> int:
        frame = sys._current_frames().get(ident)
        n = 0
        while frame is not None:
            n += id(frame.f_code) & 1
            frame = frame.f_back
        return n

    cases = {"noop": noop, "walk": walk, "sample": sampler.sample}
    gaps = (0.0, 0.001, 0.01)
    print("median us a call   " + "".join(f"{f'after {g * 1e3:g} ms':>14s}" for g in gaps))
    try:
        for name, fn in cases.items():
            row = [median_us(fn, gap, args.ticks) for gap in gaps]
            print(f"{name:19s}" + "".join(f"{us:14.1f}" for us in row), flush=True)
    finally:
        release.set()
        other.join()


if __name__ == "__main__":
    main()
