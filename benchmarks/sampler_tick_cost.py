"""What one stack-sampler tick costs with 10, 50 and 200 threads, kernel states on and off,
and run-queue delays on and off.

Every thread is parked in a native call no wait rule names (``os.readv`` on a pipe), the
case where the sampler asks the kernel (``probe.samplers.kernel``): the worst case for
its reads, of which at most ``max_kernel_reads`` (16) are made a tick. Prints the mean
tick over ``--ticks`` ticks, with the kernel asked and with it turned off (a
``KernelStates`` for a machine with no table), and what that is of a 10-ms tick (100 Hz).

Then the run-queue delays (``probe.samplers.kernel.RunQueueDelays``: one ``pread`` of a
thread's schedstat, read only for threads that ran since the last tick, at most
``max_run_queue_reads`` (32) a tick): every thread wakes each millisecond from a sleep,
so each ran since any tick, the worst case; the sampler as it is, one reading every
thread that ran (no budget), and one with the reads turned off (``unavailable`` set, as
on a kernel without them), their ticks taken in turn, medians.

    python benchmarks/sampler_tick_cost.py [--ticks 300]
"""

from __future__ import annotations

import argparse
import os
import statistics
import threading
import time

from probe.samplers.kernel import KernelStates, RunQueueDelays
from probe.samplers.stacks import StackSampler


def parked_threads(n: int) -> tuple[list[threading.Thread], list[tuple[int, int]]]:
    pipes = [os.pipe() for _ in range(n)]
    threads = [
        threading.Thread(target=os.readv, args=(r, [bytearray(1)]), daemon=True) for r, _ in pipes
    ]
    for t in threads:
        t.start()
    time.sleep(0.2)  # all inside readv
    return threads, pipes


def release(threads: list[threading.Thread], pipes: list[tuple[int, int]]) -> None:
    for _, w in pipes:
        os.write(w, b"x")
    for t in threads:
        t.join()
    for r, w in pipes:
        os.close(r)
        os.close(w)


def waking_threads(n: int) -> tuple[list[threading.Thread], threading.Event]:
    """``n`` threads that each wake every millisecond: all ran since any tick."""
    stop = threading.Event()

    def wake() -> None:
        while not stop.wait(0.001):
            pass

    threads = [threading.Thread(target=wake, daemon=True) for _ in range(n)]
    for t in threads:
        t.start()
    time.sleep(0.2)
    return threads, stop


def without_run_queue() -> RunQueueDelays:
    off = RunQueueDelays()
    off.unavailable = "turned off (benchmark)"
    return off


def mean_tick_us(sampler: StackSampler, ticks: int) -> float:
    """Mean over ``ticks``, drained every 100 ticks as the collector does at 100 Hz (a
    thread still parked where the kernel was asked is not asked again until then)."""
    total = 0.0
    for k in range(ticks):
        start = time.perf_counter()
        sampler.sample()
        total += time.perf_counter() - start
        if k % 100 == 99:
            sampler.drain()
    return total / ticks * 1e6


def median_ticks_us(samplers: list[StackSampler], ticks: int) -> list[float]:
    """Each sampler's median tick, their ticks taken in turn (A B C A B C ...): with
    threads waking all the time a tick's length is mostly the wait for the GIL, which
    drifts; side by side, the drift is the same for each, and the median leaves out the
    ticks that waited a switch interval."""
    times: list[list[float]] = [[] for _ in samplers]
    for k in range(ticks):
        for sampler, taken in zip(samplers, times, strict=True):
            start = time.perf_counter()
            sampler.sample()
            taken.append(time.perf_counter() - start)
            if k % 100 == 99:
                sampler.drain()
    return [statistics.median(t[1:]) * 1e6 for t in times]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ticks", type=int, default=300)
    args = parser.parse_args()
    print(f"{'threads':>8} {'kernel on':>12} {'kernel off':>12} {'on, of a 10-ms tick':>20}")
    for n in (10, 50, 200):
        threads, pipes = parked_threads(n)
        try:
            on = mean_tick_us(StackSampler(), args.ticks)
            off = mean_tick_us(StackSampler(kernel_states=KernelStates(machine="none")), args.ticks)
        finally:
            release(threads, pipes)
        print(f"{n:>8} {on:>10.0f}us {off:>10.0f}us {on / 10_000:>19.1%}")
    print(
        f"\n{'threads':>8} {'run queue on':>12} {'all read':>12} {'off':>12}"
        f" {'on - off':>10}  (median ticks, taken in turn)"
    )
    for n in (10, 50, 200):
        waking, stop = waking_threads(n)
        try:
            on, every, off = median_ticks_us(
                [
                    StackSampler(),  # at most max_run_queue_reads (32) a tick
                    StackSampler(max_run_queue_reads=n),  # every thread that ran
                    StackSampler(run_queue=without_run_queue()),
                ],
                args.ticks,
            )
        finally:
            stop.set()
            for t in waking:
                t.join()
        print(f"{n:>8} {on:>10.0f}us {every:>10.0f}us {off:>10.0f}us {on - off:>8.0f}us")
    # the read alone, threads parked: a tick's difference above carries the waking
    # threads' contention for the GIL, which grows with their number
    threads, pipes = parked_threads(50)
    try:
        reader = RunQueueDelays()
        tids = [t.native_id for t in threads if t.native_id is not None]
        start = time.perf_counter()
        for _ in range(200):
            for tid in tids:
                reader.read(tid)
        per_read = (time.perf_counter() - start) / (200 * len(tids)) * 1e6
        reader.close()
    finally:
        release(threads, pipes)
    print(f"\none run-queue read (50 parked threads, 200 rounds): {per_read:.2f}us")


if __name__ == "__main__":
    main()
