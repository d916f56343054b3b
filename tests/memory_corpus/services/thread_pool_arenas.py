"""A service fanning each request out to a pool of 16 threads that allocate and free
buffers: glibc gives each thread an arena, so RSS rises in steps while the pool warms up
and the arenas fill, then stays flat. Not a leak.

Truth: no leak (every buffer is freed); over a 4x longer run RSS stays at the level the
arenas reached (record.py --verify).
"""

from __future__ import annotations

import argparse
from concurrent.futures import ThreadPoolExecutor

import probe


def part(k: int) -> int:
    buffers = [bytearray(64 * 1024) for _ in range(8)]
    return sum(len(b) for b in buffers) + k


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--requests", type=int, default=3000)
    args = p.parse_args()
    with ThreadPoolExecutor(max_workers=16) as pool:
        for i in range(args.requests):
            with probe.request(id=f"r{i}"):
                sum(pool.map(part, range(16)))


if __name__ == "__main__":
    main()
