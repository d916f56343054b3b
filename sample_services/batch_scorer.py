"""A scoring worker with a batchable numpy model stage: does batching pay, and how much?

Offline scoring of queued requests: each request is a record of 256 features, parsed
into a vector, scored by a small numpy MLP (256 -> 1024 -> 1024 -> 16) and turned back
into a label. At ``--batch 1`` every request multiplies a 1-row vector by each weight
matrix (reading ~5 MB of weights a request); at ``--batch B`` the matrices are read once
for B requests. Nothing here is decorated: it is what the batching advisor is held to.

    python batch_scorer.py --batch 1 --requests 2000
    probe batch-sweep batch_scorer:score --input batch_scorer:example_batch --against RUN

Measured plainly (one BLAS thread, 20,000 requests, 2 cores; tests/serving_corpus/
batching.truth.md): the job takes 2.45-2.77 s at batch 1 and 1.33-1.46 s at batch 128;
``score`` is ~74 us a call at batch 1, ~62% of the job.

Prints its own figure last: requests scored per second of the scoring loop (the wall
clock of the loop alone, imports and the model's set-up left out).
"""

from __future__ import annotations

import argparse
import time

import numpy as np

FEATURES = 256
HIDDEN = 1024
CLASSES = 16
_rng = np.random.default_rng(7)
W1 = (_rng.standard_normal((FEATURES, HIDDEN)) / 16).astype(np.float32)
W2 = (_rng.standard_normal((HIDDEN, HIDDEN)) / 32).astype(np.float32)
W3 = (_rng.standard_normal((HIDDEN, CLASSES)) / 32).astype(np.float32)
LABELS = [f"class-{i}" for i in range(CLASSES)]


def score(batch: np.ndarray) -> np.ndarray:
    """The model stage: a (B, 256) float32 batch -> (B, 16) logits."""
    h = np.maximum(batch @ W1, 0.0)
    h = np.maximum(h @ W2, 0.0)
    return h @ W3


def example_batch(size: int) -> np.ndarray:
    """A batch of ``size`` parsed requests, for ``probe batch-sweep --input``."""
    return np.random.default_rng(size).standard_normal((size, FEATURES)).astype(np.float32)


def make_requests(n: int) -> list[dict[str, object]]:
    rng = np.random.default_rng(11)
    values = rng.standard_normal((n, FEATURES)).round(4).tolist()
    return [{"id": i, "features": v} for i, v in enumerate(values)]


def parse(request: dict[str, object]) -> np.ndarray:
    return np.asarray(request["features"], dtype=np.float32)


def label(logits: np.ndarray) -> str:
    return LABELS[int(logits.argmax())]


def serve(requests: list[dict[str, object]], batch_size: int) -> list[str]:
    answers: list[str] = []
    for start in range(0, len(requests), batch_size):
        chunk = requests[start : start + batch_size]
        inputs = np.stack([parse(r) for r in chunk])
        answers.extend(label(row) for row in score(inputs))
    return answers


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=1, help="requests scored per model call")
    parser.add_argument("--requests", type=int, default=2000, help="requests to score")
    args = parser.parse_args()
    requests = make_requests(args.requests)
    started = time.perf_counter()
    answers = serve(requests, args.batch)
    elapsed = time.perf_counter() - started
    print(f"scored {len(answers)} requests at batch {args.batch}: {len(answers) / elapsed:.1f}/s")


if __name__ == "__main__":
    main()
