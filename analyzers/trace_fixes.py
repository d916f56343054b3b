"""What each fix would buy, from a GPU trace's measured shares (issue 15, part 5).

Each entry of the catalog names a fix, the evidence that proposes it and how its gain is
modelled; the gain is Amdahl's law on the traced window: the share ``p`` of the window
the fix touches, made ``s`` times faster. The window is the GPU's busy time plus its idle
time, and the model takes them as taking turns (no overlap):

* GPU-side fixes (lower precision, fusion, fused attention) shorten busy time; they are
  proposed only when the GPU is the limit (``gpu_compute``): while the host paces the
  work, a faster kernel only makes the GPU wait longer.
* Host-side fixes (CUDA graphs, data-loader workers, pinned copies) remove idle time of
  their cause; ``s`` is infinite there (the gap goes), so the estimate is the ceiling --
  an upper bound, said in the model.

Local speedups come from measured shapes where the trace has them (a fusion's gain is
the length of the chains of memory-bound kernels it would merge; a KV cache's from the
decoder's step times) and otherwise from the ``TraceModel`` constants, each with its
source. FP16/BF16 is never proposed where the matrix work is already BF16/FP16/FP8.
Shares may overlap between fixes (softmax kernels count for fusion and for fused
attention): each estimate stands alone, and two do not multiply.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

import pandas as pd

from probe.analyzers.amdahl import amdahl, ceiling
from probe.analyzers.constants import constant
from probe.analyzers.ops import PrefixFinding
from probe.analyzers.recommendations import MODEL, Recommendation
from probe.analyzers.rules import Finding

__all__ = [
    "TRACE_FIXES",
    "TRACE_MODEL",
    "TraceEvidence",
    "TraceModel",
    "trace_recommendations",
]

# kernels that move memory more than they compute: what fusing merges
_MEMORY_BOUND = ("elementwise", "norm", "copy", "reduction", "softmax")


@dataclass(frozen=True)
class TraceModel:
    low_precision: float = constant(
        2.0,
        "FP32/TF32 matrix work in BF16/FP16: dense tensor-core BF16 peaks at 2x TF32 "
        "(NVIDIA A100 datasheet: 312 vs 156 TFLOPS; H100 SXM: 989 vs 495) and far above "
        "FP32 without tensor cores (A100: 19.5 TFLOPS), while the bytes moved halve: 2x "
        "is the lower of the two effects.",
    )
    fused_attention: float = constant(
        2.0,
        "FlashAttention runs attention 2-4x faster than the standard softmax(QK^T)V "
        "(Dao et al., 'FlashAttention', NeurIPS 2022, section 4); the low end, applied to "
        "the softmax kernels' time only (the matrix products it also replaces are not "
        "told apart from the others').",
    )
    graph_gap_ns: float = constant(
        500.0,
        "What a gap between kernels costs when a CUDA graph replays them: NVIDIA's 'Getting "
        "Started with CUDA Graphs' (2019) ran 2.9-us kernels at 3.4 us each from a graph "
        "(3.8 us launched back to back from a stream): ~0.5 us a kernel.",
    )
    pinned_copies: float = constant(
        2.0,
        "Pinned host memory roughly doubles host-device bandwidth against pageable "
        "(NVIDIA, 'How to Optimize Data Transfers in CUDA C/C++'), and lets copies overlap "
        "compute; applied to the synchronous pageable copies' time.",
    )
    min_speedup: float = constant(
        MODEL.min_speedup,
        "The same bar as a run's recommendations (analyzers.recommendations.Model): "
        "gains below it are within the estimate's own error.",
    )


TRACE_MODEL = TraceModel()


@dataclass(frozen=True)
class TraceEvidence:
    """Everything the rules look at: the findings (primary first), the kernels with their
    family and precision (``classify_kernels``), the copies (``read_copies``), idle time by
    cause (``GpuTimeline.by_cause``), the window, and a decoder's growing prefix."""

    findings: list[Finding]
    kernels: pd.DataFrame
    copies: pd.DataFrame
    idle_by_cause: pd.DataFrame
    window_ns: float
    prefix: PrefixFinding | None = None
    # by span name: spans, their time and the part of it inside top-level ops
    # (op_breakdown.ops_in_ranges): the Python between a stage's ops
    span_ops: pd.DataFrame = field(default_factory=pd.DataFrame)
    # by thread: the profiler's own cost in the window, its ops times the cost per op
    # (probe run's windows measure it; 0 for a trace from elsewhere)
    profiler_ns: dict[int, float] = field(default_factory=dict)

    @property
    def gpu_bound(self) -> bool:
        return bool(self.findings) and self.findings[0].subkind == "gpu_compute"

    def share(self, ns: float) -> float:
        return ns / self.window_ns if self.window_ns > 0 else 0.0

    def thread_share(self, ns: float, tid: int) -> float:
        """``ns`` of work on thread ``tid``, already less the profiler's cost in its ops,
        over the window as that thread runs unprofiled: the window less that same cost.
        Over the raw window, a decoder's steps with the profiler's cost taken off (~0.9 us
        on each of ~27,000 ops of a 0.1-s window) read as 75% of it where they were 98%,
        and the KV-cache estimate ran 9-17% under the cache's realisation."""
        window = self.window_ns - self.profiler_ns.get(tid, 0.0)
        return ns / window if window > 0 else 0.0

    def idle_share(self, cause: str) -> float:
        rows = self.idle_by_cause[self.idle_by_cause["cause"] == cause]
        return self.share(float(rows["idle_ns"].sum()))


