"""A batch job that converts files one at a time by running a converter program
(``subprocess.run`` of a separate Python process that computes for ~0.1 s) from
``convert_file``; the main thread only waits for each child to exit.

Its one bottleneck is the wait on the child processes: the profiled process itself uses
almost no CPU. Truth, measured from outside: ``convert_batch.truth.json``
(``python tests/threads_corpus/measure.py convert_batch``; the per-thread figures are the
parent's, the children are not its threads).

``--fixed`` runs the conversions on a thread pool, one thread a core: the children side
by side (the fix probe proposes since 2026-12-07). Plain pairs, as it comes then
``--fixed`` (``/usr/bin/time``, 2026-12-07): 2.33/1.24, 2.43/1.24, 2.38/1.26 s:
**1.88-1.96x**.

    python convert_batch.py [--files 20] [--fixed]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys

CONVERTER = """
import sys, time
end = time.perf_counter() + 0.1
n = 0
while time.perf_counter() < end:
    n += 1
print(sys.argv[1], n)
"""


def convert_file(name: str) -> str:
    done = subprocess.run(
        [sys.executable, "-S", "-c", CONVERTER, name], capture_output=True, text=True, check=True
    )
    return done.stdout


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=20)
    parser.add_argument("--fixed", action="store_true", help="a child a core, side by side")
    args = parser.parse_args()
    names = [f"scan-{i:03d}.tif" for i in range(args.files)]
    if args.fixed:
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(max_workers=os.cpu_count()) as pool:
            outputs = list(pool.map(convert_file, names))
    else:
        outputs = [convert_file(name) for name in names]
    print(f"{len(outputs)} files converted")


if __name__ == "__main__":
    main()
