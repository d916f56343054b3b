"""A balanced service with no bottleneck to speak of and no leak (left undecorated).

Each request parses a JSON body (~10%), ranks candidates with numpy (~45%: the modest
dominant stage, ``rank``), post-processes in Python (~25%) and waits briefly on a
downstream call (~20%, a sleep standing in for a fast cache or database). A per-process
response cache is filled and then cleared about once a second, so memory saw-tooths
without growing. Nothing here uses probe's decorators: the diagnosis must find ``rank``
from stack samples alone, and must not cry leak at the saw-tooth.

No ``--fixed``: there is nothing worth fixing.

    python sample_services/healthy_service.py [--requests N]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import time

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np  # noqa: E402

CACHE_CLEAR_S = 1.0


def make_bodies(n: int = 64) -> list[str]:
    rng = random.Random(11)
    return [
        json.dumps(
            {
                "user": rng.randint(0, 10_000),
                "candidates": [rng.randint(0, 4999) for _ in range(300)],
            }
        )
        for _ in range(n)
    ]


def parse(body: str) -> dict:
    return json.loads(body)


def rank(request: dict, items: np.ndarray, user_vectors: np.ndarray) -> np.ndarray:
    candidates = items[request["candidates"]]
    user = user_vectors[request["user"] % len(user_vectors)]
    scores = candidates @ user
    return np.argsort(scores)[::-1][:20]


def postprocess(request: dict, ranked: np.ndarray) -> dict:
    ids = [request["candidates"][i] for i in ranked.tolist()]
    return {"user": request["user"], "items": ids, "explain": {str(i): i % 7 for i in ids}}


def downstream_call() -> None:
    time.sleep(0.0006)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=6000, help="requests to serve")
    args = parser.parse_args(argv)
    rng = np.random.default_rng(5)
    items = rng.standard_normal((5000, 512))
    user_vectors = rng.standard_normal((256, 512))
    bodies = make_bodies()
    cache: dict[int, dict] = {}
    last_clear = start = time.perf_counter()
    for i in range(args.requests):
        request = parse(bodies[i % len(bodies)])
        cache[i] = postprocess(request, rank(request, items, user_vectors))
        downstream_call()
        if time.perf_counter() - last_clear >= CACHE_CLEAR_S:  # the saw-tooth
            cache.clear()
            last_clear = time.perf_counter()
    wall = time.perf_counter() - start
    print(
        f"served {args.requests} requests in {wall:.2f} s: {args.requests / wall:.1f} requests/s",
        file=sys.stderr,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
