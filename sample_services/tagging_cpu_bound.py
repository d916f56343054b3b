"""Image tagging whose CPU post-process starves the model (CPU-bound, pure Python).

Each request decodes a small image, runs a fast model stage (one numpy matrix product and
a softmax: well under a millisecond) and then a dominant-colour post-process: k-means
over the image's pixels written as Python loops. The post-process takes ~95% of each
request while the model stage sits idle; a diagnosis should name ``postprocess`` as a
``cpu``/``python`` bottleneck and recommend vectorising it.

``--fixed`` applies exactly that fix (``vectorize_python``): the same k-means, vectorised
with numpy. Measured on this machine class under ``probe run`` (300 requests): ~130
images/s default, ~890 fixed (6.8x), 2026-11-23; ~177 and ~1,025 (5.8x), 2026-11-25, the
host's numpy slower against its interpreter; ~104 and ~660 (6.4x), 2026-11-28. The
diagnosis of the default run predicts ~5.6x, a conservative figure with its range
(4.3-22.6x: README, "Checked on every sample").

    python sample_services/tagging_cpu_bound.py [--requests N] [--fixed]

Stdlib and numpy only; binds nothing; starts no process.
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import time

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # small products: BLAS threads only spin

import numpy as np  # noqa: E402

import probe  # noqa: E402

SIDE = 24  # image side in pixels
TAGS = [f"tag-{i}" for i in range(64)]
CLUSTERS = 4
ITERATIONS = 8


def make_images(n: int, seed: int = 7) -> list[bytes]:
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        base = rng.integers(0, 256, size=(1, 1, 3))
        noise = rng.integers(-40, 40, size=(SIDE, SIDE, 3))
        out.append(np.clip(base + noise, 0, 255).astype(np.uint8).tobytes())
    return out


@probe.stage("decode")
def decode(raw: bytes) -> np.ndarray:
    return np.frombuffer(raw, dtype=np.uint8).reshape(SIDE, SIDE, 3)


@probe.stage("model")
def model(image: np.ndarray, weights: np.ndarray) -> list[str]:
    logits = (image.reshape(1, -1).astype(np.float32) / 255.0) @ weights
    probs = np.exp(logits - logits.max())
    probs /= probs.sum()
    return [TAGS[i] for i in np.argsort(probs[0])[-5:][::-1]]


@probe.stage("postprocess")
def dominant_colours_python(image: np.ndarray) -> list[tuple[int, int, int]]:
    """k-means on the pixels, in Python loops (the bottleneck)."""
    pixels = [tuple(int(c) for c in px) for px in image.reshape(-1, 3)]
    rnd = random.Random(0)
    centres = [list(p) for p in rnd.sample(pixels, CLUSTERS)]
    for _ in range(ITERATIONS):
        sums = [[0, 0, 0, 0] for _ in range(CLUSTERS)]
        for r, g, b in pixels:
            best, best_d = 0, float("inf")
            for k, (cr, cg, cb) in enumerate(centres):
                d = (r - cr) ** 2 + (g - cg) ** 2 + (b - cb) ** 2
                if d < best_d:
                    best, best_d = k, d
            s = sums[best]
            s[0] += r
            s[1] += g
            s[2] += b
            s[3] += 1
        centres = [
            [s[0] / s[3], s[1] / s[3], s[2] / s[3]] if s[3] else c
            for s, c in zip(sums, centres, strict=True)
        ]
    return [(int(r), int(g), int(b)) for r, g, b in centres]


@probe.stage("postprocess")
def dominant_colours_numpy(image: np.ndarray) -> list[tuple[int, int, int]]:
    """The same k-means, vectorised."""
    pixels = image.reshape(-1, 3).astype(np.float64)
    rnd = random.Random(0)
    centres = pixels[rnd.sample(range(len(pixels)), CLUSTERS)].copy()
    for _ in range(ITERATIONS):
        d = ((pixels[:, None, :] - centres[None, :, :]) ** 2).sum(axis=2)
        nearest = d.argmin(axis=1)
        for k in range(CLUSTERS):
            members = pixels[nearest == k]
            if len(members):
                centres[k] = members.mean(axis=0)
    return [tuple(int(v) for v in c) for c in centres]


def serve(images: list[bytes], weights: np.ndarray, fixed: bool) -> int:
    postprocess = dominant_colours_numpy if fixed else dominant_colours_python
    done = 0
    for i, raw in enumerate(images):
        with probe.request(id=f"img-{i}"):
            image = decode(raw)
            model(image, weights)
            postprocess(image)
        done += 1
    return done


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=900, help="images to tag")
    parser.add_argument("--fixed", action="store_true", help="vectorised post-process")
    args = parser.parse_args(argv)
    images = make_images(args.requests)
    weights = (
        np.random.default_rng(1).standard_normal((SIDE * SIDE * 3, len(TAGS))).astype(np.float32)
    )
    start = time.perf_counter()
    served = serve(images, weights, args.fixed)
    wall = time.perf_counter() - start
    print(f"tagged {served} images in {wall:.2f} s: {served / wall:.1f} images/s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
