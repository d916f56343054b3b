"""The diagnosis of a torch.profiler/Kineto trace recorded anywhere (``probe analyze
TRACE.json.gz``): the trace's analyses put together in the shape of ``diagnosis.json``.

``diagnose_trace(trace)`` runs every trace analysis -- kernels by family and precision,
the GPU's busy and idle time by cause, copies, each span's host and device time, a
decoder's growing prefix -- then what limits the window (``trace_limits``) and what each
fix would buy (``trace_fixes``). The document keeps ``diagnosis.json``'s keys (``schema``,
``run``, ``primary``, ``findings``, ``recommendations``, ``leak``, ``stages``, ``notes``)
and adds ``source`` ("kineto"), ``gpu`` (the tables behind the verdict) and ``cpu`` (the
host's ops by self time, its threads' time between ops, the growing prefix:
``analyzers.op_breakdown``, ``analyzers.ops``). A trace holds no memory series of the
process, so its leak verdict is undetermined, with what would settle it. A trace without
GPU work keeps the CPU-side analyses and says there is no GPU limit to name.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from probe.analyzers.attention import unfused_attention
from probe.analyzers.copies import copy_breakdown, read_copies
from probe.analyzers.device_time import device_time, device_time_by_name
from probe.analyzers.diagnosis import SCHEMA
from probe.analyzers.gpu_timeline import gpu_timeline
from probe.analyzers.kernels import classify_kernels, kernel_breakdown
from probe.analyzers.leaks import UNDETERMINED, LeakVerdict
from probe.analyzers.op_breakdown import (
    OpBreakdown,
    op_breakdown,
    ops_in_ranges,
    paused_outside_ops,
    recorded_ranges,
)
from probe.analyzers.ops import PrefixFinding, growing_prefix
from probe.analyzers.recommendations import Recommendation
from probe.analyzers.rules import Finding
from probe.analyzers.trace_fixes import (
    TRACE_MODEL,
    TraceEvidence,
    TraceModel,
    at_the_bar,
    trace_proposed,
)
from probe.analyzers.trace_limits import trace_findings
from probe.analyzers.vocabulary import subkind_words
from probe.rundir.kineto import KinetoTrace

__all__ = ["TraceDiagnosis", "diagnose_trace"]

NO_MEMORY_SERIES = LeakVerdict(
    state=UNDETERMINED,
    reason="a trace holds no memory series of the process to judge",
    settle="`probe run` or `probe watch` on the service, which read its memory over time",
)


@dataclass(frozen=True)
class TraceDiagnosis:
    run: dict[str, Any]
    primary: dict[str, Any]
    findings: list[Finding]
    recommendations: list[Recommendation]
    kernels: pd.DataFrame  # GPU time by family and precision
    idle: pd.DataFrame  # idle time by cause
    copies: pd.DataFrame  # copies by direction, host memory, synchronicity
    stages: pd.DataFrame  # host and device time by span name
    leak: LeakVerdict = NO_MEMORY_SERIES
    notes: list[str] = field(default_factory=list)
    # the host's side: op by op and thread by thread, and a decoder's growing prefix
    ops: OpBreakdown | None = None
    prefix: PrefixFinding | None = None
    # fixes proposed but worth under ``min_speedup`` alone (as a run's: they compound,
    # and a run's windows re-estimate them over the run: analyzers.torch_windows)
    minor_recommendations: list[Recommendation] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema": SCHEMA,
            "source": "kineto",
            "run": self.run,
            "primary": self.primary,
            "findings": [f.to_dict() for f in self.findings],
            "recommendations": [r.to_dict() for r in self.recommendations],
            "minor_recommendations": [r.to_dict() for r in self.minor_recommendations],
            "leak": self.leak.to_dict(),
            "stages": _records(self.stages),
            "gpu": {
                "kernels": _records(self.kernels),
                "idle": _records(self.idle),
                "copies": _records(self.copies),
            },
            "cpu": self.cpu_to_dict(),
            "notes": self.notes,
        }

    def cpu_to_dict(self, *, top: int = 30) -> dict[str, Any]:
        """The host side: the ``top`` ops by self time, the threads that ran ops, and a
        decoder's growing prefix (None where no op's sequence grows)."""
        ops = self.ops
        return {
            "ops": _records(ops.ops.head(top)) if ops is not None else [],
            "op_kinds": len(ops.ops) if ops is not None else 0,
            "threads": _records(ops.threads) if ops is not None else [],
            "profiler_op_cost_ns": round(ops.op_cost_ns, 1) if ops is not None else 0.0,
            "growing_prefix": _prefix_dict(self.prefix),
        }


def diagnose_trace(
    trace: KinetoTrace,
    *,
    op_cost_ns: float | None = None,
    model: TraceModel = TRACE_MODEL,
    server_spans: frozenset[str] = frozenset(),
    pauses: pd.DataFrame | None = None,
) -> TraceDiagnosis:
    """``op_cost_ns``: the profiler's own cost per op, see ``analyzers.ops``; None: read
    off the trace's own ops (``op_breakdown.profiler_op_cost_ns``; 0 where it cannot
    be). ``model``: the fixes' constants. ``server_spans``: see ``_stage_ops``.
    ``pauses``: the full collections the run timed in the window (``tid``, ``ts_ns``,
    ``dur_ns`` on the trace's clock), see ``op_breakdown.ops_in_ranges``; None: those
    the trace recorded itself, if any (``_recorded_collections``)."""
    t = trace.tables
    kernels = classify_kernels(t["kernels"], t["ops"])
    copies = read_copies(t["copies"], t["runtime"])
    timeline = gpu_timeline(t["kernels"], t["copies"], t["runtime"], t["ops"], t["annotations"])
    findings = trace_findings(timeline, copies)
    window = float(timeline.devices["window_ns"].sum()) if len(timeline.devices) else 0.0
    ops = op_breakdown(t["ops"], op_cost_ns=op_cost_ns, runtime=t["runtime"])
    op_cost_ns = ops.op_cost_ns  # given, or read off the ops
    prefix = growing_prefix(t["ops"], op_cost_ns)
    if window == 0.0:  # no GPU work: the host's traced span is the window
        window = ops.host_span_ns
    if pauses is None:
        pauses = _recorded_collections(t["python"])
    span_ops = _stage_ops(t["annotations"], ops, server_spans, pauses)
    profiler_ns = {int(r["tid"]): float(r["ops"]) * op_cost_ns for _, r in ops.threads.iterrows()}
    paused_ns = _paused_in_window(ops, pauses)
    evidence = TraceEvidence(
        findings,
        kernels,
        copies,
        timeline.by_cause,
        window,
        prefix,
        span_ops,
        profiler_ns,
        paused_ns,
        op_cost_ns=op_cost_ns,
        capability=compute_capability(trace.meta),
        attention=unfused_attention(t["ops"], t["kernels"]),
    )
    worth, minor = at_the_bar(trace_proposed(evidence, model), model)
    return TraceDiagnosis(
        run=_run_facts(trace, window, timeline.devices, kernels),
        primary=_primary(findings),
        findings=findings,
        recommendations=worth,
        minor_recommendations=minor,
        kernels=kernel_breakdown(kernels),
        idle=timeline.by_cause[timeline.by_cause["idle_ns"] > 0].reset_index(drop=True),
        copies=copy_breakdown(t["copies"], t["runtime"]),
        stages=_stages(t),
        notes=_trace_notes(trace, ops, span_ops, steady=timeline.steady),
        ops=ops,
        prefix=prefix,
    )


def _trace_notes(
    trace: KinetoTrace, ops: OpBreakdown, span_ops: pd.DataFrame, *, steady: bool
) -> list[str]:
    """The reader's notes, and what the trace cannot tell or is not: kernels without
    correlation ids, a CPU model's glue without spans, a window mostly warming up."""
    kernels = trace.tables["kernels"]
    notes = list(trace.notes)
    if len(kernels) and kernels["correlation"].isna().all():
        notes.append(
            "the trace's kernels carry no correlation ids: GPU time cannot be tied to the "
            "calls that launched it (idle gaps' causes and spans' GPU time are unknown)"
        )
    notes += _unranged_glue_note(ops, span_ops, has_gpu=bool(len(kernels)))
    if not steady:
        notes.append(
            "the traced window is mostly warm-up (allocation, module loading, context "
            "creation): profile steps after the first few (torch.profiler's schedule: "
            "wait, warmup, active) for a steady state"
        )
    return notes


def _stage_ops(
    annotations: pd.DataFrame,
    ops: OpBreakdown,
    server_spans: frozenset[str],
    pauses: pd.DataFrame | None,
) -> pd.DataFrame:
    """The host ranges' time in ops (``ops_in_ranges``), the spans probe made around a
    served request and its handler (``server_spans``, by name) left out: they hold the
    request's own pre- and post-processing beside the model, so they tell none of the
    model's Python between ops apart (an undecorated FastAPI route's span read its word
    hashing under the GIL as the model's glue, a compiled graph at 1.6x; embed_api,
    2026-12-05)."""
    host_ranges = annotations[annotations["side"].astype(str) != "gpu"]
    span_ops = ops_in_ranges(host_ranges, ops.top_level, pauses)
    return span_ops[~span_ops["name"].isin(server_spans)].reset_index(drop=True)


# torch.profiler's name for a collection, where the trace was recorded with
# ``experimental_config=_ExperimentalConfig(record_python_gc_info=True)`` and
# ``with_stack=True`` (a ``python_function`` event on the collecting thread; torch 2.13:
# neither alone records them)
_PYTHON_GC = "Python GC"


def _recorded_collections(python: pd.DataFrame) -> pd.DataFrame:
    """The collections a trace recorded itself (``_PYTHON_GC``): young and full alike,
    the event does not say which; a young one is tens of microseconds."""
    if python.empty:
        return pd.DataFrame(columns=["tid", "ts_ns", "dur_ns"])
    gc = python[python["name"].astype(str) == _PYTHON_GC]
    return gc[["tid", "ts_ns", "dur_ns"]].reset_index(drop=True)


def _paused_in_window(ops: OpBreakdown, pauses: pd.DataFrame | None) -> dict[int, float]:
    """By thread: the host's traced span's time it spent in collections (``pauses``)
    outside its ops (``paused_outside_ops``)."""
    top = ops.top_level
    if pauses is None or pauses.empty or top.empty:
        return {}
    tids = ops.threads["tid"].to_numpy()
    start = np.full(len(tids), int(top["ts_ns"].min()))
    end = np.full(len(tids), int((top["ts_ns"] + top["dur_ns"]).max()))
    paused = paused_outside_ops(pauses, top, tids, start, end)
    return {int(t): float(p) for t, p in zip(tids, paused, strict=True)}


def compute_capability(meta: dict[str, Any]) -> tuple[int, int] | None:
    """The first GPU's (computeMajor, computeMinor) in the trace's deviceProperties."""
    for props in meta.get("deviceProperties") or []:
        try:
            return int(props["computeMajor"]), int(props["computeMinor"])
        except (KeyError, TypeError, ValueError):
            continue
    return None


def _unranged_glue_note(ops: OpBreakdown, span_ops: pd.DataFrame, *, has_gpu: bool) -> list[str]:
    """CPU inference with much time outside ops and no span to tell the model's Python
    between ops from the service's own: say what would let a compiled graph's gain be
    estimated. Much: enough that, were it all the model's, removing it would pass the
    recommendations' bar (1 - 1/min_speedup of the thread's time)."""
    if has_gpu or not span_ops.empty or ops.threads.empty:
        return []
    busiest = ops.threads.iloc[0]
    if busiest["gap_share"] < 1 - 1 / TRACE_MODEL.min_speedup:
        return []
    return [
        f"{busiest['gap_share']:.0%} of thread {int(busiest['tid'])}'s traced time is outside any "
        "op (Python, waits), but no span in the window says which of it is the model's: "
        "@probe.stage on the model call (or torch.profiler.record_function around it) lets "
        "probe estimate what running the model as a compiled graph buys"
    ]


def _run_facts(
    trace: KinetoTrace, window: float, devices: pd.DataFrame, kernels: pd.DataFrame
) -> dict[str, Any]:
    props = trace.meta.get("deviceProperties") or []
    gpus = [str(p.get("name")) for p in props if isinstance(p, dict) and p.get("name")]
    return {
        "trace": trace.path.name,
        "events": trace.events,
        "wall_s": round(window / 1e9, 6),
        "requests": None,
        "gpu": bool(len(devices)),
        "gpus": gpus,
        "kernels": len(kernels),
        "busy_share": round(float(devices["busy_ns"].sum()) / window, 4)
        if len(devices) and window > 0
        else None,
    }


def _primary(findings: list[Finding]) -> dict[str, Any]:
    if not findings:
        return {
            "kind": "none",
            "subkind": "",
            "stage": "trace",
            "share": 0.0,
            "confidence": 0.0,
            "summary": "No GPU work in this trace: no GPU limit to name (CPU-side patterns, "
            "if any, are in the recommendations).",
        }
    f = findings[0]
    busy = float(f.evidence.get("busy_share", 0.0))
    if f.subkind == "warm_up":
        summary = f"Not a steady state: {subkind_words(f.subkind)}; no limit named."
    elif f.subkind == "gpu_compute":
        idle = [x for x in findings[1:] if x.evidence.get("cause")]
        why = f", mostly {_CAUSE_WORDS[str(idle[0].evidence['cause'])]}" if idle else ""
        summary = (
            f"GPU-bound: the GPU is busy {busy:.0%} of the traced window; idle {1 - busy:.0%}{why}."
        )
    else:
        cause = _CAUSE_WORDS.get(str(f.evidence.get("cause")), "")
        summary = (
            f"Host-bound: {subkind_words(f.subkind)} -- idle {1 - busy:.0%} of the traced "
            f"window, {f.share:.0%} in {cause}; busy {busy:.0%}."
        )
    return {
        "kind": f.kind,
        "subkind": f.subkind,
        "stage": f.stage,
        "share": round(f.share, 4),
        "confidence": round(f.confidence, 3),
        "summary": summary,
    }


_CAUSE_WORDS = {
    "host": "host work between launches: Python, CPU ops, pre- and post-processing",
    "input": "waiting on the data loader",
    "sync": "host work exposed by synchronisations",
    "launch": "launch calls",
    "framework": "the framework dispatching the model's ops (eager mode's per-op cost)",
    "queued": "work queued behind other streams or events",
    "unknown": "work launched before the trace began",
}


def _stages(t: dict[str, pd.DataFrame]) -> pd.DataFrame:
    """Host and device time by span: the record_function ranges and profiler steps (the
    older schema records them as CPU ops)."""
    ann = t["annotations"]
    spans = [ann[ann["side"] == "cpu"][["name", "tid", "ts_ns", "dur_ns"]]] if len(ann) else []
    ops = t["ops"]
    if len(ops):  # the older schema records record_function ranges as ops
        spans.append(ops[recorded_ranges(ops["name"])][["name", "tid", "ts_ns", "dur_ns"]])
    spans = [s for s in spans if len(s)]
    if not spans:
        return pd.DataFrame(columns=["name", "spans", "host_ns", "device_ns", "launches", "lag_ns"])
    joined = pd.concat(spans, ignore_index=True).drop_duplicates(["name", "tid", "ts_ns"])
    joined["name"] = joined["name"].astype(str)
    per_span = device_time(joined, t["runtime"], t["kernels"], t["copies"])
    return device_time_by_name(per_span)


def _prefix_dict(found: PrefixFinding | None) -> dict[str, Any] | None:
    if found is None:
        return None
    return {
        "op": found.op,
        "shape": found.shape,
        "first_length": found.first_length,
        "steps": found.steps,
        "runs": found.runs,
        "per_step_us": round(found.per_step_ns / 1e3, 2),
        "per_token_us": round(found.per_token_ns / 1e3, 3),
        "steps_ms": round(sum(found.step_ns) / 1e6, 3),
        "speedup": round(found.speedup, 3),
        "rescaled_steps": found.rescaled_steps,
        "segments": found.segments,  # fitted a segment at a time (analyzers.ops); 0: whole
    }


def _records(frame: pd.DataFrame) -> list[dict[str, Any]]:
    out = []
    for row in frame.to_dict("records"):
        record = {}
        for k, v in row.items():
            if hasattr(v, "item"):
                v = v.item()
            if isinstance(v, float) and not math.isfinite(v):
                v = None
            record[str(k)] = v
        out.append(record)
    return out
