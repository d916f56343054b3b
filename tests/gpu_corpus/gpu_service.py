"""A GPU inference service loop in three stages, for ``probe run`` on a GPU: preprocess
(Python tokenising text on the CPU, ids copied to the GPU), infer (the corpus' encoder
in BF16 with SDPA, batch 8 x 256 tokens: launched, not waited for), postprocess (softmax
and the classes to Python: the sync that waits for infer's kernels). Each loop is one
``probe.request``.

    python tests/gpu_corpus/gpu_service.py [--seconds 8] [--plain] [--timings]

The case it makes: under async CUDA, infer's wall time is its launches and
postprocess's is the wait for infer's kernels, so a stage table built from wall clocks
blames postprocess for the model. ``--timings`` prints the truth, measured by the
service itself: each stage's median host time (perf_counter) and infer's GPU time (CUDA
events recorded before its first launch and after its last). ``--plain`` runs the same
functions undecorated: the service as its authors would run it, no spans.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).parent))
from record import built  # noqa: E402  (the corpus' encoder, one definition)

import probe  # noqa: E402

ARGS = argparse.ArgumentParser(description=__doc__.splitlines()[0])
ARGS.add_argument("--seconds", type=float, default=8.0)
ARGS.add_argument("--plain", action="store_true", help="no probe stages or requests")
ARGS.add_argument("--timings", action="store_true", help="print each stage's median")
OPTIONS = ARGS.parse_args()
DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
BATCH, TOKENS = 8, 256
MODEL = built(DEVICE, torch.bfloat16, fused=True)
WORDS = [f"w{n}" for n in range(5000)]


def stage(fn):  # type: ignore[no-untyped-def]
    return fn if OPTIONS.plain else probe.stage(fn)


@stage
def preprocess(texts: list[str]) -> torch.Tensor:
    ids = [[hash(word) % 8192 for word in text.split()][:TOKENS] for text in texts]
    return torch.tensor(ids).to(DEVICE)


@stage
def infer(ids: torch.Tensor) -> torch.Tensor:
    with torch.inference_mode():
        return MODEL(ids)


@stage
def postprocess(logits: torch.Tensor) -> list[int]:
    return logits.float().softmax(-1).argmax(-1).tolist()


def request(texts: list[str], took: dict[str, list[float]] | None) -> list[int]:
    if took is None:
        return postprocess(infer(preprocess(texts)))
    t0 = time.perf_counter()
    ids = preprocess(texts)
    t1 = time.perf_counter()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    logits = infer(ids)
    end.record()
    t2 = time.perf_counter()
    out = postprocess(logits)
    t3 = time.perf_counter()
    took["preprocess"].append(t1 - t0)
    took["infer"].append(t2 - t1)
    took["postprocess"].append(t3 - t2)
    took["infer_gpu"].append(start.elapsed_time(end) / 1e3)
    return out


def main() -> None:
    rng = random.Random(0)
    texts = [" ".join(rng.choices(WORDS, k=TOKENS)) for _ in range(BATCH)]
    timings = OPTIONS.timings and DEVICE == "cuda"
    took: dict[str, list[float]] | None = None
    for _ in range(3):  # warm-up
        request(texts, None)
    if timings:
        took = {"preprocess": [], "infer": [], "postprocess": [], "infer_gpu": []}
    deadline, requests = time.monotonic() + OPTIONS.seconds, 0
    while time.monotonic() < deadline:
        if OPTIONS.plain:
            request(texts, took)
        else:
            with probe.request():
                request(texts, took)
        requests += 1
    out = {"requests": requests, "ms_a_request": round(OPTIONS.seconds / requests * 1e3, 3)}
    if took is not None:
        out |= {f"{k}_ms": round(statistics.median(v) * 1e3, 3) for k, v in took.items()}
    print(json.dumps(out))


if __name__ == "__main__":
    main()
