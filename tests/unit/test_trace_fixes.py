"""What each fix would buy on a GPU trace (``analyzers.trace_fixes``), on evidence declared
here: GPU-side fixes only when the GPU is the limit, host-side ones on their idle time,
never FP16 on matrix work already in half precision."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from probe.analyzers.attention import UnfusedAttention
from probe.analyzers.gpu_timeline import GAP_CAUSES
from probe.analyzers.op_breakdown import PAID_OVER_GAP
from probe.analyzers.ops import PrefixFinding
from probe.analyzers.rules import Finding
from probe.analyzers.trace_fixes import TraceEvidence, trace_proposed, trace_recommendations

WINDOW = 1_000_000_000


def finding(subkind: str) -> Finding:
    return Finding("gpu", subkind, "trace", 0.8, 0.6, "test", {})


def kernels(*rows: tuple[str, str, int, int]) -> pd.DataFrame:
    """(family, precision, duration ns, stream) each, in launch order."""
    return pd.DataFrame(
        {
            "family": [r[0] for r in rows],
            "precision": [r[1] for r in rows],
            "dur_ns": [r[2] for r in rows],
            "stream": [r[3] for r in rows],
            "ts_ns": range(len(rows)),
        }
    )


def idle(gaps: int = 1000, **shares: float) -> pd.DataFrame:
    """Idle time by cause (shares of the window), each cause in ``gaps`` gaps."""
    return pd.DataFrame(
        [{"cause": c, "idle_ns": int(shares.get(c, 0.0) * WINDOW), "gaps": gaps}
         for c in GAP_CAUSES]
    )  # fmt: skip


NO_COPIES = pd.DataFrame(columns=["host_memory", "dur_ns"])


def evidence(limit: str, k: pd.DataFrame, **kw) -> TraceEvidence:
    return TraceEvidence(
        [finding(limit)], k, kw.pop("copies", NO_COPIES), kw.pop("idle", idle()), WINDOW, **kw
    )


def ids(recs) -> dict[str, float]:
    return {r.id: r.estimated_speedup for r in recs}


def test_fp32_matrix_work_on_a_busy_gpu_is_worth_bf16_and_half_precision_is_not():
    fp32 = kernels(("gemm", "fp32", 600_000_000, 7))
    got = ids(trace_recommendations(evidence("gpu_compute", fp32)))
    # a GPU not in the datasheet table: the lowest ratio listed, BF16 4x FP32's peak
    assert got["fp16"] == pytest.approx(1 / (0.4 + 0.6 / 4))
    bf16 = kernels(("gemm", "bf16", 600_000_000, 7))
    assert "fp16" not in ids(trace_recommendations(evidence("gpu_compute", bf16)))


def test_fp32_and_tf32_matrix_work_gain_their_own_ratios_of_the_gpu_s_peaks():
    # an H100-class GPU (9.0): BF16 989.4 / FP32 67 = 14.8x; TF32 494.7 / 67 = 7.4x;
    # TF32 work to BF16: 2x
    k = kernels(("gemm", "fp32", 400_000_000, 7), ("gemm", "tf32", 200_000_000, 7))
    got = {r.id: r for r in trace_recommendations(evidence("gpu_compute", k, capability=(9, 0)))}
    after = 0.4 / (989.4 / 67) + 0.2 / 2
    assert got["fp16"].estimated_speedup == pytest.approx(1 / (0.4 + after))
    assert got["tf32"].s == pytest.approx(494.7 / 67)
    assert got["tf32"].p == pytest.approx(0.4)  # the FP32 work only: TF32's is TF32 already


def test_tf32_is_never_proposed_on_a_gpu_without_it_or_on_matrix_work_already_in_it():
    fp32 = kernels(("gemm", "fp32", 600_000_000, 7))
    volta = ids(trace_recommendations(evidence("gpu_compute", fp32, capability=(7, 0))))
    assert "tf32" not in volta and volta["fp16"] == pytest.approx(1 / (0.4 + 0.6 / (125 / 15.7)))
    tf32 = kernels(("gemm", "tf32", 600_000_000, 7))
    hopper = evidence("gpu_compute", tf32, capability=(9, 0))
    assert "tf32" not in ids(trace_recommendations(hopper))


def copies(*rows: tuple[str, str, int, int]) -> pd.DataFrame:
    """(host memory, direction, bytes, duration ns) each."""
    return pd.DataFrame(rows, columns=["host_memory", "direction", "bytes", "dur_ns"])


def test_pageable_copies_gain_the_bandwidth_the_trace_s_pinned_copies_reach():
    # 600 ms of uploads at 5 GB/s; a pinned upload in the same trace ran at 50 GB/s
    c = copies(("pageable", "HtoD", 3_000_000_000, 600_000_000),
               ("pinned", "HtoD", 50_000_000, 1_000_000))  # fmt: skip
    [rec] = [r for r in trace_recommendations(evidence("none", kernels(), copies=c))
             if r.id == "pinned_copies"]  # fmt: skip
    assert rec.p == pytest.approx(0.6) and rec.s == pytest.approx(10.0)


def test_without_pinned_copies_the_link_of_the_gpu_s_generation_sets_the_gain():
    c = copies(("pageable", "HtoD", 3_000_000_000, 600_000_000))  # 5 GB/s
    hopper = {r.id: r for r in trace_recommendations(evidence("none", kernels(), copies=c,
                                                              capability=(9, 0)))}  # fmt: skip
    assert hopper["pinned_copies"].s == pytest.approx(0.8 * 63.0 / 5.0)  # PCIe Gen5 x16
    unknown = {r.id: r for r in trace_recommendations(evidence("none", kernels(), copies=c))}
    assert unknown["pinned_copies"].s == pytest.approx(2.0)  # the least: NVIDIA's 2x
    fast = copies(("pageable", "HtoD", 3_000_000_000, 100_000_000))  # 30 GB/s on Gen4
    ampere = {r.id: r for r in trace_recommendations(evidence("none", kernels(), copies=fast,
                                                              capability=(8, 0)))}  # fmt: skip
    assert "pinned_copies" not in ampere or ampere["pinned_copies"].s == pytest.approx(2.0)


def test_gpu_side_fixes_wait_until_the_gpu_is_the_limit():
    fp32 = kernels(("gemm", "fp32", 600_000_000, 7))
    assert "fp16" not in ids(trace_recommendations(evidence("gpu_starved", fp32)))


def test_fusion_s_gain_is_the_length_of_the_memory_bound_chains_it_merges():
    chain = [("elementwise", "bf16", 100_000_000, 7)] * 4
    k = kernels(*chain, ("gemm", "bf16", 200_000_000, 7), *chain)
    rec = next(
        r for r in trace_recommendations(evidence("gpu_compute", k)) if r.id == "kernel_fusion"
    )
    assert rec.s == pytest.approx(4.0) and rec.p == pytest.approx(0.8)
    one_by_one = kernels(*[(f, "bf16", 100_000_000, 7) for f in ["elementwise", "gemm"] * 4])
    assert "kernel_fusion" not in ids(trace_recommendations(evidence("gpu_compute", one_by_one)))


def test_unfused_attention_is_proposed_only_where_no_fused_attention_runs():
    k = kernels(("softmax", "bf16", 500_000_000, 7), ("gemm", "bf16", 400_000_000, 7))
    assert "fused_attention" in ids(trace_recommendations(evidence("gpu_compute", k)))
    fused = kernels(("softmax", "bf16", 500_000_000, 7), ("attention", "bf16", 1, 7))
    assert "fused_attention" not in ids(trace_recommendations(evidence("gpu_compute", fused)))


def fused_attention_for(limit: str, idle_shares: dict[str, float], ops: int, host: float):
    """The fused-attention recommendation (None where not proposed) on a trace whose
    unfused attention is 10 attentions of ``ops`` ops holding ``host`` of the window on
    the host, the GPU idle ``idle_shares`` of it."""
    a = UnfusedAttention(1e6, 40, 1e12, "c10::BFloat16", ops, host * WINDOW, 10)
    ev = evidence(limit, kernels(("gemm", "bf16", 1, 7)), idle=idle(**idle_shares), attention=a)
    return next((r for r in trace_recommendations(ev) if r.id == "fused_attention"), None)


def test_where_launches_are_the_limit_fused_attention_buys_the_host_s_time_in_its_ops():
    # 4 ops an attention, 40% of the window on the host: each attention becomes one call
    # at the ops' mean cost, the GPU busy 30% of the window
    rec = fused_attention_for("launch_bound", {"launch": 0.7}, ops=40, host=0.4)
    assert rec.p == pytest.approx(0.4) and rec.s == pytest.approx(4.0)
    assert rec.estimated_speedup == pytest.approx(1 / (0.6 + 0.1))


def test_the_host_s_gain_from_fused_attention_stops_at_the_gpu_s_busy_time():
    # the host's attention is 90% of the window, the GPU busy 80% of it: the window can
    # shrink to the GPU's busy time, not below (1.25x), whatever the host saves
    rec = fused_attention_for("launch_bound", {"launch": 0.2}, ops=40, host=0.9)
    assert rec.estimated_speedup == pytest.approx(1.25)


def test_fused_attention_is_not_proposed_for_the_host_where_the_host_is_not_the_limit():
    assert fused_attention_for("gpu_starved", {"input": 0.7}, ops=40, host=0.4) is None


def test_host_side_fixes_remove_their_idle_time_as_an_upper_bound():
    recs = trace_recommendations(
        evidence("launch_bound", kernels(), idle=idle(launch=0.3, framework=0.2, input=0.3))
    )
    got = {r.id: r for r in recs}
    # CUDA graphs: 2,000 gaps of launches and dispatch shrink to 0.5 us each
    graphs = got["cuda_graphs"]
    assert graphs.p == pytest.approx(0.5) and graphs.s == pytest.approx(0.5e9 / (2000 * 500))
    assert graphs.estimated_speedup == pytest.approx(1 / (0.5 + 0.5 / graphs.s))
    assert "upper bound" in graphs.model
    assert got["dataloader_workers"].estimated_speedup == pytest.approx(1 / 0.7)
    assert math.isinf(got["dataloader_workers"].s)


def test_a_growing_prefix_proposes_a_kv_cache_with_its_fitted_gain():
    prefix = PrefixFinding("aten::linear", "[1,T,128]", 16, 24, 1, (30_000_000,) * 24,
                           2e6, 1e6, 3.0)  # fmt: skip
    got = ids(trace_recommendations(evidence("gpu_starved", kernels(), prefix=prefix)))
    assert got["kv_cache"] == pytest.approx(1 / ((1 - 0.72) + 0.72 / 3.0))


def test_a_kv_cache_s_share_is_of_the_window_as_its_thread_runs_unprofiled():
    # the steps' times come less the profiler's cost of their ops (analyzers.ops); the
    # window they are a share of must too: 720 ms of steps in a window whose thread paid
    # 200 ms to the profiler are 90% of it, not 72%
    prefix = PrefixFinding("aten::linear", "[1,T,128]", 16, 24, 1, (30_000_000,) * 24,
                           2e6, 1e6, 3.0, tid=7)  # fmt: skip
    other = evidence("none", kernels(), prefix=prefix, profiler_ns={8: 200_000_000})
    ev = evidence("none", kernels(), prefix=prefix, profiler_ns={7: 200_000_000})
    assert ids(trace_recommendations(other))["kv_cache"] == pytest.approx(1 / (0.28 + 0.24))
    [kv] = [r for r in trace_recommendations(ev) if r.id == "kv_cache"]
    assert kv.p == pytest.approx(0.9) and kv.estimated_speedup == pytest.approx(1 / (0.1 + 0.3))


def test_gains_too_small_to_rank_are_left_out_of_the_ranked_fixes_but_still_proposed():
    small = kernels(("gemm", "fp32", 100_000_000, 7))  # 10% of the window: 1.05x
    assert trace_recommendations(evidence("gpu_compute", small)) == []
    # kept aside, as a run's minor fixes are: a run's windows re-estimate them
    proposed = ids(trace_proposed(evidence("gpu_compute", small)))
    assert set(proposed) == {"fp16", "tf32"} and all(1.0 < s < 1.25 for s in proposed.values())


def test_the_trace_catalog_is_complete_and_its_constants_sourced():
    from probe.analyzers.constants import sources
    from probe.analyzers.trace_fixes import TRACE_FIXES, TRACE_MODEL

    ids = [fix.id for fix in TRACE_FIXES]
    assert len(ids) == len(set(ids))
    assert all("\n    " in fix.how for fix in TRACE_FIXES)  # each with a code sketch
    for name, source in sources(TRACE_MODEL).items():
        assert len(source) >= 20, f"TraceModel.{name} has no source"


def span_ops(*rows: tuple[str, int, int, int]) -> pd.DataFrame:
    """(name, spans, time ns, of which inside top-level ops) each, on thread 1."""
    return pd.DataFrame(
        [{"name": n, "tid": 1, "spans": k, "range_ns": t, "in_ops_ns": o} for n, k, t, o in rows]
    )


CPU_MODEL = span_ops(
    ("request", 100, 900_000_000, 420_000_000),  # holds the model's ops and the rest
    ("infer", 100, 700_000_000, 400_000_000),  # the model: 300 ms of Python between ops
    ("preprocess", 100, 150_000_000, 20_000_000),  # Python a graph would not touch
)


def test_a_cpu_model_s_python_between_ops_is_what_a_compiled_graph_removes():
    ev = evidence("none", kernels(), span_ops=CPU_MODEL)
    [rec] = [r for r in trace_recommendations(ev) if r.id == "inference_runtime"]
    # the tightest span holding the ops is the model's: its 300 ms outside ops go
    assert rec.evidence["stage"] == "infer" and rec.p == pytest.approx(0.3)
    assert rec.estimated_speedup == pytest.approx(1 / 0.7) and math.isinf(rec.s)


def test_the_profiler_s_own_cost_in_the_ops_is_taken_off_the_window_not_the_python():
    # 200 ms of the window was the profiler's, inside the thread's ops
    ev = evidence("none", kernels(), span_ops=CPU_MODEL, profiler_ns={1: 200_000_000})
    [rec] = [r for r in trace_recommendations(ev) if r.id == "inference_runtime"]
    assert rec.p == pytest.approx(300 / 800)


def test_the_profiler_s_bookkeeping_between_a_stage_s_top_level_ops_is_not_its_python():
    # infer's 300 ms outside ops hold 100,000 top-level ops' bookkeeping: 1 us of each
    # op's cost (the gap: PAID_OVER_GAP) lies outside the ops' intervals, 100 ms in all
    staged = CPU_MODEL.assign(top_ops=[110_000, 100_000, 10_000])
    cost = PAID_OVER_GAP * 1_000
    ev = evidence("none", kernels(), span_ops=staged, op_cost_ns=cost, profiler_ns={1: 200_000_000})
    [rec] = [r for r in trace_recommendations(ev) if r.id == "inference_runtime"]
    assert rec.evidence["profiler_ms"] == pytest.approx(100)
    assert rec.p == pytest.approx(200 / 800)


def test_no_compiled_graph_on_a_gpu_nor_without_spans_nor_where_ops_hold_the_time():
    gpu = kernels(("gemm", "bf16", 100_000_000, 7))
    assert "inference_runtime" not in ids(
        trace_recommendations(evidence("launch_bound", gpu, span_ops=CPU_MODEL))
    )  # on a GPU the Python between ops is launch gaps: cuda_graphs' evidence
    assert "inference_runtime" not in ids(trace_recommendations(evidence("none", kernels())))
    busy = span_ops(("infer", 100, 700_000_000, 650_000_000))  # 5% of the window: 1.05x
    assert "inference_runtime" not in ids(
        trace_recommendations(evidence("none", kernels(), span_ops=busy))
    )


def test_a_stage_s_python_that_fills_its_thread_s_window_gets_no_infinite_compiled_graph():
    # ranges of one name nested on one thread count twice: more time outside ops than the
    # window holds; Amdahl at s = infinity on a share of 1 or more would say "∞"
    nested = span_ops(("infer", 200, 1_900_000_000, 400_000_000))
    ev = evidence("none", kernels(), span_ops=nested)
    assert "inference_runtime" not in ids(trace_recommendations(ev))


def test_a_collection_inside_the_model_s_stage_is_neither_its_python_nor_its_window_s_time():
    # CPU_MODEL's infer stage, a 200-ms full collection inside one of its spans: outside
    # ops, it would read as 500 ms of Python between them without the run's timing
    collected = span_ops(("infer", 100, 900_000_000, 400_000_000))
    collected["paused_ns"] = 200_000_000
    # the window held the collection too: 1.2 s, of which the thread ran 1 s
    ev = TraceEvidence(
        [finding("none")], kernels(), NO_COPIES, idle(), WINDOW + 200_000_000,
        span_ops=collected, paused_ns={1: 200_000_000},
    )  # fmt: skip
    [rec] = [r for r in trace_recommendations(ev) if r.id == "inference_runtime"]
    # 300 ms of Python in the 1-s window the thread runs outside collections
    assert rec.p == pytest.approx(0.3) and rec.evidence["collections_ms"] == 200
    assert rec.evidence["stage_glue_share"] == pytest.approx(300 / 700, abs=1e-4)  # rounded
