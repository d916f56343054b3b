"""A batch job that scores requests against each user's history, kept in a cache it fills
as it goes, nothing decorated.

Nothing big is loaded at start. Each of 300 requests comes from one of 150 users; the
job builds the request's features (``build_features``: 20,000 dicts, each with a list),
scores them against the user's history (``score_request``) and then replaces the user's
history in the cache with the request's summary (``remember``: 2,500 small lists), so the
cache grows to ~375,000 lists over the first half of the run and then stays there,
its entries replaced as users come back, as a session store, a feature cache or a
per-user state kept in Python objects would.

``--fixed`` calls ``gc.freeze()`` at start, as a fix for the collector would be written
"once loading is done": here nothing is loaded before the requests.

Truth, measured from outside (``session_scores.truth.json``: ``python
tests/threads_corpus/measure.py session_scores``, 2026-12-05): one thread, 0.99 cores;
py-spy's on-CPU samples 80% inside ``build_features``; under ``py-spy record --native``
**65%** inside CPython's collector (``gc_collect_main``). The interpreter's own timings
(``gc.callbacks``, a separate run, no probe): 65% of the wall in collections, 56% in 120
full ones. Plain runs, alternated, five pairs: 28.06 s as it comes against 25.65 s with
``--fixed``: **1.09x** (pairs 1.05-1.14): what the full collections walk is the cache,
made by the requests, which a freeze at start does not reach.

    python session_scores.py [--requests 300] [--fixed]
"""

from __future__ import annotations

import argparse
import gc
import random

USERS = 150
FEATURES = 20_000
HISTORY = 2_500


def build_features(rng: random.Random, request: int) -> list[dict]:
    return [{"slot": i % 64, "values": [rng.random(), (request + i) % 13]} for i in range(FEATURES)]


def score_request(features: list[dict], history: list[list[float]]) -> float:
    weight = sum(h[0] for h in history[:64]) / 64 if history else 0.5
    return sum(f["values"][0] * weight + f["values"][1] for f in features) / len(features)


def remember(features: list[dict]) -> list[list[float]]:
    return [[f["values"][0], float(f["slot"])] for f in features[:HISTORY]]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=300)
    parser.add_argument("--fixed", action="store_true", help="gc.freeze() at start")
    args = parser.parse_args()
    if args.fixed:
        gc.freeze()
    rng = random.Random(5)
    cache: dict[int, list[list[float]]] = {}
    total = 0.0
    for request in range(args.requests):
        user = request % USERS
        features = build_features(rng, request)
        total += score_request(features, cache.get(user, []))
        cache[user] = remember(features)
    print(f"{args.requests} requests scored, {len(cache)} users kept: {total:.1f}")


if __name__ == "__main__":
    main()
