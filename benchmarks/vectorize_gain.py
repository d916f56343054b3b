"""What vectorising a per-request Python loop with numpy buys: the source of
``Model.vectorize`` (the ``vectorize_python`` fix's local speedup).

Eight loops of the kind an inference service runs around its model, each at a size one
request brings (hundreds to a few thousand elements), written as a Python loop over
lists and as whole-array numpy. They were written before any was timed, and none is the
tagging sample's k-means (the one case the constant was first read from), so the median
here is a figure the samples did not shape. Each pair is timed in this process,
interleaved, best of ``--repeat`` (timeit's advice: the least disturbed figure), and the
loop's time over numpy's is its local speedup.

    python benchmarks/vectorize_gain.py [--repeat 7]
"""

from __future__ import annotations

import argparse
import math
import random
import statistics
import timeit
from collections.abc import Callable
from typing import Any

import numpy as np

rng = random.Random(11)


def _floats(n: int) -> list[float]:
    return [rng.gauss(0.0, 1.0) for _ in range(n)]


# -- 1. L2-normalise an embedding (768 floats) ---------------------------------------------
EMB = _floats(768)
EMB_A = np.array(EMB)


def normalise_py(v: list[float]) -> list[float]:
    norm = math.sqrt(sum(x * x for x in v))
    return [x / norm for x in v]


def normalise_np(v: np.ndarray) -> np.ndarray:
    return v / np.linalg.norm(v)


# -- 2. cosine similarity of a query against 64 candidates (256-d), top 5 -----------------
QUERY = _floats(256)
CANDS = [_floats(256) for _ in range(64)]
QUERY_A, CANDS_A = np.array(QUERY), np.array(CANDS)


def rank_py(q: list[float], cands: list[list[float]]) -> list[int]:
    qn = math.sqrt(sum(x * x for x in q))
    scores = []
    for c in cands:
        dot = sum(a * b for a, b in zip(q, c, strict=True))
        scores.append(dot / (qn * math.sqrt(sum(x * x for x in c))))
    return sorted(range(len(scores)), key=scores.__getitem__, reverse=True)[:5]


def rank_np(q: np.ndarray, cands: np.ndarray) -> np.ndarray:
    scores = cands @ q / (np.linalg.norm(cands, axis=1) * np.linalg.norm(q))
    return np.argsort(scores)[::-1][:5]


# -- 3. softmax over 1,000 logits, top 5 ---------------------------------------------------
LOGITS = _floats(1000)
LOGITS_A = np.array(LOGITS)


def softmax_top_py(z: list[float]) -> list[int]:
    m = max(z)
    e = [math.exp(x - m) for x in z]
    total = sum(e)
    p = [x / total for x in e]
    return sorted(range(len(p)), key=p.__getitem__, reverse=True)[:5]


def softmax_top_np(z: np.ndarray) -> np.ndarray:
    e = np.exp(z - z.max())
    p = e / e.sum()
    return np.argsort(p)[::-1][:5]


# -- 4. colour histogram of a 32 x 32 RGB image, 16 bins a channel -------------------------
PIXELS = [[rng.randrange(256) for _ in range(3)] for _ in range(32 * 32)]
PIXELS_A = np.array(PIXELS, dtype=np.uint8)


def histogram_py(pixels: list[list[int]]) -> list[list[int]]:
    bins = [[0] * 16 for _ in range(3)]
    for px in pixels:
        for ch in range(3):
            bins[ch][px[ch] >> 4] += 1
    return bins


def histogram_np(pixels: np.ndarray) -> np.ndarray:
    return np.stack([np.bincount(pixels[:, ch] >> 4, minlength=16) for ch in range(3)])


# -- 5. IoU of 100 detection boxes, pairwise (non-max suppression's inner step) ------------
def _box() -> list[float]:
    x, y = rng.uniform(0, 600), rng.uniform(0, 400)
    return [x, y, x + rng.uniform(10, 80), y + rng.uniform(10, 80)]


BOXES = [_box() for _ in range(100)]
BOXES_A = np.array(BOXES)


def iou_py(boxes: list[list[float]]) -> list[list[float]]:
    out = []
    for a in boxes:
        row = []
        area_a = (a[2] - a[0]) * (a[3] - a[1])
        for b in boxes:
            w = min(a[2], b[2]) - max(a[0], b[0])
            h = min(a[3], b[3]) - max(a[1], b[1])
            inter = w * h if w > 0 and h > 0 else 0.0
            row.append(inter / (area_a + (b[2] - b[0]) * (b[3] - b[1]) - inter))
        out.append(row)
    return out


def iou_np(b: np.ndarray) -> np.ndarray:
    w = np.clip(
        np.minimum(b[:, None, 2], b[None, :, 2]) - np.maximum(b[:, None, 0], b[None, :, 0]), 0, None
    )
    h = np.clip(
        np.minimum(b[:, None, 3], b[None, :, 3]) - np.maximum(b[:, None, 1], b[None, :, 1]), 0, None
    )
    inter = w * h
    area = (b[:, 2] - b[:, 0]) * (b[:, 3] - b[:, 1])
    return inter / (area[:, None] + area[None, :] - inter)


