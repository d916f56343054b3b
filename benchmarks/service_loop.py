"""A service-like request loop that reports its own throughput (the benchmark's target).

Each request (~200 us): json decode -> pure-Python preprocess -> numpy model ->
postprocess, each a ``probe.stage`` inside a ``probe.request`` (with
``SERVICE_LOOP_SPANS=0`` the code is left undecorated: an unchanged service). Prints one
JSON line: requests/s measured over the loop only (start-up and shutdown excluded), so
``throughput.py`` can compare a plain run with a ``probe run`` of the same script.
"""

from __future__ import annotations

import json
import os
import random
import sys
import time

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np  # noqa: E402

import probe  # noqa: E402

SECONDS = float(os.environ.get("SERVICE_LOOP_SECONDS", "4"))

if os.environ.get("SERVICE_LOOP_SPANS", "1") == "0":
    import contextlib

    def stage(name: str):  # type: ignore[no-untyped-def]
        return lambda fn: fn

    def request():  # type: ignore[no-untyped-def]
        return contextlib.nullcontext()
else:
    stage, request = probe.stage, probe.request


def payloads(n: int = 64) -> list[str]:
    rng = random.Random(1234)
    return [
        json.dumps(
            {
                "id": f"req-{i}",
                "features": [rng.uniform(-1, 1) for _ in range(200)],
                "meta": {"user": f"u{rng.randint(0, 9999)}", "priority": rng.randint(0, 5)},
            }
        )
        for i in range(n)
    ]


@stage("decode")
def decode(raw: str) -> dict:
    return json.loads(raw)


@stage("preprocess")
def preprocess(req: dict) -> list[float]:
    feats = req["features"]
    mu = sum(feats) / len(feats)
    sd = (sum((v - mu) ** 2 for v in feats) / len(feats)) ** 0.5 or 1.0
    return [(v - mu) / sd for v in feats]


@stage("model")
def model(x: list[float], w: np.ndarray, state: np.ndarray) -> np.ndarray:
    state[0, :] = x[:128]
    return state @ w


@stage("postprocess")
def postprocess(req: dict, y: np.ndarray) -> dict:
    row = y[0].tolist()
    top = sorted(enumerate(row), key=lambda kv: kv[1], reverse=True)[:10]
    return {"id": req["id"], "top": {f"class_{i}": round(s, 4) for i, s in top}}


def main() -> None:
    bodies = payloads()
    rng = np.random.default_rng(0)
    w = rng.standard_normal((128, 128), dtype=np.float32)
    state = rng.standard_normal((128, 128), dtype=np.float32)
    done = 0
    start = time.perf_counter()
    deadline = start + SECONDS
    while True:
        for _ in range(50):
            raw = bodies[done % len(bodies)]
            with request():
                req = decode(raw)
                postprocess(req, model(preprocess(req), w, state))
            done += 1
        if time.perf_counter() >= deadline:
            break
    wall = time.perf_counter() - start
    print(json.dumps({"requests": done, "seconds": wall, "throughput": done / wall}))
    sys.stdout.flush()


if __name__ == "__main__":
    main()
