"""A batch scorer that allocates large numpy buffers per batch and frees them: RSS jumps
by 100-300 MB and falls back each batch (glibc returns mmapped blocks at once).
Undecorated. Not a leak.

Truth: no leak (every buffer is freed at the end of its batch); over a 4x longer run the
bursts stay the same height (record.py --verify).
"""

from __future__ import annotations

import argparse
import time

import numpy as np


def batch(rng: np.random.Generator, rows: int) -> float:
    x = rng.standard_normal((rows, 256))
    y = np.tanh(x @ rng.standard_normal((256, 64)))
    return float(y.mean())


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--seconds", type=float, default=12.0)
    args = p.parse_args()
    rng = np.random.default_rng(1)
    end = time.monotonic() + args.seconds
    i = 0
    while time.monotonic() < end:
        batch(rng, rows=(50_000, 100_000, 150_000)[i % 3])
        time.sleep(0.2)
        i += 1


if __name__ == "__main__":
    main()