# -- 6. moving average of a 2,000-sample signal, window 16 ---------------------------------
SIGNAL = _floats(2000)
SIGNAL_A = np.array(SIGNAL)


def smooth_py(x: list[float]) -> list[float]:
    out, acc = [], sum(x[:16])
    out.append(acc / 16)
    for i in range(16, len(x)):
        acc += x[i] - x[i - 16]
        out.append(acc / 16)
    return out


def smooth_np(x: np.ndarray) -> np.ndarray:
    c = np.cumsum(np.concatenate(([0.0], x)))
    return (c[16:] - c[:-16]) / 16


# -- 7. bag of words: 512 token ids counted into a 5,000-word vocabulary, tf-idf weighted --
TOKENS = [rng.randrange(5000) for _ in range(512)]
IDF = [rng.uniform(0.5, 5.0) for _ in range(5000)]
TOKENS_A, IDF_A = np.array(TOKENS), np.array(IDF)


def tfidf_py(tokens: list[int], idf: list[float]) -> dict[int, float]:
    counts: dict[int, int] = {}
    for t in tokens:
        counts[t] = counts.get(t, 0) + 1
    return {t: c / len(tokens) * idf[t] for t, c in counts.items()}


def tfidf_np(tokens: np.ndarray, idf: np.ndarray) -> np.ndarray:
    return np.bincount(tokens, minlength=len(idf)) / len(tokens) * idf


# -- 8. anchor boxes decoded with their regression deltas (300 anchors) --------------------
ANCHORS = [_box() for _ in range(300)]
DELTAS = [[rng.gauss(0, 0.1) for _ in range(4)] for _ in range(300)]
ANCHORS_A, DELTAS_A = np.array(ANCHORS), np.array(DELTAS)


def decode_py(anchors: list[list[float]], deltas: list[list[float]]) -> list[list[float]]:
    out = []
    for (x0, y0, x1, y1), (dx, dy, dw, dh) in zip(anchors, deltas, strict=True):
        w, h = x1 - x0, y1 - y0
        cx, cy = x0 + 0.5 * w + dx * w, y0 + 0.5 * h + dy * h
        w, h = w * math.exp(dw), h * math.exp(dh)
        out.append([cx - 0.5 * w, cy - 0.5 * h, cx + 0.5 * w, cy + 0.5 * h])
    return out


def decode_np(a: np.ndarray, d: np.ndarray) -> np.ndarray:
    w, h = a[:, 2] - a[:, 0], a[:, 3] - a[:, 1]
    cx, cy = a[:, 0] + 0.5 * w + d[:, 0] * w, a[:, 1] + 0.5 * h + d[:, 1] * h
    w, h = w * np.exp(d[:, 2]), h * np.exp(d[:, 3])
    return np.stack([cx - 0.5 * w, cy - 0.5 * h, cx + 0.5 * w, cy + 0.5 * h], axis=1)


CASES: dict[str, tuple[Callable[[], Any], Callable[[], Any]]] = {
    "normalise 768": (lambda: normalise_py(EMB), lambda: normalise_np(EMB_A)),
    "cosine top-5 of 64 x 256": (lambda: rank_py(QUERY, CANDS), lambda: rank_np(QUERY_A, CANDS_A)),
    "softmax top-5 of 1000": (lambda: softmax_top_py(LOGITS), lambda: softmax_top_np(LOGITS_A)),
    "histogram 32x32 RGB": (lambda: histogram_py(PIXELS), lambda: histogram_np(PIXELS_A)),
    "pairwise IoU 100 boxes": (lambda: iou_py(BOXES), lambda: iou_np(BOXES_A)),
    "moving average 2000": (lambda: smooth_py(SIGNAL), lambda: smooth_np(SIGNAL_A)),
    "tf-idf 512 tokens": (lambda: tfidf_py(TOKENS, IDF), lambda: tfidf_np(TOKENS_A, IDF_A)),
    "box decode 300": (lambda: decode_py(ANCHORS, DELTAS), lambda: decode_np(ANCHORS_A, DELTAS_A)),
}


def best_s(fn: Callable[[], Any], repeat: int) -> float:
    timer = timeit.Timer(fn)
    number, _ = timer.autorange()
    return min(timer.repeat(repeat=repeat, number=number)) / number


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=7, help="timings of each side")
    args = parser.parse_args()
    gains = []
    for name, (loop, vectorised) in CASES.items():
        py, vec = best_s(loop, args.repeat), best_s(vectorised, args.repeat)
        gains.append(py / vec)
        print(f"{name:28s} loop {py * 1e6:9.1f} us  numpy {vec * 1e6:8.1f} us  {py / vec:6.1f}x")
    print(f"\nmedian {statistics.median(gains):.1f}x (range {min(gains):.1f}-{max(gains):.1f}x)")


if __name__ == "__main__":
    main()
