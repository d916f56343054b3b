"""A decoder re-running its layers on a growing prefix (no KV cache), found from the ops'
shapes (``analyzers.ops.growing_prefix``), on op sequences declared here: the step times
follow a + b*T by construction, so the cache's estimate is known exactly."""

from __future__ import annotations

import json
import random
import statistics

import pandas as pd
import pytest

from probe.analyzers.ops import growing_prefix

A, B = 200_000, 30_000  # ns a step, ns a token of prefix


def decoder(
    prompts: list[int],
    tokens: int,
    *,
    cached: bool,
    layers: int = 4,
    tail_ns: int = 0,
    jitter: float = 0.0,
    seed: int = 0,
) -> pd.DataFrame:
    """One request a prompt: ``tokens`` steps, each ``layers`` linear layers over the
    sequence so far (or, cached, over the new token once the prompt is in), then
    ``tail_ns`` of the step's time after its last layer (the head, the sampling); each
    step's time off by up to ``jitter`` of it either way (a window's steps: +-20%)."""
    rng = random.Random(seed)
    rows, t = [], 0
    for prompt in prompts:
        for step in range(tokens):
            length = prompt + step
            seen = length if (step == 0 or not cached) else 1
            step_ns = int((A + B * seen) * (1 + jitter * rng.uniform(-1, 1)))
            layer_ns = (step_ns - tail_ns) // layers
            rows.extend(
                {"name": "aten::linear", "tid": 1, "ts_ns": t + layer * layer_ns,
                 "dur_ns": layer_ns - 10,
                 "input_dims": json.dumps([[1, seen, 64], [64, 64], [64]])}
                for layer in range(layers)
            )  # fmt: skip
            t += step_ns
        t += 5_000_000  # between requests
    return pd.DataFrame(rows)


def test_layers_rerun_on_a_prefix_growing_a_token_a_step_are_found_with_the_cache_s_gain():
    found = growing_prefix(decoder([8, 8], 12, cached=False))
    assert found is not None
    assert (found.op, found.shape, found.first_length) == ("aten::linear", "[1,T,64]", 8)
    assert found.runs == 2 and found.steps == 24
    assert found.per_token_ns == pytest.approx(B, rel=0.01)
    assert found.per_step_ns == pytest.approx(A, rel=0.05)
    lengths = [8 + k for k in range(12)]
    without = sum(A + B * n for n in lengths)
    with_cache = (A + B * 8) + 11 * (A + B)
    assert found.speedup == pytest.approx(without / with_cache, rel=0.02)


def test_a_generation_s_last_step_read_short_does_not_flatten_the_growth_per_token():
    # the last step of a generation is timed to its last layer's end, not to a next
    # step's start: with work after the layers (150 us here) it reads short, at the
    # generation's longest prefix; among steps off by up to 20% (a window's), it pulled
    # the estimate 10% under at the median of 20 windows
    lengths = range(16, 40)
    truth = sum(A + B * n for n in lengths) / ((A + B * 16) + 23 * (A + B))
    ratios = []
    for seed in range(20):
        ops = decoder([16] * 4, 24, cached=False, tail_ns=150_000, jitter=0.2, seed=seed)
        found = growing_prefix(ops)
        assert found is not None and found.steps == 96
        ratios.append(found.speedup / truth)
    assert statistics.median(ratios) == pytest.approx(1.0, abs=0.03)


def test_a_cached_decoder_and_unrelated_shapes_show_no_growing_prefix():
    assert growing_prefix(decoder([8, 8], 12, cached=True)) is None
    varied = decoder([8], 12, cached=False).sample(frac=1.0, random_state=3)
    varied["ts_ns"] = range(len(varied))  # the same shapes, in no order
    assert growing_prefix(varied) is None
    assert growing_prefix(decoder([8], 3, cached=False)) is None  # too few steps to tell
