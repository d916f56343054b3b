"""A scoring service whose result cache keeps every entry forever (a memory leak).

Each request scores a user against a catalogue (a numpy product, ~5 ms) and stores the
result -- a dict holding its top 120 scores and ids, ~8 KB -- in a module-level cache
keyed by (user, request time). Keys never repeat, nothing is ever evicted: memory grows ~1-2 MB/s
and, because the cache holds GC-tracked containers, every full garbage collection walks
more of them, so the service also slows down as it grows. A diagnosis should flag the
leak (``fix_leak``); with ``--memory`` it names the allocation site that grows (the
line building the cached result: tracemalloc records where memory is allocated, not
where it is kept).

``--fixed`` bounds the cache: an LRU of 128 entries (OrderedDict).
By default it serves for 3 seconds and at least 1,200 requests, whichever is longer:
hosts of this class have run 1,200 requests in ~6 s (2026-11), in 1.9 s and in 3.9 s
(both 2026-12-04). Too short a run leaves too few memory readings (every 0.1 s) after
warm-up to judge (a leak verdict needs 8 floors; 500 requests, 0.8 s: "undetermined: too
few readings"); too few requests leave the cache under the 1,000 items from which
``probe watch``'s census names a container (``container_min``: 815-910 in 3 s on the
slower of those hosts, and the leak went unnamed).
Measured on this machine class (2026-12-04, 3 s, ~1,900 requests): the default's memory
grows ~6.7 MB/s (`probe run`'s slope); the fixed one stays flat at its 128 entries
(~1 MB). Throughput is about the same over so short a run: a leak costs memory first, and
only then time (longer GC passes, swapping, OOM).

    python sample_services/leaky_cache.py [--seconds S | --requests N] [--fixed]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections import OrderedDict

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np  # noqa: E402

import probe  # noqa: E402

_CACHE: dict[tuple[int, int], dict] = {}
LRU_SIZE = 128
# see the docstring: a time, so that any host reads 30 memory readings, and enough
# requests that the cache reaches a size the watchdog's census names
DEFAULT_SECONDS = 3.0
DEFAULT_AT_LEAST = 1_200


class BoundedCache(OrderedDict):  # type: ignore[type-arg]
    def __init__(self, limit: int) -> None:
        super().__init__()
        self.limit = limit

    def __setitem__(self, key: object, value: object) -> None:
        super().__setitem__(key, value)
        self.move_to_end(key)
        if len(self) > self.limit:
            self.popitem(last=False)


def rss_mib() -> float:
    """Resident memory now (a high-water mark would show start-up transients instead)."""
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


@probe.stage("score")
def score(user: np.ndarray, catalogue: np.ndarray) -> dict[str, list]:
    scores = catalogue @ user
    top = np.argpartition(scores, -120)[-120:]
    return {"ids": top.tolist(), "scores": scores[top].tolist()}


@probe.stage("cache")
def remember(cache: dict, key: tuple[int, int], result: dict[str, list]) -> None:
    cache[key] = result  # the leak: keys never repeat and nothing is evicted


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, help="serve this many requests instead")
    parser.add_argument(
        "--seconds",
        type=float,
        help="serve for this long (default: 3 s and at least 1,200 requests, or --requests)",
    )
    parser.add_argument("--fixed", action="store_true", help="bounded LRU cache")
    args = parser.parse_args(argv)
    at_least = 0
    if args.requests is None and args.seconds is None:
        args.seconds, at_least = DEFAULT_SECONDS, DEFAULT_AT_LEAST
    rng = np.random.default_rng(3)
    catalogue = rng.standard_normal((40_000, 128))
    users = rng.standard_normal((64, 128))
    cache: dict = BoundedCache(LRU_SIZE) if args.fixed else _CACHE
    start = time.perf_counter()
    deadline = start + args.seconds if args.seconds is not None else None
    served = 0
    while (
        served < args.requests
        if deadline is None
        else time.perf_counter() < deadline or served < at_least
    ):
        with probe.request(id=f"req-{served}"):
            user = served % len(users)
            remember(cache, (user, time.perf_counter_ns()), score(users[user], catalogue))
        served += 1
    wall = time.perf_counter() - start
    print(
        f"served {served} requests in {wall:.2f} s: {served / wall:.1f} "
        f"requests/s ({len(cache)} cached, RSS {rss_mib():.1f} MiB)",
        file=sys.stderr,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
