"""A service that loads its model on the 200th request (a lazily initialised feature):
one 150 MB step in the middle of the run, flat before and after. Not a leak.

Truth: no leak (one allocation, kept for the life of the process by design); over a 4x
longer run RSS stays at the level after the step (record.py --verify).
"""

from __future__ import annotations

import argparse
import time

import numpy as np

import probe

MODEL: np.ndarray | None = None


def predict(i: int) -> float:
    global MODEL
    if i >= 200 and MODEL is None:
        MODEL = np.ones((150 * 2**20) // 8)  # touched: resident at once
    time.sleep(0.01)
    return float(MODEL[i % 1000]) if MODEL is not None else 0.0


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--requests", type=int, default=1000)
    args = p.parse_args()
    for i in range(args.requests):
        with probe.request(id=f"r{i}"):
            predict(i)


if __name__ == "__main__":
    main()
