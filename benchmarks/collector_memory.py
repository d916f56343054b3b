"""Collector memory over a simulated hour at default settings: bounded, not growing.

Drives the real stack sampler and span recorder with a simulated clock: 360,000 ticks
(one hour at 100 Hz) over the live stacks of 8 real threads, ~280 spans a second, a
drain into a real run directory every simulated second (as the collector does), and
prints the process's RSS at checkpoints. Collector memory is what the run adds over the
baseline taken before it; a bounded collector shows a flat line after the first minutes.

    python benchmarks/collector_memory.py [--minutes 60]
"""

from __future__ import annotations

import argparse
import os
import tempfile
import threading
import time
from pathlib import Path

import psutil

from probe import spans
from probe.rundir.writer import RunWriter
from probe.samplers.stacks import StackSampler


def park(stop: threading.Event, depth: int) -> None:
    if depth:
        park(stop, depth - 1)
    else:
        stop.wait()


def main() -> None:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--minutes", type=float, default=60)
    args = p.parse_args()
    stop = threading.Event()
    workers = [threading.Thread(target=park, args=(stop, 5 + k), daemon=True) for k in range(8)]
    for w in workers:
        w.start()
    proc = psutil.Process()
    clock_ns = [0]
    cpu = [0]

    def fake_cpu(tid: int) -> int:
        cpu[0] += 3_000_000  # every thread a little busy: no merging of idle rows
        return cpu[0]

    sampler = StackSampler(clock=lambda: clock_ns[0], thread_cpu=fake_cpu)
    recorder = spans.SpanRecorder()
    stage = spans.stage("simulated")
    ticks = int(args.minutes * 60 * 100)
    baseline = proc.memory_info().rss
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        writer = RunWriter(Path(tmp))
        spans.activate(recorder)
        try:
            for tick in range(1, ticks + 1):
                clock_ns[0] += 10_000_000
                sampler.sample()
                if tick % 100 == 0:  # one simulated second: spans, then the collector flush
                    for _ in range(280):
                        with stage:
                            pass
                    for table, rows in sampler.drain().items():
                        writer.append(table, rows)
                    for buf, records in recorder.drain():
                        writer.append("spans", records, prefix=(buf.ident,))
                    writer.flush()
                if tick % (ticks // 6) == 0:
                    minutes = tick / 6000
                    grown = (proc.memory_info().rss - baseline) / 2**20
                    print(
                        f"  {minutes:5.1f} simulated min: collector memory {grown:6.1f} MiB, "
                        f"{sampler.distinct_stacks} stacks",
                        flush=True,
                    )
        finally:
            spans.activate(None)
            writer.close()
            stop.set()
    print(
        f"simulated {args.minutes:g} min at 100 Hz in {time.perf_counter() - t0:.0f} s; "
        f"pid {os.getpid()}"
    )


if __name__ == "__main__":
    main()
