"""A thumbnail service that keeps the rendered bytes of every tenth request (a leak) in
large blocks: each kept block is 256 KB, served by mmap, so RSS climbs as a staircase of
256 KB steps rather than a line.

Truth: leak, ~2 MB/s in steps (by construction: 256 KB kept per 10 requests, ~80
requests/s); over a 4x longer run the staircase keeps climbing (record.py --verify).
"""

from __future__ import annotations

import argparse
import time

import probe

KEPT: list[bytes] = []


def render(i: int) -> bytes:
    time.sleep(0.012)  # the decoder, in native code
    return bytes([i % 251]) * (256 * 1024)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--requests", type=int, default=1000)
    args = p.parse_args()
    for i in range(args.requests):
        with probe.request(id=f"r{i}"):
            image = render(i)
            if i % 10 == 0:
                KEPT.append(image)


if __name__ == "__main__":
    main()
