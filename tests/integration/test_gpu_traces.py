"""The real GPU traces recorded by other projects (``../shared/gpu_traces``, README there;
skipped when absent): read whole by ``probe.rundir.kineto``, and the analyses held to what
the README declares of each -- BF16 inference on H100s, FP32 ResNet-50 training on V100s,
NCCL all-reduce in a 2-rank DDP, a window with its warm-up, a DataLoader with 0 and 4
workers. A validation set: nothing here tunes a threshold."""

from __future__ import annotations

from functools import cache
from pathlib import Path

import pandas as pd
import pytest

from probe.analyzers.copies import read_copies
from probe.analyzers.device_time import device_time
from probe.analyzers.gpu_timeline import GpuTimeline, gpu_timeline
from probe.analyzers.kernels import classify_kernels, kernel_breakdown
from probe.analyzers.op_breakdown import op_breakdown
from probe.analyzers.rules import Finding
from probe.analyzers.trace_diagnosis import TraceDiagnosis, diagnose_trace
from probe.analyzers.trace_fixes import TraceEvidence, trace_recommendations
from probe.analyzers.trace_limits import trace_findings
from probe.rundir.kineto import KinetoTrace, read_kineto

from .conftest import REPO

pytestmark = pytest.mark.integration

GPU_TRACES = REPO.parent / "shared" / "gpu_traces"


@cache
def read(path: Path) -> KinetoTrace:
    return read_kineto(path)


REAL = sorted(GPU_TRACES.glob("*.json.gz")) if GPU_TRACES.is_dir() else []


@pytest.mark.skipif(not REAL, reason="../shared/gpu_traces is not beside the project")
@pytest.mark.parametrize("path", REAL, ids=[p.name.split(".")[0] for p in REAL])
def test_real_gpu_traces_read_whole_with_kernels_tied_to_their_launches(path):
    trace = read(path)
    assert trace.notes == [], trace.notes  # every category known, nothing cut short
    kernels, runtime = trace.tables["kernels"], trace.tables["runtime"]
    assert trace.has_gpu and len(kernels) > 0 and len(trace.tables["ops"]) > 0
    assert trace.meta["deviceProperties"][0]["totalGlobalMem"] > 0  # the GPU it ran on
    # a kernel launched inside the window has its launch there (correlation); those
    # without one were launched before it (correlation ids count up) and ran while the
    # GPU caught up: the H100 Qwen trace's first 436 kernels, 14 ms of backlog
    launched = runtime["correlation"].dropna()
    orphans = kernels[~kernels["correlation"].isin(set(launched))]
    assert (orphans["correlation"] < launched.min()).all()


needs_traces = pytest.mark.skipif(not REAL, reason="../shared/gpu_traces is not beside")


def gemm_time_by_precision(name: str) -> pd.Series:
    b = kernel_breakdown(read(GPU_TRACES / name).tables["kernels"])
    mm = b[b["family"].isin(["gemm", "conv"])]
    return mm.groupby("precision", observed=True)["total_ns"].sum() / mm["total_ns"].sum()


@needs_traces
@pytest.mark.parametrize(
    "name", [p.name for p in REAL if p.name.startswith("tl_h100")], ids=lambda n: n[:20]
)
def test_the_bf16_inference_traces_read_as_bf16_matrix_work(name):
    # README: Hugging Face pipelines on an H100, BF16
    assert gemm_time_by_precision(name).get("bf16", 0.0) > 0.9


@needs_traces
@pytest.mark.parametrize(
    ("name", "dtype"),
    [(p.name, "bfloat16" if p.name.startswith("tl_h100") else "float32")
     for p in REAL if p.name.startswith("tl_h100") or "resnet50" in p.name],
    ids=lambda v: str(v)[:20],
)  # fmt: skip
def test_the_host_s_matrix_ops_take_inputs_of_the_precision_their_kernels_run_in(name, dtype):
    # the ops' input types (the host's side) against the kernels' names (the GPU's), the
    # README's precisions: BF16 pipelines on an H100, FP32 ResNet-50 on a V100
    trace = read(GPU_TRACES / name)
    b = op_breakdown(trace.tables["ops"])
    # most of the host time of the matrix ops whose first input is a tensor (a backward
    # op's may be a size list; Qwen's rotary embedding runs one bmm in FP32 by design)
    matrix = b.ops[
        b.ops["name"].str.contains("mm|linear|conv", regex=True) & (b.ops["dtype"] != "")
    ]
    by_dtype = matrix.groupby("dtype")["self_ns"].sum() / matrix["self_ns"].sum()
    assert by_dtype.get(dtype, 0.0) > 0.9, by_dtype
    assert not b.ops["name"].str.startswith("ProfilerStep").any()  # a range, not an op
    busiest = b.threads.iloc[0]
    assert 0 < busiest["in_ops_ns"] <= busiest["span_ns"]


