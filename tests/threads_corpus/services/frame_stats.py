"""A batch job that computes statistics of video frames on a process pool, nothing
decorated: the main thread decodes each frame (a 1920x1080x3 float32 array, ~24 MB,
made by numpy) and submits it to a ProcessPoolExecutor of two workers, which compute a
few statistics (~5 ms of numpy). Every frame crosses to a worker through a pipe,
pickled by the pool's feeder thread, and is unpickled there.

Truth, measured from outside (``frame_stats.truth.json``, ``python measure.py
frame_stats``, 2026-12-04): 8.2 s of wall; the feeder thread 3.77 s of CPU, on a CPU 59%
of the run and asleep writing into a pipe (``anon_pipe_write``) 35%; the main thread
2.36 s of CPU (making frames), asleep on a futex 68%; py-spy's top on-CPU function
``ForkingPickler.dumps``. With ``--threads`` (nothing copied) the same 150 frames took
0.38-0.41 s against 7.9-8.4 s (``/usr/bin/time``, two pairs): the copy is the job.

    python frame_stats.py [--frames N] [--threads]

``--threads``: a ThreadPoolExecutor instead (numpy releases the GIL; nothing is copied).
"""

from __future__ import annotations

import argparse
import sys
import time
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor

import numpy as np


def decode(i: int) -> np.ndarray:
    frame = np.empty((1080, 1920, 3), dtype=np.float32)
    frame.fill(i % 255)
    return frame


def frame_stats(frame: np.ndarray) -> tuple[float, float]:
    small = frame[::4, ::4]
    return float(small.mean()), float(small.std())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--frames", type=int, default=150)
    parser.add_argument("--threads", action="store_true")
    args = parser.parse_args()
    pool_type = ThreadPoolExecutor if args.threads else ProcessPoolExecutor
    start = time.perf_counter()
    with pool_type(max_workers=2) as pool:
        futures = [pool.submit(frame_stats, decode(i)) for i in range(args.frames)]
        results = [f.result() for f in futures]
    wall = time.perf_counter() - start
    rate = len(results) / wall
    print(f"{len(results)} frames in {wall:.2f} s: {rate:.1f} frames/s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