@dataclass(frozen=True)
class Proposed:
    p: float
    s: float
    evidence: dict[str, object]
    model: str


@dataclass(frozen=True)
class TraceFix:
    id: str
    title: str
    how: str
    rule: Callable[[TraceEvidence, TraceModel], Proposed | None]

    def recommendation(self, proposed: Proposed) -> Recommendation:
        return Recommendation(
            id=self.id,
            stage="trace",
            estimated_speedup=amdahl(proposed.p, proposed.s),
            p=proposed.p,
            s=proposed.s,
            ceiling=ceiling(proposed.p),
            title=self.title,
            how=self.how,
            evidence=proposed.evidence,
            model=proposed.model,
        )


def _low_precision(ev: TraceEvidence, m: TraceModel) -> Proposed | None:
    if not ev.gpu_bound or ev.kernels.empty:
        return None
    matrix = ev.kernels[ev.kernels["family"].isin(["gemm", "conv"])]
    wide = matrix[matrix["precision"].isin(["fp32", "tf32"])]
    if wide.empty:
        return None
    p = ev.share(float(wide["dur_ns"].sum()))
    return Proposed(
        p, m.low_precision,
        {"fp32_tf32_matrix_share": round(p, 4),
         "precisions": wide["precision"].astype(str).value_counts().to_dict()},
        f"Amdahl on the FP32/TF32 GEMM and convolution time, s = {m.low_precision:g}",
    )  # fmt: skip


def _fusion(ev: TraceEvidence, m: TraceModel) -> Proposed | None:
    if not ev.gpu_bound or ev.kernels.empty:
        return None
    k = ev.kernels.sort_values(["stream", "ts_ns"], kind="stable")
    memory = k["family"].isin(_MEMORY_BOUND).to_numpy()
    same_stream = (k["stream"] == k["stream"].shift(1)).to_numpy(dtype=bool, na_value=False)
    follows = pd.Series(memory).shift(1, fill_value=False).to_numpy() & same_stream
    new_run = memory & ~follows
    runs = int(new_run.sum())
    if runs == 0:
        return None
    chain = float(memory.sum()) / runs  # memory-bound kernels in a row, on average
    if chain < 1.5:
        return None
    p = ev.share(float(k.loc[memory, "dur_ns"].sum()))
    return Proposed(
        p, chain, {"memory_bound_share": round(p, 4), "mean_chain": round(chain, 2)},
        f"Amdahl on the memory-bound kernels' time, s = the mean chain of them in a row "
        f"({chain:.1f}): fused, a chain reads and writes its data once",
    )  # fmt: skip


def _fused_attention(ev: TraceEvidence, m: TraceModel) -> Proposed | None:
    if not ev.gpu_bound or ev.kernels.empty:
        return None
    if (ev.kernels["family"] == "attention").any():
        return None  # already fused somewhere: the model uses SDPA/flash
    softmax = ev.kernels[ev.kernels["family"] == "softmax"]
    if softmax.empty:
        return None
    p = ev.share(float(softmax["dur_ns"].sum()))
    return Proposed(
        p, m.fused_attention, {"softmax_share": round(p, 4)},
        f"Amdahl on the softmax kernels' time, s = {m.fused_attention:g}",
    )  # fmt: skip


