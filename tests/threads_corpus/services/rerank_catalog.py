"""A batch job that re-ranks candidates from an in-memory catalog, nothing decorated.

At start it loads a catalog of 400,000 items (an ``Item`` object each, with a list of
tags: ~800,000 objects the garbage collector tracks, as a vocabulary, a feature store or
a product index kept in Python objects would be). Then, for each of 240 queries, it builds
the query's candidates (``gather_candidates``: 25,000 dicts, each with a list of
features) and scores them in pure Python (``score_candidate``), keeping the ten best.

The candidates live for their query, long enough for CPython's collector to promote them
to its oldest generation; once a quarter as many objects as the catalog holds have been
promoted, a full collection walks everything, the catalog included: every ~4 queries
here. The job's own code does not change between the pairs below; only the collector's
view of the catalog does.

``--fixed`` calls ``gc.freeze()`` once the catalog is loaded (its objects leave the
collector's generations for good, so a full collection no longer walks them).

Truth, measured from outside (``rerank_catalog.truth.json``: ``python
tests/threads_corpus/measure.py rerank_catalog``, 2026-12-05): one thread, 0.99 cores,
py-spy's on-CPU samples 74% inside ``gather_candidates`` (the collections run inside
the allocation that sets them off, so a sampler of Python stacks charges them there);
under ``py-spy record --native``, **51%** of the samples inside CPython's collector
(``gc_collect_main``). The interpreter's own timings of the same (``gc.callbacks``, a
separate run, no probe): 57% of the wall in collections, 48% in 59 full ones (~54 ms
each), 10% in 18,000 young ones; with ``--fixed`` full collections 3.20 -> 0.34 s.
Plain runs, alternated, five pairs: 7.14 s as it comes (7.00-7.26), 4.18 s with
``--fixed`` (4.02-4.32): **1.71x** (pairs 1.62-1.78).

Again on 2026-12-06, each collection timed and the heap read at its start (``python
tests/threads_corpus/gc_timings.py tests/threads_corpus/services/rerank_catalog.py
[--fixed]``, three pairs): 59 full collections, 7 of them during the load (0.18-0.24 s,
either way); from the first query on, 52 of 63-66 ms (3.30-3.44 s) as it comes and 127
of ~1 ms (0.13-0.15 s) with ``--fixed``; the heap at their starts 2.05-2.16 million
blocks, its floor 0.97 of its mean. Five plain pairs that hour: 1.65-1.83x (median
1.76x); three that morning 1.88-2.05x: the host's speed moves the truth by a tenth.

    python rerank_catalog.py [--queries 240] [--fixed]
"""

from __future__ import annotations

import argparse
import gc
import heapq
import random

CATALOG_SIZE = 400_000
CANDIDATES = 25_000
TAGS = ("new", "sale", "eco", "gift", "bulk", "rare", "top", "kids")


class Item:
    """One catalog entry, as an index loaded from a file would keep it."""

    __slots__ = ("item_id", "price", "tags")

    def __init__(self, item_id: int, price: float, tags: list[str]) -> None:
        self.item_id = item_id
        self.price = price
        self.tags = tags


def load_catalog(rng: random.Random) -> list[Item]:
    return [
        Item(i, rng.uniform(1.0, 500.0), [TAGS[i % 8], TAGS[(i * 7) % 8]])
        for i in range(CATALOG_SIZE)
    ]


def gather_candidates(catalog: list[Item], query: int) -> list[dict]:
    start = (query * 7919) % (CATALOG_SIZE - CANDIDATES)
    return [
        {"item": item, "features": [item.price / 500.0, len(item.tags), query % 5]}
        for item in catalog[start : start + CANDIDATES]
    ]


def score_candidate(candidate: dict, query: int) -> float:
    price, n_tags, bucket = candidate["features"]
    return (1.0 - price) * 0.6 + n_tags * 0.1 + (bucket == query % 3) * 0.3


def rerank(catalog: list[Item], query: int) -> list[int]:
    candidates = gather_candidates(catalog, query)
    best = heapq.nlargest(10, candidates, key=lambda c: score_candidate(c, query))
    return [c["item"].item_id for c in best]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--queries", type=int, default=240)
    parser.add_argument("--fixed", action="store_true", help="gc.freeze() after loading")
    args = parser.parse_args()
    catalog = load_catalog(random.Random(7))
    if args.fixed:
        gc.freeze()
    kept = 0
    for query in range(args.queries):
        kept += len(rerank(catalog, query))
    print(f"{kept} items kept for {args.queries} queries")


if __name__ == "__main__":
    main()
