"""Attention computed op by op, found in a trace's ops by its shapes, with the GPU time of
the kernels it launched and the work it does.

Written out by hand (``softmax(q @ k.transpose(-2, -1) / scale) @ v``), attention runs as a
score product, a scaling, a softmax and a second product, each a kernel or more, plus the
copies that make the transposed operands contiguous; a fused kernel (SDPA's flash or
memory-efficient ones, FlashAttention) does the same in one pass without writing the
T x T scores out. Only the softmax's kernels are told by their name, so the rest is found
by shape: an op whose first input ends in a square [..., T, T] block (the scores: their
scaling, masking, softmax, and the product of them with V), and a product of
[..., T, d] by [..., d, T] (the score product), with three or more dimensions -- a linear
layer's inputs are [batch, T, d], their last two not square. Every kernel launched inside
such an op (its copies included) counts. Kineto gives each kernel the ``External id`` of
the innermost op that launched it.

``unfused_attention(ops, kernels)`` -> the kernels' time, how many, the multiply-adds of
the two products (2*B*T*T*d FLOPs each), the products' input type, and the host's side:
the pattern's outermost ops (their count and CPU time) and how many attentions they make
(one a score product), or None where the trace has no shapes or no such pattern beside a
softmax.
"""

from __future__ import annotations

from dataclasses import dataclass
from math import prod

import numpy as np
import pandas as pd

from probe.analyzers.op_breakdown import input_shapes, op_parents

__all__ = ["UnfusedAttention", "unfused_attention"]

_PRODUCTS = {"aten::matmul", "aten::bmm", "aten::baddbmm"}
_SOFTMAX = {"aten::softmax", "aten::_softmax", "aten::_safe_softmax"}


@dataclass(frozen=True)
class UnfusedAttention:
    kernel_ns: float
    kernels: int
    flops: float  # of the two products, in the traced window
    dtype: str  # the products' first input type, as Kineto writes it ("c10::BFloat16")
    # the host's side: the pattern's outermost ops (each a dispatch and its launches),
    # their CPU time, and the attentions they compute (one a score product)
    host_ops: int = 0
    host_ns: float = 0.0
    instances: int = 0


def _scores_in(dims: list[tuple[int, ...]]) -> bool:
    """The first input ends in a square block: [..., T, T]."""
    return bool(dims) and len(dims[0]) >= 3 and dims[0][-1] == dims[0][-2] > 1


def _score_product(dims: list[tuple[int, ...]]) -> bool:
    """[..., T, d] @ [..., d, T]: the product that makes the scores."""
    if len(dims) < 2 or len(dims[0]) < 3 or len(dims[1]) < 3:
        return False
    a, b = dims[0], dims[1]
    return a[-1] == b[-2] and a[-2] == b[-1] > 1 and a[-2] != a[-1]


def _product_flops(dims: list[tuple[int, ...]]) -> float:
    """2 * (batch) * m * k * n of [..., m, k] @ [..., k, n]."""
    a, b = dims[0], dims[1]
    return 2.0 * prod(a[:-2]) * a[-2] * a[-1] * b[-1]


def unfused_attention(ops: pd.DataFrame, kernels: pd.DataFrame) -> UnfusedAttention | None:
    if ops.empty or kernels.empty or "input_dims" not in ops or "external_id" not in kernels:
        return None
    # a thread's ops by start, the enclosing one first (as op_breakdown orders them)
    frame = ops.sort_values(["tid", "ts_ns", "dur_ns"], ascending=[True, True, False])
    frame = frame.reset_index(drop=True)
    names = frame["name"].astype(str)
    if not names.isin(_SOFTMAX).any():
        return None  # no softmax at all: no shapes to read
    # a model repeats a few hundred shapes thousands of times: each text parsed once
    text = frame["input_dims"].astype(str)
    parsed = {t: input_shapes(t) for t in text.unique()}
    dims = [parsed[t] for t in text]
    product = names.isin(_PRODUCTS).to_numpy()
    score_product = product & np.array([_score_product(d) for d in dims])
    # the sequence lengths the score products make: an op on a square block of another
    # size (a CNN's square feature maps) is not the scores
    lengths = {dims[i][0][-2] for i in np.flatnonzero(score_product)}
    scores = np.array([_scores_in(d) and d[0][-1] in lengths for d in dims])
    attention = scores | score_product
    if not (attention & names.isin(_SOFTMAX).to_numpy()).any():
        return None  # no softmax over scores: not attention
    parent = op_parents(frame)
    inside = _inside(attention, parent)
    marked = attention | inside  # every op inside one of the pattern's is the pattern's
    # the products' own work, counted once: a matmul's bmm is the same product
    outer_product = (score_product | (product & scores)) & ~inside  # QK^T, then (.)V
    flops = sum(_product_flops(dims[i]) for i in np.flatnonzero(outer_product))
    ids = set(frame.loc[marked, "external_id"].dropna())
    mine = kernels[kernels["external_id"].isin(ids)]
    if mine.empty or flops <= 0:
        return None
    types = frame.loc[outer_product, "input_types"].astype(str)
    first = types.str.extract(r'^\["([^"]*)"', expand=False).dropna()
    outermost = attention & ~inside
    return UnfusedAttention(
        kernel_ns=float(mine["dur_ns"].sum()),
        kernels=len(mine),
        flops=flops,
        dtype=str(first.mode().iat[0]) if len(first) else "",
        host_ops=int(outermost.sum()),
        host_ns=float(frame.loc[outermost, "dur_ns"].sum()),
        instances=int((score_product & ~inside).sum()),
    )


def _inside(marked: np.ndarray, parent: np.ndarray) -> np.ndarray:
    """True where some enclosing op is marked."""
    inside = np.zeros(len(marked), dtype=bool)
    ancestor = parent.copy()
    while (alive := ancestor >= 0).any():
        at = np.flatnonzero(alive)
        inside[at[marked[ancestor[at]]]] = True
        ancestor[at] = parent[ancestor[at]]
    return inside
