"""Our own GPU traces (``tests/gpu_corpus``, recorded on an H200: README there): each
optimisation as a before/after pair whose realised speedup was measured without the
profiler (``truth.json``). The trace diagnosis of each "before" is held to it: the kernels'
precision, the limit's side, and each estimate that claims to be one within 25% of its
realisation (an upper bound at or above it); no fix proposed where the pair shows it buys
nothing."""

from __future__ import annotations

import json
from dataclasses import replace
from functools import cache

import pytest

from probe.analyzers.trace_diagnosis import TraceDiagnosis, compute_capability, diagnose_trace
from probe.analyzers.trace_fixes import TRACE_MODEL
from probe.rundir.kineto import read_kineto

from .conftest import REPO

pytestmark = pytest.mark.integration

CORPUS = REPO / "tests" / "gpu_corpus"
TRUTH = json.loads((CORPUS / "truth.json").read_text())
CASES = sorted(TRUTH["cases"])


@cache
def diagnosis(case: str) -> TraceDiagnosis:
    return diagnose_trace(read_kineto(CORPUS / f"{case}.json.gz"))


def estimate(case: str, fix: str) -> float | None:
    return next((r.estimated_speedup for r in diagnosis(case).recommendations if r.id == fix), None)


def realised(pair: str) -> float:
    return float(TRUTH["pairs"][pair]["speedup"])


@pytest.mark.parametrize("case", CASES)
def test_each_corpus_trace_reads_whole_on_the_h200_it_was_recorded_on(case):
    trace = read_kineto(CORPUS / f"{case}.json.gz")
    assert trace.notes == [] and len(trace.tables["kernels"]) > 0
    assert compute_capability(trace.meta) == (9, 0)  # Hopper
    launched = set(trace.tables["runtime"]["correlation"].dropna())
    assert trace.tables["kernels"]["correlation"].isin(launched).all()


def matrix_share(case: str, precision: str) -> float:
    b = diagnosis(case).kernels
    mm = b[b["family"].isin(["gemm", "conv"])]
    return float(mm.loc[mm["precision"] == precision, "total_ns"].sum() / mm["total_ns"].sum())


@pytest.mark.parametrize(
    ("case", "precision"),
    [("enc_b32_fp32", "fp32"), ("enc_b32_tf32", "tf32"), ("enc_b32_bf16", "bf16"),
     ("enc_b32_bf16_sdpa", "bf16"), ("enc_b32_bf16_compiled", "bf16")],
)  # fmt: skip
def test_matrix_work_reads_in_the_precision_the_model_ran_it_in(case, precision):
    # BF16 GEMMs are cuBLASLt's nvjet kernels, whose names carry no type: read from the
    # ops that launched them. TF32: the bmm's CUTLASS s1688 kernel as well as cuBLAS's.
    assert matrix_share(case, precision) > 0.95


def test_fused_attention_in_a_bf16_model_reads_as_bf16_not_its_kernel_s_f16():
    b = diagnosis("enc_b32_bf16_sdpa").kernels  # the breakdown by family and precision
    attention = b[b["family"] == "attention"]
    assert list(attention["precision"]) == ["bf16"]


@pytest.mark.parametrize(
    ("case", "limits"),
    [
        # batch 1 x 128 tokens, eager: ~77 small kernels a step
        ("enc_b1_fp32", {"launch_bound"}),
        # one token a step (and the whole prefix a step), batch 1: tiny kernels
        ("decoder_kv", {"launch_bound"}),
        ("decoder_nokv", {"launch_bound"}),
        # batch 32 x 256 tokens of FP32 GEMMs
        ("enc_b32_fp32", {"gpu_compute"}),
        # 16 images decoded on the CPU a step, no workers
        ("loader_w0", {"gpu_starved"}),
    ],
)
def test_the_limit_of_each_corpus_trace_is_on_the_side_its_workload_puts_it(case, limits):
    assert diagnosis(case).findings[0].subkind in limits