def _removes_idle(cause: str, what: str) -> Callable[[TraceEvidence, TraceModel], Proposed | None]:
    def rule(ev: TraceEvidence, m: TraceModel) -> Proposed | None:
        p = ev.idle_share(cause)
        if p <= 0:
            return None
        return Proposed(
            p, math.inf, {f"{cause}_idle_share": round(p, 4)},
            f"the GPU's idle time {what} removed (Amdahl's ceiling on it: an upper bound)",
        )  # fmt: skip

    return rule


def _cuda_graphs(ev: TraceEvidence, m: TraceModel) -> Proposed | None:
    """The GPU's idle time in launch calls and in the framework's dispatch, shrunk to a
    graph's per-kernel cost at each of those gaps."""
    rows = ev.idle_by_cause[ev.idle_by_cause["cause"].isin(["launch", "framework"])]
    idle, gaps = float(rows["idle_ns"].sum()), int(rows["gaps"].sum())
    if idle <= 0 or gaps == 0:
        return None
    s = idle / max(gaps * m.graph_gap_ns, 1.0)
    return Proposed(
        ev.share(idle), s, {"launch_idle_share": round(ev.share(idle), 4), "gaps": gaps},
        f"Amdahl on the idle time in launches and the framework's dispatch ({gaps:,} gaps), "
        f"each gap shrunk to a graph's {m.graph_gap_ns:g} ns: an upper bound (dynamic "
        "shapes or Python between the ops can keep the model from being captured)",
    )  # fmt: skip


def _pinned(ev: TraceEvidence, m: TraceModel) -> Proposed | None:
    if ev.copies.empty:
        return None
    staged = ev.copies[ev.copies["host_memory"] == "pageable"]
    if staged.empty:
        return None
    p = ev.share(float(staged["dur_ns"].sum()))
    return Proposed(
        p, m.pinned_copies, {"pageable_copy_share": round(p, 4), "copies": len(staged)},
        f"Amdahl on the pageable copies' GPU time, s = {m.pinned_copies:g}",
    )  # fmt: skip


def _model_stage(span_ops: pd.DataFrame) -> pd.Series | None:
    """The span that holds the model: of those holding at least half the time in ops
    that any span holds (a request holds its model's ops, and so does the model's own
    stage), the one with the least time of its own -- the tightest around the ops."""
    if span_ops.empty or span_ops["in_ops_ns"].max() <= 0:
        return None
    holding = span_ops[span_ops["in_ops_ns"] >= 0.5 * span_ops["in_ops_ns"].max()]
    return holding.sort_values(["range_ns", "name"]).iloc[0]


def _compiled_graph(ev: TraceEvidence, m: TraceModel) -> Proposed | None:
    """CPU inference only (no kernels): on a GPU the Python between ops is the launch
    gap, which ``cuda_graphs`` takes. The model stage's time outside its ops -- Python
    between them: module calls, the forward's own code, the framework's glue -- goes."""
    if len(ev.kernels):
        return None
    stage = _model_stage(ev.span_ops)
    if stage is None:
        return None
    glue = float(stage["range_ns"] - stage["in_ops_ns"])
    # the profiler's cost lies inside the ops' intervals: it shortens the ops, not the
    # Python between them, so the glue needs nothing taken off
    p = ev.thread_share(glue, int(stage["tid"]))
    if p <= 0:
        return None
    return Proposed(
        p, math.inf,
        {"stage": str(stage["name"]), "spans": int(stage["spans"]), "tid": int(stage["tid"]),
         "stage_glue_share": round(glue / float(stage["range_ns"]), 4),
         "glue_share": round(float(p), 4)},
        f"the time of {stage['name']} outside its ops (the Python between them) removed, "
        "nothing else: a graph also runs the ops with less per-op cost and folds some, "
        "which this leaves out",
    )  # fmt: skip


