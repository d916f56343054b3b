"""What each fix would buy, from a GPU trace's measured shares (issue 15, part 5).

Each entry of the catalog names a fix, the evidence that proposes it and how its gain is
modelled; the gain is Amdahl's law on the traced window: the share ``p`` of the window
the fix touches, made ``s`` times faster. The window is the GPU's busy time plus its idle
time, and the model takes them as taking turns (no overlap):

* GPU-side fixes (lower precision, fusion, fused attention) shorten busy time; they are
  proposed only when the GPU is the limit (``gpu_compute``): while the host paces the
  work, a faster kernel only makes the GPU wait longer. Fused attention is also fewer
  ops to dispatch: where the launches are the limit, its gain is the host's.
* Host-side fixes (CUDA graphs, data-loader workers, pinned copies) remove idle time of
  their cause; ``s`` is infinite where the gap goes (CUDA graphs' estimate is then an
  upper bound, said in its model; the data loader's is what workers that keep up buy,
  and its model says why that is no bound).

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

from probe.analyzers.amdahl import amdahl, ceiling, local_speedup_for
from probe.analyzers.attention import UnfusedAttention
from probe.analyzers.constants import constant
from probe.analyzers.op_breakdown import PAID_OVER_GAP
from probe.analyzers.ops import PrefixFinding
from probe.analyzers.recommendations import MODEL, Recommendation
from probe.analyzers.rules import Finding

__all__ = [
    "TRACE_FIXES",
    "TRACE_MODEL",
    "TraceEvidence",
    "TraceModel",
    "at_the_bar",
    "trace_proposed",
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
    fused_attention_efficiency: float = constant(
        0.5,
        "What share of the GPU's matrix peak a fused attention kernel reaches: "
        "FlashAttention-2 reaches 50-73% of an A100's (Dao, 'FlashAttention-2', 2023, "
        "abstract), FlashAttention-3 75% of an H100's in BF16 (Shah et al., 2024): the low "
        "end. Short sequences reach less (SDPA's cuDNN kernel on 256 tokens, an H200: 28%, "
        "tests/gpu_corpus), which makes the estimate high there",
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
        "compute; applied to the pageable copies' time where the trace gives no pinned "
        "bandwidth to compare (the least speedup: see _pinned).",
    )
    link_share: float = constant(
        0.8,
        "What a pinned copy reaches of the PCIe link's raw rate: the 128b/130b encoding "
        "and the packets' headers take the rest (PCI-SIG: Gen3 8 GT/s, Gen4 16, Gen5 32 a "
        "lane; x16 15.75/31.5/63 GB/s raw). A pinned 38.5 MB copy on an H200 (Gen5) ran "
        "at 55 GB/s, 0.87 of raw (tests/gpu_corpus, copy_pinned).",
    )
    graph_realised_least: float = constant(
        0.74,
        "The least a compiled graph realised of the inference_runtime estimate: six CPU "
        "models, none of them written for the rule (a convnet, a transformer encoder, an "
        "embedding-bag recommender, an LSTM, a wide MLP at batch 64, a deep narrow MLP), "
        "frozen TorchScript against eager in one process, 6-7 runs each on a host of the "
        "CI kind running at about half speed (benchmarks/compiled_graph_gain.py, "
        "2026-11-28): the recommender 0.81-1.04x, the LSTM 0.87-0.91x, the wide MLP "
        "0.89-0.94x (a graph keeps an interpreter of its own between ops); 8 more rounds "
        "the next day (--rounds 8, 2026-11-29): the recommender 0.75-0.95x, the LSTM "
        "0.81-0.92x, the wide MLP 0.89-0.95x. Not covered: the deep MLP's 0.32x that day, "
        "a window that read 8.42x against 2.71x realised, its figure resting on the "
        "profiler's calibrated cost per op (README, 'PyTorch and GPU traces'). With that "
        "cost read off the trace and the bookkeeping between top-level ops out of the "
        "Python (2026-12-07, 3 rounds, the same runs read both ways, the gap ratio at "
        "2.0): 0.75-1.22x over the six, the recommender 0.75-0.83x (0.84-0.99x with the "
        "calibrated cost); 2 more rounds at the ratio measured (1.85, --rounds 2): "
        "0.74-1.20x, the recommender 0.74-0.77x, hence 0.74.",
    )
    graph_realised_most: float = constant(
        1.54,
        "The most, same runs: the transformer 1.14-1.54x, the deep narrow MLP 0.94-1.47x "
        "(small ops ran faster without Python between them), the convnet 1.14-1.31x (its "
        "BatchNorms, which freezing folds into its convolutions). The estimate counts the "
        "Python between the ops only; its own window reads move by up to a third between "
        "runs (the deep MLP: 1.90-3.22x). 8 more rounds (2026-11-29): the transformer "
        "1.22-1.50x, the deep MLP 0.83-1.51x, the convnet 1.15-1.27x. With the cost read "
        "off the trace (2026-12-07, 3 rounds): the transformer 1.06-1.22x (1.43-1.69x with "
        "the calibrated cost, the same runs), the deep MLP 1.02-1.16x (1.02-1.27x), the "
        "convnet 1.13-1.18x (1.14-1.20x); kept at the wider range of the earlier sittings.",
    )
    min_speedup: float = constant(
        MODEL.min_speedup,
        "The same bar as a run's recommendations (analyzers.recommendations.Model): "
        "gains below it are within the estimate's own error.",
    )


TRACE_MODEL = TraceModel()

# Dense peak TFLOPS by compute capability (NVIDIA's datasheets), FP32 (SIMT), TF32 and
# BF16/FP16 tensor cores: what FP32 matrix work gains in TF32 or BF16 is bounded by these
# ratios. One product of each capability, the one with the lowest ratios where several
# share it. A GPU not listed takes the lowest ratios of all (2x, 4x): a guess on the safe
# side, said in the model.
PEAK_TFLOPS: dict[tuple[int, int], tuple[str, float, float | None, float]] = {
    (7, 0): ("V100 SXM2: FP32 15.7, FP16 tensor 125", 15.7, None, 125.0),
    (7, 5): ("T4: FP32 8.1, FP16 tensor 65", 8.1, None, 65.0),
    (8, 0): ("A100 SXM: FP32 19.5, TF32 156, BF16 312", 19.5, 156.0, 312.0),
    (8, 6): ("A10: FP32 31.2, TF32 62.5, BF16 125", 31.2, 62.5, 125.0),
    (8, 9): ("L4: FP32 30.3, TF32 60, BF16 121", 30.3, 60.0, 121.0),
    (9, 0): ("H100 SXM: FP32 67, TF32 494.7, BF16 989.4 (the H200: the same chip)",
             67.0, 494.7, 989.4),
}  # fmt: skip
_UNLISTED = ("a GPU not in the table: the lowest ratios of those listed", 1.0, 2.0, 4.0)


def peak_ratios(capability: tuple[int, int] | None) -> tuple[float | None, float, str]:
    """(TF32 over FP32 -- None where the GPU has no TF32 --, BF16/FP16 over FP32, the
    datasheet figures they come from) for a GPU of this compute capability."""
    source, fp32, tf32, half = PEAK_TFLOPS.get(capability or (0, 0), _UNLISTED)
    return (tf32 / fp32 if tf32 else None), half / fp32, source


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
    # (op_breakdown.profiler_op_cost_ns, read off the trace's ops)
    profiler_ns: dict[int, float] = field(default_factory=dict)
    # by thread: the window's time it spent in collections outside its ops (a run's full
    # ones, or those a trace recorded itself: op_breakdown.paused_outside_ops): a run's
    # collections are a share of the run (torch_windows), not of the window
    paused_ns: dict[int, float] = field(default_factory=dict)
    # the profiler's cost per op it took off (op_breakdown.profiler_op_cost_ns)
    op_cost_ns: float = 0.0
    # the GPU's (computeMajor, computeMinor), from the trace's deviceProperties
    capability: tuple[int, int] | None = None
    # attention computed op by op, found by its shapes (analyzers.attention)
    attention: UnfusedAttention | None = None

    @property
    def gpu_bound(self) -> bool:
        return bool(self.findings) and self.findings[0].subkind == "gpu_compute"

    @property
    def launch_bound(self) -> bool:
        return bool(self.findings) and self.findings[0].subkind == "launch_bound"

    def share(self, ns: float) -> float:
        return ns / self.window_ns if self.window_ns > 0 else 0.0

    def thread_share(self, ns: float, tid: int) -> float:
        """``ns`` of work on thread ``tid``, already less the profiler's cost in its ops,
        over the window as that thread runs unprofiled: the window less that same cost,
        and less the collections it waited out (``paused_ns``). Over the raw window, a
        decoder's steps with the profiler's cost taken off (~0.9 us on each of ~27,000 ops
        of a 0.1-s window) read as 75% of it where they were 98%, and the KV-cache
        estimate ran 9-17% under the cache's realisation."""
        window = self.window_ns - self.profiler_ns.get(tid, 0.0) - self.paused_ns.get(tid, 0.0)
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