@pytest.mark.parametrize(
    ("case", "fix", "pair"),
    [
        ("enc_b32_fp32", "fp16", "low_precision_from_fp32"),  # 5.0x against 5.9x
        ("enc_b32_fp32", "tf32", None),  # 3.9x against the TF32 step's 3.8x
        ("enc_b32_tf32", "fp16", "low_precision_from_tf32"),  # 1.3x against 1.55x
        ("copy_pageable", "pinned_copies", "pinned_copies"),  # 4.0x against 4.3x
        # recorded after the fused-attention estimates were written (device_attention.sh)
        ("enc_b2_t2048_bf16", "fused_attention", "fused_attention_b2_t2048"),  # 2.29 / 2.28
        ("enc_b16_t512_bf16", "fused_attention", "fused_attention_b16_t512"),  # 1.56 / 1.72
    ],
)
def test_each_estimate_meets_its_realisation_within_a_quarter(case, fix, pair):
    if pair is None:  # FP32 to TF32: both sides of the FP32 -> BF16 pair, timed alike
        fp32, tf32 = (
            TRUTH["pairs"]["low_precision_from_fp32"],
            TRUTH["pairs"]["low_precision_from_tf32"],
        )
        truth = fp32["before_ms"] / tf32["before_ms"]
    else:
        truth = realised(pair)
    got = estimate(case, fix)
    assert got is not None and got == pytest.approx(truth, rel=0.25), (got, truth)


def test_cuda_graphs_estimate_is_the_upper_bound_it_says_it_is():
    # the trace's gaps include torch.profiler's own cost per op, which a graph also
    # removes: the estimate (2.5x) runs above the realised 1.9x, as its model says
    got = estimate("enc_b1_fp32", "cuda_graphs")
    assert got is not None and got >= realised("cuda_graphs")


def test_the_data_loader_with_no_workers_gets_workers_first_and_no_bound_it_is_not():
    # 15.2x against 21.0x realised in the workers' steady state: the main process loaded
    # slower than the workers do, so removing the idle time is no upper bound here
    recs = diagnosis("loader_w0").recommendations
    assert recs and recs[0].id == "dataloader_workers"
    assert "upper bound" not in recs[0].model and "no bound" not in recs[0].model


@pytest.mark.parametrize(
    ("case", "fix", "pair"),
    [
        # the GPU decoder is launch-bound: a step's cost hardly grows with its prefix
        # (2.6 us a token against 1.6 ms a step), so the cache bought 1.01x
        ("decoder_nokv", "kv_cache", "kv_cache"),
        # SDPA's eager model compiled: 1.03x
        ("enc_b32_bf16_sdpa", "kernel_fusion", "fusion_compile"),
    ],
)
def test_no_fix_is_proposed_where_its_pair_shows_it_buys_nothing(case, fix, pair):
    assert realised(pair) < 1.1
    assert estimate(case, fix) is None


@pytest.mark.parametrize("case", ["enc_b32_bf16", "enc_b32_bf16_sdpa", "enc_b32_bf16_compiled"])
def test_half_precision_is_never_proposed_for_matrix_work_already_in_bf16(case):
    assert estimate(case, "fp16") is None and estimate(case, "tf32") is None


@pytest.mark.parametrize(
    ("case", "pair"),
    [
        # 4 x 1024 tokens, the case that prompted the rule: SDPA bought 1.26x by
        # dispatching one op where the unfused attention dispatched four
        ("enc_b4_t1024_bf16", "fused_attention_long"),
        # 1 x 512 tokens, recorded after the rule was written: 1.17x against 1.13x
        ("enc_b1_t512_bf16", "fused_attention_b1_t512"),
    ],
)
def test_fused_attention_on_a_launch_bound_model_is_estimated_from_the_host_s_ops(case, pair):
    # both launch-bound (the GPU busy a quarter of the window or less); both estimates
    # sit under the catalog's least worth proposing (1.25x), so they are read with that
    # floor lowered
    trace = read_kineto(CORPUS / f"{case}.json.gz")
    assert diagnosis(case).findings[0].subkind == "launch_bound"
    floor_off = diagnose_trace(trace, model=replace(TRACE_MODEL, min_speedup=1.0))
    [rec] = [r for r in floor_off.recommendations if r.id == "fused_attention"]
    assert "host's time" in rec.model
    assert rec.estimated_speedup == pytest.approx(realised(pair), rel=0.25)


def test_unfused_attention_is_proposed_where_sdpa_bought_half_again():
    # the products, scaling, softmax and layout copies found by their shapes
    # (analyzers.attention), replaced by one kernel at half the H200's BF16 peak: 1.3x
    # against the realised 1.53x (the softmax alone read 1.05x, under the bar)
    got = estimate("enc_b32_bf16", "fused_attention")
    assert got is not None and got == pytest.approx(realised("fused_attention"), rel=0.25)
