"""A pricing service that memoises its answers per product; products are drawn from a
Zipf-like popularity over a catalogue of 6,000: the memo grows fast at first, then ever
more slowly as new products become rare -- warm-up that decelerates without a clear
plateau within a short run. Bounded: it can never hold more than the catalogue.

Truth: no leak (at most 6,000 entries of ~3 KB); over a 4x longer run growth flattens
towards the bound (record.py --verify).
"""

from __future__ import annotations

import argparse
import random
import time

import probe

MEMO: dict[int, list[float]] = {}
CATALOGUE = 6000


def price(product: int) -> list[float]:
    hit = MEMO.get(product)
    if hit is None:
        time.sleep(0.0003)
        hit = MEMO[product] = [product * 0.01 + k for k in range(360)]
    return hit


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--requests", type=int, default=20000)
    args = p.parse_args()
    rng = random.Random(7)
    weights = [1.0 / (k + 1) ** 0.8 for k in range(CATALOGUE)]
    products = rng.choices(range(CATALOGUE), weights, k=args.requests)
    for i, product in enumerate(products):
        with probe.request(id=f"r{i}"):
            price(product)
            time.sleep(0.0002)


if __name__ == "__main__":
    main()