def _matrix_ns(ev: TraceEvidence, precision: str) -> float:
    k = ev.kernels
    return float(k.loc[k["family"].isin(["gemm", "conv"]) & (k["precision"] == precision),
                       "dur_ns"].sum())  # fmt: skip


def _low_precision(ev: TraceEvidence, m: TraceModel) -> Proposed | None:
    """TF32 matrix work at ``low_precision`` (2x); FP32 (SIMT) matrix work at the GPU's
    datasheet ratio of BF16 to FP32 peaks: on an H200, FP32 GEMMs took 11.4 ms a step
    and the same in BF16 1.1 ms (tests/gpu_corpus), where 2x read the step's 5.9x as
    1.75x."""
    if not ev.gpu_bound or ev.kernels.empty:
        return None
    tf32_ns, fp32_ns = _matrix_ns(ev, "tf32"), _matrix_ns(ev, "fp32")
    if tf32_ns + fp32_ns <= 0:
        return None
    _, half_over_fp32, source = peak_ratios(ev.capability)
    after = tf32_ns / m.low_precision + fp32_ns / half_over_fp32
    p = ev.share(tf32_ns + fp32_ns)
    return Proposed(
        p, (tf32_ns + fp32_ns) / after,
        {"fp32_tf32_matrix_share": round(p, 4), "tf32_share": round(ev.share(tf32_ns), 4),
         "fp32_share": round(ev.share(fp32_ns), 4)},
        f"Amdahl on the FP32/TF32 GEMM and convolution time: TF32 at s = "
        f"{m.low_precision:g}, FP32 at s = {half_over_fp32:.1f} (BF16 over FP32 peak, "
        f"{source})",
    )  # fmt: skip


