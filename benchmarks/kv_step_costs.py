"""What one decoding step of ``tests/torch_corpus/decoder.py`` costs unprofiled, with and
without a KV cache, by the length of the sequence: the truth the KV-cache estimate's step
model (``analyzers.ops``: a step costs ``a + b*T`` without a cache, ``a + b`` with one) is
to be held to.

Each generation runs the prompt, then its tokens twice from the same prompt: once
re-running the whole sequence (``T`` = prompt + tokens so far), once on the new token
against the cache; ``time.perf_counter_ns()`` around each model call, no profiler, no
probe. Prints the fit ``a + b*T`` over the steps without a cache (each T's median over the
generations), the whole sequence re-run at lengths shorter than the prompt (where the
fit's line would put a one-token step), and the cached steps' medians beside the model's
``a + b``.

    python benchmarks/kv_step_costs.py [--generations 120]

Needs torch (``pip install '.[torch]'``).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "torch_corpus"))


def step_times(generations: int) -> tuple[dict[int, list[int]], dict[int, list[int]]]:
    """By T: each step's ns without a cache, and with one (T: the sequence's length).
    Without one, T also runs from 1 to the prompt's length: the prompt's first tokens
    re-run alone, the cost of a whole-sequence step shorter than any generation has."""
    import decoder
    import torch

    model = decoder.built()
    prompt_len = decoder.PROMPT
    whole: dict[int, list[int]] = {}
    cached: dict[int, list[int]] = {}
    with torch.inference_mode():
        for _ in range(generations):
            prompt = torch.randint(0, decoder.VOCAB, (1, prompt_len))
            for t in range(1, prompt_len):
                t0 = time.perf_counter_ns()
                model(prompt[:, :t], 0, None)
                whole.setdefault(t, []).append(time.perf_counter_ns() - t0)
            ids, (logits, _) = prompt, model(prompt, 0, None)
            for _ in range(decoder.TOKENS - 1):
                ids = torch.cat([ids, logits.argmax(dim=-1, keepdim=True)], dim=1)
                t0 = time.perf_counter_ns()
                logits, _ = model(ids, 0, None)
                whole.setdefault(ids.shape[1], []).append(time.perf_counter_ns() - t0)
            logits, caches = model(prompt, 0, None)
            for step in range(decoder.TOKENS - 1):
                token = logits.argmax(dim=-1, keepdim=True)
                t0 = time.perf_counter_ns()
                logits, caches = model(token, prompt_len + step, caches)
                cached.setdefault(prompt_len + step + 1, []).append(time.perf_counter_ns() - t0)
    return whole, cached


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--generations", type=int, default=120)
    args = p.parse_args()
    whole, cached = step_times(args.generations)
    prompt_len = min(cached) - 1  # the first cached step's T is the prompt's length + 1
    lengths = np.array([t for t in sorted(whole) if t > prompt_len])  # a generation's steps
    us = np.array([statistics.median(whole[t]) for t in lengths]) / 1e3
    b, a = np.polyfit(lengths, us, 1)
    print(f"without a cache: a = {a:.0f} us, b = {b:.2f} us a token of prefix "
          f"(T {lengths[0]}-{lengths[-1]}: {us[0]:.0f}-{us[-1]:.0f} us a step)")  # fmt: skip
    short = {t: statistics.median(whole[t]) / 1e3 for t in (1, 2, 4, 8, 12, prompt_len - 1)}
    print("  the whole sequence re-run shorter than the prompt, us a step: "
          + ", ".join(f"T {t}: {v:.0f}" for t, v in short.items()))  # fmt: skip
    at = sorted(cached)
    steps = [statistics.median(cached[t]) / 1e3 for t in at]
    middle = statistics.median(steps)
    print(f"with a cache: {steps[0]:.0f} us a step at T {at[0]}, {steps[-1]:.0f} at T {at[-1]} "
          f"(median {middle:.0f}); the model's a + b: {a + b:.0f} us")  # fmt: skip


if __name__ == "__main__":
    main()