def _kv_cache(ev: TraceEvidence, m: TraceModel) -> Proposed | None:
    found = ev.prefix
    if found is None:
        return None
    # the steps' times are already less the profiler's cost of their ops (analyzers.ops)
    p = min(1.0, ev.thread_share(float(sum(found.step_ns)), found.tid))
    return Proposed(
        p, found.speedup,
        {"op": found.op, "shape": found.shape, "steps": found.steps,
         "per_token_us": round(found.per_token_ns / 1e3, 2)},
        "Amdahl on the decoding steps' time, s = their time over a + b*T0 for the prompt "
        "and a + b a step after (a, b fitted on the steps: analyzers.ops)",
    )  # fmt: skip


TRACE_FIXES: tuple[TraceFix, ...] = (
    TraceFix(
        "fp16", "Run the FP32 matrix work in BF16/FP16",
        "Autocast the forward (BF16 needs no loss scaling; keep FP32 where accuracy asks):\n"
        "    with torch.autocast('cuda', dtype=torch.bfloat16):\n"
        "        out = model(batch)\n"
        "or keep the weights in BF16 for inference: model = model.to(torch.bfloat16)",
        _low_precision,
    ),
    TraceFix(
        "kernel_fusion", "Fuse the chains of memory-bound kernels",
        "Let Inductor fuse element-wise, normalisation and reduction chains:\n"
        "    model = torch.compile(model)\n"
        "(the first calls compile; warm it up before serving)",
        _fusion,
    ),
    TraceFix(
        "fused_attention", "Use fused attention (SDPA / FlashAttention)",
        "Replace the explicit softmax(q @ k.transpose(-2, -1) / scale) @ v with:\n"
        "    from torch.nn.functional import scaled_dot_product_attention\n"
        "    y = scaled_dot_product_attention(q, k, v, is_causal=True)\n"
        "(Hugging Face: attn_implementation='sdpa' or 'flash_attention_2')",
        _fused_attention,
    ),
    TraceFix(
        "cuda_graphs", "Replay the launches with CUDA graphs",
        "Capture the model's launches once and replay them (static shapes: pad or bucket):\n"
        "    model = torch.compile(model, mode='reduce-overhead')\n"
        "or by hand: g = torch.cuda.CUDAGraph(); with torch.cuda.graph(g): out = model(x)",
        _cuda_graphs,
    ),
    TraceFix(
        "dataloader_workers", "Load the next batch while the GPU works",
        "Move loading and decoding to worker processes that prefetch:\n"
        "    loader = DataLoader(dataset, batch_size=..., num_workers=4,\n"
        "                        pin_memory=True, persistent_workers=True)",
        _removes_idle("input", "waiting on the data loader"),
    ),
    TraceFix(
        "pinned_copies", "Copy from pinned memory, without blocking",
        "Stage host tensors in page-locked memory and copy asynchronously:\n"
        "    batch = batch.pin_memory()  # or DataLoader(..., pin_memory=True)\n"
        "    batch = batch.to('cuda', non_blocking=True)",
        _pinned,
    ),
    TraceFix(
        "inference_runtime", "Run the model as one compiled graph, not op by op from Python",
        "Trace the forward once into a graph that runs without the interpreter between "
        "ops (check its outputs against eager first):\n"
        "    with torch.no_grad():\n"
        "        graph = torch.jit.freeze(torch.jit.trace(model.eval(), example))\n"
        "or model = torch.compile(model), or export to ONNX Runtime\n"
        "(torch.onnx.export(model, example, 'model.onnx'); onnxruntime.InferenceSession)",
        _compiled_graph,
    ),
    TraceFix(
        "kv_cache", "Cache the keys and values instead of re-running the prefix",
        "Keep each layer's keys and values and run every step on the new token only:\n"
        "    out = model(input_ids, past_key_values=past, use_cache=True)  # Hugging Face\n"
        "    past = out.past_key_values",
        _kv_cache,
    ),
)  # fmt: skip


def trace_recommendations(
    ev: TraceEvidence, model: TraceModel = TRACE_MODEL
) -> list[Recommendation]:
    """Every fix of the catalog the evidence proposes, worth ``min_speedup`` or more,
    best first."""
    out = []
    for fix in TRACE_FIXES:
        proposed = fix.rule(ev, model)
        if proposed is None:
            continue
        rec = fix.recommendation(proposed)
        if rec.estimated_speedup >= model.min_speedup:
            out.append(rec)
    return sorted(out, key=lambda r: r.estimated_speedup, reverse=True)