@needs_traces
@pytest.mark.parametrize("name", [p.name for p in REAL if "resnet50" in p.name])
def test_the_fp32_resnet_training_reads_as_fp32_convolutions(name):
    # README: ResNet-50 training, batch 32, FP32, on a V100 (no TF32 before Ampere)
    assert gemm_time_by_precision(name).get("fp32", 0.0) > 0.9


@needs_traces
def test_the_ddp_trace_shows_its_all_reduce_as_collective_time():
    # README: a 2-rank DDP model over NCCL
    path = GPU_TRACES / "hta_v100_ddp2_train_rank1.json.gz"
    b = kernel_breakdown(read(path).tables["kernels"])
    assert b.loc[b["family"] == "collective", "share"].sum() > 0.05


def timeline_of(name: str) -> GpuTimeline:
    t = read(GPU_TRACES / name).tables
    return gpu_timeline(t["kernels"], t["copies"], t["runtime"], t["ops"], t["annotations"])


@needs_traces
def test_a_window_that_includes_the_warm_up_is_not_judged_as_a_steady_state():
    # README: a PARAM AlexNet forward, warm-up included (cudaMalloc, context creation)
    assert not timeline_of("hta_a100_alexnet_warmup.json.gz").steady


@needs_traces
def test_the_gpu_waits_on_the_data_loader_with_no_workers_and_less_with_four():
    # README: the same ResNet-50 training with DataLoader num_workers=0, then 4
    def input_share(name: str) -> float:
        by = timeline_of(name).by_cause.set_index("cause")
        return float(by.loc["input", "share"])

    alone = input_share("kineto_v100_resnet50_train_nw0.pt.trace.json.gz")
    workers = input_share("kineto_v100_resnet50_train_nw4.pt.trace.json.gz")
    assert alone > 0 and workers < alone / 2, (alone, workers)


@needs_traces
@pytest.mark.parametrize("name", [p.name for p in REAL if "resnet50" in p.name])
def test_each_training_step_owns_the_gpu_work_it_launched_backward_included(name):
    # README: ResNet-50 training steps; the backward is launched by autograd's engine
    # thread while the step's span (ProfilerStep#N) waits in loss.backward()
    t = read(GPU_TRACES / name).tables
    ops = t["ops"]
    steps = ops[ops["name"].astype(str).str.startswith("ProfilerStep#")]
    per_step = device_time(steps, t["runtime"], t["kernels"], t["copies"])
    gpu_work = t["kernels"]["dur_ns"].sum() + t["copies"]["dur_ns"].sum()
    assert per_step["device_ns"].sum() == pytest.approx(gpu_work, rel=0.01)
    assert per_step["device_ns"].std() < 0.05 * per_step["device_ns"].mean()  # alike steps


def primary_of(name: str) -> Finding:
    t = read(GPU_TRACES / name).tables
    return trace_findings(timeline_of(name), read_copies(t["copies"], t["runtime"]))[0]


