"""A batch job that converts files one at a time by running a converter program
(``subprocess.run`` of a separate Python process that computes for ~0.1 s) from
``convert_file``; the main thread only waits for each child to exit.

Its one bottleneck is the wait on the child processes: the profiled process itself uses
almost no CPU. Truth, measured from outside: ``convert_batch.truth.json``
(``python tests/threads_corpus/measure.py convert_batch``; the per-thread figures are the
parent's, the children are not its threads).

    python convert_batch.py [--files 20]
"""

from __future__ import annotations

import argparse
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
    args = parser.parse_args()
    outputs = [convert_file(f"scan-{i:03d}.tif") for i in range(args.files)]
    print(f"{len(outputs)} files converted")


if __name__ == "__main__":
    main()
