"""GPU kernels by family and precision, read from their names.

A trace records what a kernel computed only in its name, and the vendors' libraries
encode both the operation and the data types there. The rules below are a table (one
entry a pattern, with where the naming comes from); the first entry that matches wins,
so the specific come before the general. What no rule reads is ``other`` / ``unknown``:
the breakdown says how much time that is rather than guessing.

Families: ``gemm`` (cuBLAS/cuBLASLt/CUTLASS matrix multiplies), ``conv`` (cuDNN
convolutions), ``attention`` (fused attention: flash, memory-efficient, cuDNN SDPA),
``softmax``, ``norm``, ``elementwise``, ``reduction``, ``copy`` (copies, concatenation,
transposes done by kernels), ``index`` (gather, scatter, embedding), ``collective``
(NCCL/RCCL), ``pooling``, ``sort``; and ``fused`` when a compiler generated it (Triton,
from ``torch.compile``). Precision: ``fp64``, ``fp32``, ``tf32``, ``bf16``, ``fp16``,
``fp8``, ``fp4``, ``int8``, or ``unknown`` -- the narrowest type the name carries (a
GEMM of FP8 activations and FP4 weights is ``fp4``).

Names do not always say it. cuBLAS's Hopper/Blackwell ``nvjet_*`` kernels encode their
types in letters this module does not claim to read, and cuDNN's fused attention is named
``..._wgmma_f16_...`` for BF16 inputs too (a BF16 encoder on an H200, torch 2.11:
``tests/gpu_corpus``, where every GEMM read ``unknown`` and the attention ``fp16``). Given
the trace's ops, a kernel's precision is then read from the op that launched it (Kineto
gives the kernel that op's ``External id``): a 16- or 8-bit float input is unambiguous
and wins over the name; an FP32 input is not (cuBLAS runs it in FP32 or TF32, by
``torch.backends.cuda.matmul.allow_tf32``), so there the name's reading stands.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
import pandas as pd

__all__ = ["FAMILIES", "PRECISIONS", "classify_kernels", "kernel_breakdown"]


@dataclass(frozen=True)
class NameRule:
    pattern: re.Pattern[str]
    value: str
    source: str


def _rule(pattern: str, value: str, source: str) -> NameRule:
    return NameRule(re.compile(pattern, re.IGNORECASE), value, source)


_CUBLAS = (
    "cuBLAS/cuBLASLt kernel names: <arch>_<type>gemm_<tile>_<layout> (volta_sgemm_128x64_nn, "
    "ampere_tf32_s1688gemm_tf32_..., sm80_xmma_gemm_bf16bf16_bf16f32_f32_tn_...), as Nsight "
    "Systems lists them; 'gemv'/'gemmSN'/'splitK' kernels are cuBLAS's too"
)
_CUTLASS = "CUTLASS's generated kernel names: cutlass_<sm>_<op class>_<type>_<mma>gemm_..."
_CUDNN = (
    "cuDNN's convolution kernels: implicit/explicit GEMM (implicit_convolve_sgemm, "
    "xmma_fprop_implicit_gemm_*), scudnn_*, winograd, fft; fprop/dgrad/wgrad"
)
_ATEN = (
    "PyTorch's CUDA kernels keep their C++ template names: at::native::"
    "vectorized_elementwise_kernel<..., float>, reduce_kernel, softmax_warp_forward, "
    "layer_norm_kernel, CatArrayBatchedCopy, indexSelectLargeIndex"
)
_FLASH = (
    "FlashAttention (flash_fwd_kernel, flash_fwd_splitkv_kernel; PyTorch's pytorch_flash::), "
    "xFormers/PyTorch memory-efficient attention (fmha_cutlassF_*, AttentionKernel), "
    "cuDNN's fused SDPA (cudnn_generated_fort_native_sdpa)"
)
_NCCL = "NCCL/RCCL kernels: ncclKernel_<collective>_<algo>_<proto>_<op>_<type>, ncclDevKernel_*"
_TRITON = (
    "Inductor (torch.compile) names its Triton kernels triton_<kind>_fused_<ops>: "
    "poi (pointwise), red/per (reductions), tem (templates: GEMMs)"
)

# first match wins: the specific before the general
FAMILY_RULES: tuple[NameRule, ...] = (
    _rule(r"nccl|rccl|all_?reduce|all_?gather|reduce_?scatter|all_?to_?all", "collective",
          f"{_NCCL}; custom all-reduce kernels (multimem_all_reduce_kernel) by the same names"),
    _rule(r"flash_fwd|flash_bwd|fmha|AttentionKernel|_sdpa|flash::|attention", "attention",
          _FLASH),
    _rule(r"^triton_tem_|^triton_.*_mm\b", "gemm", _TRITON),
    _rule(r"^triton_", "fused", _TRITON),
    _rule(r"fprop|dgrad|wgrad|conv(?!ert)|scudnn|winograd|implicit_gemm|implicit_convolve",
          "conv", _CUDNN),
    _rule(r"gemm|gemv|nvjet|cutlass.*(tensorop|simt|wmma)|\bmatmul|splitKreduce|^bmm_",
          "gemm", f"{_CUBLAS}; {_CUTLASS}; bmm_<types>_<tile>: batched GEMMs (TensorRT-LLM's)"),
    _rule(r"softmax", "softmax", _ATEN),
    _rule(r"norm|RowwiseMoments|bn_fw|bn_bw|welford", "norm", _ATEN),
    _rule(r"CatArray|copy_kernel|copy_device|transpose|permute|memcpy|nchwToNhwc|nhwcToNchw",
          "copy", f"{_ATEN}; cuDNN's layout transforms (nchwToNhwcKernel)"),
    _rule(r"index|gather|scatter|embedding|take_along", "index", _ATEN),
    _rule(r"pool", "pooling", _ATEN),
    _rule(r"sort|topk|radix", "sort", _ATEN),
    _rule(r"reduce|reduction|sum_kernel|mean_kernel|argmax|argmin", "reduction", _ATEN),
    _rule(r"elementwise|pointwise|unrolled|vectorized|Functor|activation|gelu|silu|relu|"
          r"dropout|scalePackedTensor", "elementwise", _ATEN),
)  # fmt: skip

# first match wins: narrower types first (bf16 before f16, tf32 before f32)
PRECISION_RULES: tuple[NameRule, ...] = (
    _rule(r"e2m1|fp4", "fp4", f"{_CUBLAS}; OCP microscaling formats (MXFP4: E2M1 elements)"),
    _rule(r"e4m3|e5m2|fp8|f8f8", "fp8", f"{_CUBLAS}; {_CUTLASS}"),
    _rule(r"int8|i8i8|imma|s8s8", "int8", f"{_CUBLAS}; {_CUTLASS}"),
    _rule(r"bf16|bfloat16", "bf16", f"{_CUBLAS}; {_ATEN} (c10::BFloat16)"),
    _rule(r"tf32", "tf32", f"{_CUBLAS}; {_CUDNN}"),
    _rule(r"fp16|f16f16|c10::Half|__half|\bhalf\b|h884|h1688|h16816|hgemm|_f16_|fp16_s",
          "fp16", f"{_CUBLAS} (h884/h1688: HMMA tensor-core shapes); {_ATEN} (c10::Half)"),
    _rule(r"tensorop_s(1688|16816)", "tf32",
          f"{_CUTLASS}: s1688/s16816 are FP32 operands on TF32 tensor-core shapes"),
    _rule(r"dgemm|double", "fp64", f"{_CUBLAS}; {_ATEN}"),
    _rule(r"sgemm|scudnn|<float\b|\bfloat\b|_float\b|f32f32_f32|_f32_", "fp32",
          f"{_CUBLAS} (s: single, SIMT); {_CUDNN}; {_ATEN}"),
)  # fmt: skip

FAMILIES = tuple(dict.fromkeys([r.value for r in FAMILY_RULES] + ["other"]))
PRECISIONS = ("fp64", "fp32", "tf32", "bf16", "fp16", "fp8", "fp4", "int8", "unknown")


def _first(rules: tuple[NameRule, ...], name: str, default: str) -> str:
    for rule in rules:
        if rule.pattern.search(name):
            return rule.value
    return default


# an op's input types (Kineto's "Input type") that fix the kernel's precision
_NARROW_FLOATS = {
    "c10::BFloat16": "bf16", "c10::Half": "fp16", "c10::Float8_e4m3fn": "fp8",
    "c10::Float8_e5m2": "fp8", "c10::Float8_e4m3fnuz": "fp8", "c10::Float8_e5m2fnuz": "fp8",
    "c10::Float4_e2m1fn_x2": "fp4",
}  # fmt: skip
_TYPE_NAMES = re.compile(r'"([^"]*)"')


def _launching_precision(kernels: pd.DataFrame, ops: pd.DataFrame) -> pd.Series:
    """By kernel row, the narrow float type its launching op takes (``_NARROW_FLOATS``;
    the narrowest when several: an FP8 GEMM's scale inputs are FP32), or NaN."""
    if ops.empty or "external_id" not in kernels or "input_types" not in ops:
        return pd.Series(np.nan, index=kernels.index, dtype="object")
    launched = ops.dropna(subset=["external_id"]).drop_duplicates("external_id")
    order = list(PRECISIONS)

    def narrowest(types: object) -> object:
        found = [_NARROW_FLOATS[t] for t in _TYPE_NAMES.findall(str(types)) if t in _NARROW_FLOATS]
        return max(found, key=order.index) if found else np.nan

    by_id = pd.Series(
        [narrowest(t) for t in launched["input_types"]], index=launched["external_id"].to_numpy()
    ).dropna()
    return kernels["external_id"].map(by_id).astype("object")


def classify_kernels(kernels: pd.DataFrame, ops: pd.DataFrame | None = None) -> pd.DataFrame:
    """``kernels`` (a ``name`` column) with its ``family`` and ``precision``; each distinct
    name is read once (a trace repeats a few hundred names thousands of times). With the
    trace's ``ops``, a kernel launched by an op of BF16/FP16/FP8 inputs takes that
    precision (the module doc)."""
    names = pd.Series(kernels["name"].astype(str).unique())
    family = {n: _first(FAMILY_RULES, n, "other") for n in names}
    precision = {n: _first(PRECISION_RULES, n, "unknown") for n in names}
    out = kernels.copy()
    as_text = kernels["name"].astype(str)
    out["family"] = pd.Categorical(as_text.map(family), categories=FAMILIES)
    by_name = as_text.map(precision)
    if ops is not None:
        by_op = _launching_precision(kernels, ops)
        by_name = by_op.where(by_op.notna(), by_name)
    out["precision"] = pd.Categorical(by_name, categories=PRECISIONS)
    return out


def kernel_breakdown(kernels: pd.DataFrame, *, short_ns: int = 10_000) -> pd.DataFrame:
    """GPU time by family and precision: count, total and mean time, the share of all
    kernel time, and the share of kernels shorter than ``short_ns``: at a few
    microseconds the launch, not the kernel, sets the pace (NVIDIA's "Getting Started
    with CUDA Graphs", 2019: a 2.9-us kernel ran at 3.8 us a launch back to back, 9.6 us
    with a synchronisation after each). Largest first; empty when there are no kernels."""
    columns = ["family", "precision", "kernels", "total_ns", "mean_ns", "share", "short_share"]
    if kernels.empty:
        return pd.DataFrame(columns=columns)
    k = classify_kernels(kernels) if "family" not in kernels else kernels
    k = k.assign(short=k["dur_ns"] < short_ns)
    g = k.groupby(["family", "precision"], observed=True)
    out = g.agg(kernels=("dur_ns", "size"), total_ns=("dur_ns", "sum"), short=("short", "mean"))
    out = out.reset_index().rename(columns={"short": "short_share"})
    total = float(k["dur_ns"].sum())
    out["mean_ns"] = out["total_ns"] / out["kernels"]
    out["share"] = out["total_ns"] / total if total > 0 else np.nan
    return out.sort_values("total_ns", ascending=False, ignore_index=True)[columns]
