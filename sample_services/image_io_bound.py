"""Image classification that downloads its inputs one after another (I/O-bound, network).

Each request downloads an image from a slow upstream (a local HTTP server this sample
starts on 127.0.0.1, answering after 20-50 ms), decodes it and classifies it with a small
numpy model (~1 ms). The download takes ~95% of each request and the thread sits waiting
on the socket; a diagnosis should name ``download`` as ``io``/``network`` and recommend
concurrent I/O.

``--fixed`` applies exactly that fix (``concurrent_io``): requests run on a thread pool of
16 workers, the count the diagnosis recommends. ``--compressed`` is a second, separate
fix: ask for the quarter-size, zlib-compressed image (``?small=1``), which decode inflates.
Measured on this machine class under ``probe run`` (150 requests): ~26 images/s
sequential, ~310 fixed (11.9x); the diagnosis of the default run predicted 14x. Without
probe (2026-12-02, three pairs, 600 requests fixed): ~26 sequential, ~350-370 fixed
(13.5-14.3x), against 12.9x predicted: probe costs the 16 threads more than the one.

    python sample_services/image_io_bound.py [--requests N] [--fixed] [--compressed]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import zlib
from concurrent.futures import ThreadPoolExecutor

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np  # noqa: E402
from slow_upstream import SIDE, SlowUpstream, fetch  # noqa: E402

import probe  # noqa: E402

CLASSES = 32


download = probe.span("download")(fetch)


@probe.stage("decode")
def decode(raw: bytes, small: bool) -> np.ndarray:
    if small:
        side = SIDE // 2
        return np.frombuffer(zlib.decompress(raw), dtype=np.uint8).reshape(side, side, 3)
    return np.frombuffer(raw, dtype=np.uint8).reshape(SIDE, SIDE, 3)


@probe.stage("classify")
def classify(image: np.ndarray, weights: np.ndarray) -> int:
    # Pool to a fixed 16x16 grid so full and quarter-size images share one model.
    side = image.shape[0]
    pooled = image.reshape(16, side // 16, 16, side // 16, 3).mean(axis=(1, 3))
    logits = (pooled.reshape(1, -1) / 255.0) @ weights
    return int(logits.argmax())


def serve(
    upstream: SlowUpstream, n: int, weights: np.ndarray, fixed: bool, compressed: bool = False
) -> int:
    def handle(i: int) -> int:
        with probe.request(id=f"img-{i}"):
            raw = download(upstream.url(i, small=compressed))
            return classify(decode(raw, compressed), weights)

    if not fixed:
        return len([handle(i) for i in range(n)])
    with ThreadPoolExecutor(max_workers=16, thread_name_prefix="download") as pool:
        return len(list(pool.map(handle, range(n))))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=200, help="images to classify")
    parser.add_argument("--fixed", action="store_true", help="concurrent downloads (16 workers)")
    parser.add_argument(
        "--compressed", action="store_true", help="ask for quarter-size, zlib-compressed images"
    )
    args = parser.parse_args(argv)
    weights = np.random.default_rng(1).standard_normal((16 * 16 * 3, CLASSES))
    with SlowUpstream() as upstream:
        start = time.perf_counter()
        served = serve(upstream, args.requests, weights, args.fixed, args.compressed)
        wall = time.perf_counter() - start
    print(
        f"classified {served} images in {wall:.2f} s: {served / wall:.1f} images/s", file=sys.stderr
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
