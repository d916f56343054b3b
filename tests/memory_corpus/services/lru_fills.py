"""A lookup service with a bounded LRU cache: memory grows while the cache fills (the
first ~3,000 requests, ~12 MB), then stays flat as it evicts. Warm-up, not a leak.

Truth: no leak (by construction: at most 3,000 entries of ~4 KB); over a 4x longer run
RSS stays at its plateau (record.py --verify).
"""

from __future__ import annotations

import argparse
import random
import time
from collections import OrderedDict

import probe

CACHE: OrderedDict[int, bytes] = OrderedDict()
LIMIT = 3000


def lookup(key: int) -> bytes:
    hit = CACHE.get(key)
    if hit is not None:
        CACHE.move_to_end(key)
        return hit
    time.sleep(0.0005)  # the backing store
    value = random.randbytes(4096)
    CACHE[key] = value
    if len(CACHE) > LIMIT:
        CACHE.popitem(last=False)
    return value


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--requests", type=int, default=14000)
    args = p.parse_args()
    rng = random.Random(5)
    for i in range(args.requests):
        with probe.request(id=f"r{i}"):
            lookup(rng.randrange(1_000_000))  # almost never a hit: the LRU turns over


if __name__ == "__main__":
    main()