def _tf32(ev: TraceEvidence, m: TraceModel) -> Proposed | None:
    """FP32 matrix work on a GPU with TF32 tensor cores: one line lets cuBLAS/cuDNN use
    them (FP32 to TF32 on an H200: 3.8x a step, tests/gpu_corpus)."""
    if not ev.gpu_bound or ev.kernels.empty:
        return None
    tf32_over_fp32, _, source = peak_ratios(ev.capability)
    fp32_ns = _matrix_ns(ev, "fp32")
    if tf32_over_fp32 is None or fp32_ns <= 0:
        return None
    p = ev.share(fp32_ns)
    return Proposed(
        p, tf32_over_fp32, {"fp32_matrix_share": round(p, 4)},
        f"Amdahl on the FP32 GEMM and convolution time, s = {tf32_over_fp32:.1f} (TF32 "
        f"over FP32 peak, {source})",
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
    """The unfused attention's kernels (``analyzers.attention``: products, scaling,
    softmax, copies) replaced by one kernel doing the products' FLOPs at
    ``fused_attention_efficiency`` of the GPU's peak for their type; without the shapes or
    the GPU's peak, the softmax kernels at ``fused_attention``. Softmax alone read a BF16
    encoder's 1.53x (tests/gpu_corpus) as 1.05x. Where the host paces the GPU, the gain
    is the host's instead (``_fused_attention_on_host``)."""
    if ev.kernels.empty or (ev.kernels["family"] == "attention").any():
        return None  # nothing ran, or already fused somewhere: the model uses SDPA/flash
    if not ev.gpu_bound:
        return _fused_attention_on_host(ev)
    a = ev.attention
    tflops = _peak_tflops(ev.capability, a.dtype) if a is not None else None
    if a is not None and tflops is not None:
        fused_ns = a.flops / (tflops * 1e3 * m.fused_attention_efficiency)  # TFLOP/s: 1e3/ns
        p = ev.share(a.kernel_ns)
        return Proposed(
            p, max(1.0, a.kernel_ns / fused_ns),
            {"attention_share": round(p, 4), "kernels": a.kernels,
             "gflops": round(a.flops / 1e9, 2)},
            f"Amdahl on the unfused attention's kernels ({a.kernels}), replaced by one doing "
            f"its products' {a.flops / 1e9:,.1f} GFLOP at {m.fused_attention_efficiency:g} "
            f"of a {tflops:g}-TFLOPS peak",
        )  # fmt: skip
    softmax = ev.kernels[ev.kernels["family"] == "softmax"]
    if softmax.empty:
        return None
    p = ev.share(float(softmax["dur_ns"].sum()))
    return Proposed(
        p, m.fused_attention, {"softmax_share": round(p, 4)},
        f"Amdahl on the softmax kernels' time, s = {m.fused_attention:g}",
    )  # fmt: skip


def _fused_attention_on_host(ev: TraceEvidence) -> Proposed | None:
    """Launch-bound: the window is the host dispatching ops, and each attention written
    out is several ops (the products, scaling, masking, softmax) where a fused one is one
    call. Their CPU time shrinks to one op's each, at the pattern's mean per op; the GPU's
    busy time bounds the window from below (the host can only get ahead of it)."""
    a = ev.attention
    if a is None or not ev.launch_bound or a.instances == 0 or a.host_ops <= a.instances:
        return None
    p = ev.share(a.host_ns)
    s = a.host_ops / a.instances
    busy = ev.window_ns - float(ev.idle_by_cause["idle_ns"].sum())
    bound = ev.window_ns / busy if busy > 0 else math.inf
    if amdahl(p, s) > bound:
        s = local_speedup_for(p, bound)
    return Proposed(
        p, s,
        {"attention_host_share": round(p, 4), "ops": a.host_ops, "attentions": a.instances},
        f"Amdahl on the host's time in the unfused attention's ops ({a.host_ops} for "
        f"{a.instances} attentions), each attention one call at their mean cost per op; at "
        f"most the GPU's busy time bound ({bound:.2f}x)",
    )  # fmt: skip


def _peak_tflops(capability: tuple[int, int] | None, dtype: str) -> float | None:
    """The listed GPU's dense peak for matrix work in this Kineto input type (BF16/FP16
    tensor cores, else FP32), None for a GPU not listed."""
    if capability not in PEAK_TFLOPS:
        return None
    _, fp32, _, half = PEAK_TFLOPS[capability]
    return half if dtype in ("c10::BFloat16", "c10::Half") else fp32


def _loader_workers(ev: TraceEvidence, m: TraceModel) -> Proposed | None:
    """The GPU's idle time waiting on the data loader, removed: what workers that keep up
    with the GPU buy. Not a bound either way: less where they cannot keep up (fewer idle
    cores than workers); more where the main process loaded slower than a worker does
    (likely torch's intra-op threads on small ops; PyTorch runs a worker's on one) or
    part of the loader's work (collation, pinning) ran outside the idle gaps: the
    corpus's loader pair realised 21.0x in its steady state against 15.2x
    (tests/gpu_corpus)."""
    p = ev.idle_share("input")
    if p <= 0:
        return None
    return Proposed(
        p, math.inf, {"input_idle_share": round(p, 4)},
        "the GPU's idle time waiting on the data loader removed (Amdahl's ceiling on it), "
        "as workers that keep up with the GPU give it: less where they cannot (fewer idle "
        "cores than workers), more where loading in the main process ran slower than a "
        "worker's (as torch's intra-op threads on small ops can make it) or outside the "
        "idle gaps",
    )  # fmt: skip


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


# the host link by compute capability's generation: PCIe Gen3 (Volta, Turing), Gen4
# (Ampere, Ada), Gen5 (Hopper and later), x16, raw GB/s (PCI-SIG)
_LINK_GBPS = ((9, 63.0), (8, 31.5), (0, 15.75))


def _pinned_gbps(ev: TraceEvidence, m: TraceModel, direction: str) -> tuple[float, str] | None:
    """What a pinned copy of this direction reaches: the trace's own fastest pinned copy
    of a megabyte or more, else the link's rate for the GPU's generation."""
    c = ev.copies
    pinned = c[(c["host_memory"] == "pinned") & (c["direction"] == direction)
               & (c["bytes"] >= 1 << 20) & (c["dur_ns"] > 0)]  # fmt: skip
    if len(pinned):
        return float((pinned["bytes"] / pinned["dur_ns"]).max()), "the trace's pinned copies"
    if ev.capability is None:
        return None
    raw = next(gbps for major, gbps in _LINK_GBPS if ev.capability[0] >= major)
    return m.link_share * raw, f"{m.link_share:g} of a {raw:g} GB/s x16 link"


def _pinned(ev: TraceEvidence, m: TraceModel) -> Proposed | None:
    """Pageable copies at the bandwidth a pinned copy reaches; ``pinned_copies`` (2x)
    where that is unknown or less. On an H200 a pageable 38.5 MB upload ran at 6 GB/s
    and the pinned one at 55 (tests/gpu_corpus): 2x read the step's 4.3x as 1.75x."""
    if ev.copies.empty:
        return None
    staged = ev.copies[(ev.copies["host_memory"] == "pageable") & (ev.copies["bytes"] > 0)]
    if staged.empty:
        return None
    ns = float(staged["dur_ns"].sum())
    after, basis = 0.0, []
    for direction, group in staged.groupby("direction", observed=True):
        g_ns = float(group["dur_ns"].sum())
        reach = _pinned_gbps(ev, m, str(direction))
        pinned_ns = float(group["bytes"].sum()) / reach[0] if reach else g_ns / m.pinned_copies
        after += min(g_ns / m.pinned_copies, pinned_ns)
        basis.append(f"{direction} at {reach[0]:.0f} GB/s ({reach[1]})" if reach else
                     f"{direction} at s = {m.pinned_copies:g}")  # fmt: skip
    p = ev.share(ns)
    return Proposed(
        p, ns / after, {"pageable_copy_share": round(p, 4), "copies": len(staged)},
        "Amdahl on the pageable copies' GPU time, each direction's bytes at a pinned "
        f"copy's bandwidth, at least {m.pinned_copies:g}x: " + "; ".join(basis),
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
    # the collections timed inside the stage (the run's, or the trace's own) held the GIL
    # between its ops, and a graph's run collects too: a 99-ms one inside one ``infer``
    # span (1.2 ms of it in ops) read as Python between ops, 3.23x where a graph realised
    # 1.90x (staged_mlp, a clean-clone CI run, 2026-12-06)
    paused = float(stage.get("paused_ns", 0) or 0)
    # each top-level op leaves the profiler's bookkeeping of one op between its interval
    # and its neighbours' (op_breakdown.PAID_OVER_GAP), in the glue: left in, the deep
    # MLP's glue under the profiler (826 us a call) outgrew its whole unprofiled call (704
    # us, probe's spans; /tmp experiment, 2026-11-29), and its figure ran high
    profiler = float(stage.get("top_ops", 0) or 0) * ev.op_cost_ns / PAID_OVER_GAP
    glue = max(float(stage["range_ns"] - stage["in_ops_ns"]) - paused - profiler, 0.0)
    p = ev.thread_share(glue, int(stage["tid"]))
    # all of the thread's window outside ops, or more (ranges nested on one thread,
    # counted twice): not a share this window can give, and Amdahl would say "infinite"
    if not 0 < p < 1:
        return None
    said = amdahl(p, math.inf)
    # what such fixes realised of this figure (benchmarks/compiled_graph_gain.py): a
    # graph also runs small ops faster and folds some, or keeps an interpreter of its own
    least, most = (max(1.0, said * k) for k in (m.graph_realised_least, m.graph_realised_most))
    return Proposed(
        p, math.inf,
        {"stage": str(stage["name"]), "spans": int(stage["spans"]), "tid": int(stage["tid"]),
         "stage_glue_share": round(glue / (float(stage["range_ns"]) - paused), 4),
         "collections_ms": round(paused / 1e6, 3),
         "profiler_ms": round(profiler / 1e6, 3),
         "glue_share": round(float(p), 4),
         "speedup_range": [round(least, 2), round(most, 2)]},
        f"the time of {stage['name']} outside its ops (the Python between them) removed, "
        "nothing else; a graph also runs small ops faster and folds some, or keeps an "
        "interpreter of its own between them: six models realised "
        f"{m.graph_realised_least:g}-{m.graph_realised_most:g}x of this figure "
        f"(benchmarks/compiled_graph_gain.py), {least:.2f}-{most:.2f}x here"
        + (f"; its {paused / 1e6:.1f} ms in garbage collections not counted" if paused else ""),
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
         "per_token_us": round(found.per_token_ns / 1e3, 2),
         "rescaled_steps": found.rescaled_steps, "segments": found.segments},
        "Amdahl on the decoding steps' time, s = their time over a + b*T0 for the prompt "
        "and a + b a step after (a, b fitted on the steps, those the host ran off its usual "
        "speed scaled to it: analyzers.ops)",
    )  # fmt: skip


TRACE_FIXES: tuple[TraceFix, ...] = (
    TraceFix(
        "tf32", "Let the FP32 matrix work run on TF32 tensor cores",
        "One line before the model runs (FP32 storage and accumulation; inputs rounded to\n"
        "TF32's 10-bit mantissa: check the outputs against FP32 first):\n"
        "    torch.set_float32_matmul_precision('high')  # matmuls\n"
        "    torch.backends.cudnn.allow_tf32 = True        # convolutions (the default)",
        _tf32,
    ),
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
        "    y = scaled_dot_product_attention(q, k, v, attn_mask=mask)"
        "  # is_causal=True: a decoder\n"
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
        _loader_workers,
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


def trace_proposed(ev: TraceEvidence, model: TraceModel = TRACE_MODEL) -> list[Recommendation]:
    """Every fix of the catalog the evidence proposes, whatever it is worth, best first."""
    out = []
    for fix in TRACE_FIXES:
        proposed = fix.rule(ev, model)
        if proposed is not None:
            out.append(fix.recommendation(proposed))
    return sorted(out, key=lambda r: r.estimated_speedup, reverse=True)


def at_the_bar(
    every: list[Recommendation], model: TraceModel = TRACE_MODEL
) -> tuple[list[Recommendation], list[Recommendation]]:
    """``every`` split, each in its order: those worth ``min_speedup`` or more, and the
    rest (a run's minor fixes: they compound)."""
    worth = [r for r in every if r.estimated_speedup >= model.min_speedup]
    return worth, [r for r in every if r.estimated_speedup < model.min_speedup]


def trace_recommendations(
    ev: TraceEvidence, model: TraceModel = TRACE_MODEL
) -> list[Recommendation]:
    """Every fix of the catalog the evidence proposes, worth ``min_speedup`` or more,
    best first."""
    return at_the_bar(trace_proposed(ev, model), model)[0]
