"""Attention computed op by op, found by its shapes (``analyzers.attention``): the ops
and kernels of ``softmax(q @ k.transpose(-2, -1) / scale) @ v`` declared here as Kineto
writes them (a BF16 encoder's on an H200, tests/gpu_corpus: batch 32, 12 heads, 256
tokens, head size 64)."""

from __future__ import annotations

import pandas as pd
import pytest

from probe.analyzers.attention import unfused_attention

BF16 = '["c10::BFloat16","c10::BFloat16"]'
OPS = [  # (name, start, duration, input dims): one thread, nested by time
    ("aten::linear", 0, 100, "[[32,256,768],[2304,768],[2304]]"),
    ("aten::addmm", 1, 98, "[[2304],[8192,768],[768,2304]]"),
    ("aten::matmul", 200, 100, "[[32,12,256,64],[32,12,64,256]]"),  # the scores
    ("aten::clone", 201, 20, "[[32,12,64,256],[]]"),
    ("aten::copy_", 202, 18, "[[32,12,64,256],[32,12,64,256],[]]"),
    ("aten::bmm", 230, 60, "[[384,256,64],[384,64,256]]"),
    ("aten::div", 400, 20, "[[32,12,256,256],[]]"),  # the scaling
    ("aten::softmax", 500, 30, "[[32,12,256,256],[],[]]"),
    ("aten::_softmax", 501, 28, "[[32,12,256,256],[],[]]"),
    ("aten::matmul", 600, 100, "[[32,12,256,256],[32,12,256,64]]"),  # scores @ v
    ("aten::bmm", 610, 80, "[[384,256,256],[384,256,64]]"),
    ("aten::add", 800, 10, "[[32,256,768],[32,256,768],[]]"),  # a residual: not it
]
# the innermost op that launched each kernel (its index above), and the kernel's time
KERNELS = [(1, 5000), (4, 300), (5, 700), (6, 200), (8, 400), (10, 600), (11, 100)]


def tables(ops=OPS, kernels=KERNELS) -> tuple[pd.DataFrame, pd.DataFrame]:
    o = pd.DataFrame(
        {"name": [r[0] for r in ops], "ts_ns": [r[1] for r in ops],
         "dur_ns": [r[2] for r in ops], "input_dims": [r[3] for r in ops],
         "tid": 1, "external_id": range(len(ops)), "input_types": BF16}
    )  # fmt: skip
    k = pd.DataFrame({"external_id": [e for e, _ in kernels], "dur_ns": [d for _, d in kernels]})
    return o, k


def test_the_products_scaling_softmax_and_copies_of_attention_are_its_kernels():
    found = unfused_attention(*tables())
    assert found is not None
    # the copy under the scores' matmul, both products, the scaling, the softmax
    assert found.kernels == 5 and found.kernel_ns == 300 + 700 + 200 + 400 + 600
    # two products of 2 * 384 * 256 * 256 * 64 FLOPs each, counted once (not their bmm)
    assert found.flops == pytest.approx(2 * 2 * 384 * 256 * 256 * 64)
    assert found.dtype == "c10::BFloat16"


def test_without_a_softmax_over_scores_there_is_no_attention():
    ops = [r for r in OPS if "softmax" not in r[0]]
    assert unfused_attention(*tables(ops)) is None
    # a classifier's softmax over [batch, classes]: not scores
    classifier = [*ops, ("aten::softmax", 900, 10, "[[32,16],[],[]]")]
    assert unfused_attention(*tables(classifier)) is None


def test_a_trace_without_shapes_says_nothing():
    ops, kernels = tables()
    assert unfused_attention(ops.assign(input_dims=None), kernels) is None
