"""Image-text matching with a slow model start and image fetches on the request path.

Each request fetches an image from a slow upstream (a local HTTP server this sample starts
on 127.0.0.1, 20-50 ms a response), encodes it (a heavy matrix stage, several ms), encodes
64 candidate captions and returns the best match. The models are initialised lazily, on
the first request: random weights plus a projection precomputed with a QR decomposition,
~1.5 s of CPU that the first caller waits for. Two bottlenecks, then: the fetches (waiting
on the network, most of every request) and the initialisation (a huge first-request
latency). A diagnosis should name ``fetch`` as ``io``/``network`` and the first request's
``init`` stage as slow start-up (``lazy_init``).

``--fixed`` applies both recommendations (``concurrent_io`` and ``lazy_init``): the models
are initialised at start-up, before the service takes requests, and requests run on a
pool of 16 workers. Measured on this machine class under ``probe run`` (150 requests):
~18-20 requests/s default, ~180-240 fixed (10-12x, throughput over the serving window:
the default pays the model start inside its first request, the fixed one before
serving); the default run's diagnosis predicted 10.3-12.7x for the two together (four
pairs, 2026-11-26). A request costs 5.6-6.1 ms of CPU, the upstream's server thread's
included (``/usr/bin/time``, the difference of 150- and 600-request runs, no probe).

    python sample_services/multimodal_pipeline.py [--requests N] [--fixed]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from concurrent.futures import ThreadPoolExecutor

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np  # noqa: E402
from slow_upstream import SIDE, SlowUpstream  # noqa: E402
from slow_upstream import fetch as fetch_image  # noqa: E402

import probe  # noqa: E402

EMBED, CAPTIONS, CAPTION_LEN, VOCAB = 256, 64, 12, 2000


class Models:
    """The image and text encoders; building them is the slow start."""

    def __init__(self) -> None:
        rng = np.random.default_rng(7)
        pixels = (SIDE // 2) * (SIDE // 2) * 3
        self.image = (rng.standard_normal((pixels, 1024)) / np.sqrt(pixels)).astype(np.float32)
        q, _ = np.linalg.qr(rng.standard_normal((1024, 1024)))  # the costly precomputation
        for _ in range(5):
            q, _ = np.linalg.qr(q @ rng.standard_normal((1024, 1024)))
        self.project = q[:, :EMBED].astype(np.float32)
        self.words = rng.standard_normal((VOCAB, EMBED)).astype(np.float32)
        self.captions = rng.integers(0, VOCAB, size=(CAPTIONS, CAPTION_LEN))


_models: Models | None = None


@probe.stage("init")
def models() -> Models:
    global _models
    if _models is None:
        _models = Models()
    return _models


fetch = probe.span("fetch")(fetch_image)


@probe.stage("encode_image")
def encode_image(raw: bytes, m: Models) -> np.ndarray:
    image = np.frombuffer(raw, dtype=np.uint8).reshape(SIDE, SIDE, 3).astype(np.float32)
    small = image.reshape(SIDE // 2, 2, SIDE // 2, 2, 3).mean(axis=(1, 3)) / 255.0
    hidden = np.tanh(small.reshape(1, -1) @ m.image)
    v = hidden @ m.project
    return v / np.linalg.norm(v)


@probe.stage("match")
def match(image_vec: np.ndarray, m: Models) -> int:
    captions = m.words[m.captions].mean(axis=1)
    captions /= np.linalg.norm(captions, axis=1, keepdims=True)
    return int((captions @ image_vec.T).argmax())


def handle(i: int, upstream: SlowUpstream) -> int:
    with probe.request(id=f"pair-{i}"):
        m = models()
        raw = fetch(upstream.url(i))
        return match(encode_image(raw, m), m)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=150, help="image-text pairs to match")
    parser.add_argument(
        "--fixed", action="store_true", help="initialise at start-up, fetch concurrently"
    )
    args = parser.parse_args(argv)
    with SlowUpstream() as upstream:
        init_s = 0.0
        if args.fixed:
            t = time.perf_counter()
            models()  # at start-up, before the first request
            init_s = time.perf_counter() - t
        start = time.perf_counter()
        if args.fixed:
            with ThreadPoolExecutor(max_workers=16, thread_name_prefix="handle") as pool:
                list(pool.map(lambda i: handle(i, upstream), range(args.requests)))
        else:
            for i in range(args.requests):
                handle(i, upstream)
        wall = time.perf_counter() - start
    started = f"{init_s:.2f} s at start-up" if args.fixed else "inside the first request"
    print(
        f"matched {args.requests} pairs in {wall:.2f} s: {args.requests / wall:.1f} "
        f"requests/s (model start {started})",
        file=sys.stderr,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