@needs_traces
@pytest.mark.parametrize(
    ("name", "limits"),
    [
        # README: batch 1 x 512 tokens on an H100, and batch 4 images: small work a step
        ("tl_h100_bert-small_infer.json.gz", {"gpu_starved", "launch_bound"}),
        ("tl_h100_vit-nsfw_infer.json.gz", {"gpu_starved", "launch_bound"}),
        # README: one vLLM forward in eager mode (no CUDA graphs)
        ("tl_b200_vllm-gptoss_eager.json.gz", {"gpu_starved", "launch_bound"}),
        # README: batch 16 text generation; one video through a video transformer
        ("tl_h100_qwen1.5-0.5b_infer.json.gz", {"gpu_compute"}),
        ("tl_h100_timesformer_infer.json.gz", {"gpu_compute"}),
        # README: warm-up included
        ("hta_a100_alexnet_warmup.json.gz", {"warm_up"}),
    ],
    ids=lambda v: v[:22] if isinstance(v, str) else None,
)
def test_the_limit_of_each_real_trace_is_on_the_side_its_workload_puts_it(name, limits):
    assert primary_of(name).subkind in limits


def median_step_ns(name: str) -> float:
    ops = read(GPU_TRACES / name).tables["ops"]
    steps = ops[ops["name"].astype(str).str.startswith("ProfilerStep#")]
    return float(steps["dur_ns"].median())


@needs_traces
def test_the_data_loader_estimate_meets_its_realisation_in_the_four_worker_trace():
    # a before/after pair recorded by others (README: the same ResNet-50 job with
    # num_workers=0, then 4): the estimate from the first trace alone, against the ratio
    # of the median training step (the median: the workers start up in the first step)
    name = "kineto_v100_resnet50_train_nw0.pt.trace.json.gz"
    t = read(GPU_TRACES / name).tables
    tl = timeline_of(name)
    copies = read_copies(t["copies"], t["runtime"])
    ev = TraceEvidence(
        trace_findings(tl, copies), classify_kernels(t["kernels"]), copies, tl.by_cause,
        float(tl.devices["window_ns"].sum()),
    )  # fmt: skip
    estimate = {r.id: r.estimated_speedup for r in trace_recommendations(ev)}
    realized = median_step_ns(name) / median_step_ns(name.replace("nw0", "nw4"))
    assert estimate["dataloader_workers"] == pytest.approx(realized, rel=0.25)


@cache
def diagnosis_of(name: str) -> TraceDiagnosis:
    return diagnose_trace(read(GPU_TRACES / name))


@needs_traces
def test_a_gpu_bound_model_whose_element_wise_chains_run_unfused_is_told_to_fuse_them():
    # README: Qwen1.5-0.5B generating at batch 16 in BF16, eager (transformers 4.49: its
    # attention already SDPA's kernels; RMSNorm -- upcast to FP32 -- rotary embeddings and
    # the SiLU gate each a chain of separate element-wise kernels)
    d = diagnosis_of("tl_h100_qwen1.5-0.5b_infer.json.gz")
    assert d.primary["subkind"] == "gpu_compute", d.primary
    advised = [r.id for r in d.recommendations]
    assert advised[0] == "kernel_fusion", advised
    assert "fused_attention" not in advised and "fp16" not in advised, advised


@needs_traces
def test_a_video_transformer_s_explicit_softmax_attention_is_told_to_use_fused_attention():
    # README: TimeSformer on one video in BF16; Hugging Face's TimesformerSelfAttention
    # computes softmax(q @ k^T * scale) @ v op by op, its softmax over the frames' patches
    d = diagnosis_of("tl_h100_timesformer_infer.json.gz")
    assert d.primary["subkind"] == "gpu_compute", d.primary
    assert d.recommendations[0].id == "fused_attention", d.recommendations


@needs_traces
def test_cpu_pre_processing_before_each_forward_is_the_input_pipeline_workers_are_advised():
    # README: OWLv2 zero-shot detection through a transformers pipeline, one image at a
    # time; the trace's own frames put each image's `preprocess` inside a single-process
    # DataLoader's __next__ (~125 ms each), before the forward's first kernel
    name = "tl_h100_owlv2_infer.json.gz"
    py = read(GPU_TRACES / name).tables["python"]
    assert py["name"].str.contains("zero_shot_object_detection.py.*preprocess").any()
    d = diagnosis_of(name)
    idle = d.idle.set_index("cause")["share"]
    assert idle.idxmax() == "input" and idle["input"] > 0.3, idle
    # the GPU busy 53% of the window: a limit on neither side with any confidence
    assert d.primary["confidence"] < 0.2, d.primary
    assert d.recommendations[0].id == "dataloader_workers", d.recommendations
