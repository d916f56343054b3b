"""A balanced service with no bottleneck to speak of and no leak (left undecorated).

Each request parses a JSON body (~9%), ranks candidates with numpy (~31%), builds its
response in Python (~33%) and waits briefly on a downstream call (~27%, a 0.2 ms sleep
standing in for a fast cache). Measured in-process: ~1.1 ms a request. No stage
reaches half of the time: sampled, ``rank`` usually comes out largest (~40%: the JSON
parse, C code that holds the GIL, is caught at rank's first GIL-releasing call); on a
loaded host the downstream wait can edge ahead. Either way a modest dominant stage. A per-process
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
CANDIDATES, DIM, TOP = 400, 640, 320


def make_bodies(n: int = 64) -> list[str]:
    rng = random.Random(11)
    return [
        json.dumps(
            {
                "user": rng.randint(0, 10_000),
                "candidates": [rng.randint(0, 4999) for _ in range(CANDIDATES)],
                "context": {f"f{i}": rng.random() for i in range(100)},
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
    return np.argsort(scores)[::-1][:TOP]


def postprocess(request: dict, ranked: np.ndarray) -> dict:
    ids = [request["candidates"][i] for i in ranked.tolist()]
    context = request["context"]
    items = [
        {"id": i, "pos": pos, "label": f"item-{i}", "boost": round(context[f"f{i % 100}"], 3)}
        for pos, i in enumerate(ids)
    ]
    return {"user": request["user"], "items": items}


def downstream_call() -> None:
    time.sleep(0.0002)  # ~0.25-0.3 ms with the kernel's timer slack


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=6000, help="requests to serve")
    args = parser.parse_args(argv)
    rng = np.random.default_rng(5)
    items = rng.standard_normal((5000, DIM))
    user_vectors = rng.standard_normal((256, DIM))
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
