"""What a watch attribution snapshot costs the service: tracemalloc's tables per live
trace, and the grouping of the traces by traceback, probe's
(``probe.watchdog.attribution.live_by_traceback``) against the stdlib's
(``Snapshot.statistics("traceback")``), on the same live heap in one run.

    python benchmarks/snapshot_grouping.py [--rows 100000 200000]

Each row is a dict holding a list and a str (~7 traced blocks). Printed per size: the
traces, the tables' bytes a trace, both groupings' seconds (copy included) and their
ratio, and that both found the same top group.
"""

from __future__ import annotations

import argparse
import gc
import time
import tracemalloc

from probe.watchdog.attribution import live_by_traceback


def measure(rows: int) -> str:
    tracemalloc.start(8)
    try:
        kept = [{"id": i, "v": [i, i + 1], "s": str(i)} for i in range(rows)]
        tables = tracemalloc.get_tracemalloc_memory()
        traces = len(tracemalloc.take_snapshot().traces)
        gc.collect()
        t0 = time.perf_counter()
        ours = live_by_traceback()
        t1 = time.perf_counter()
        theirs = tracemalloc.take_snapshot().statistics("traceback")
        t2 = time.perf_counter()
    finally:
        tracemalloc.stop()
    same = ours[0][1:] == (theirs[0].size, theirs[0].count)
    return (
        f"{len(kept):>9,} rows {traces:>10,} traces  {tables / traces:5.0f} B a trace  "
        f"probe {t1 - t0:6.2f} s  stdlib {t2 - t1:6.2f} s  "
        f"({(t2 - t1) / (t1 - t0):4.1f}x)  same top group: {same}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, nargs="+", default=[100_000, 200_000])
    for rows in parser.parse_args().rows:
        print(measure(rows), flush=True)


if __name__ == "__main__":
    main()
