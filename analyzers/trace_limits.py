"""What limits the work in a GPU trace: the GPU itself, or the host that feeds it.

Over the traced window of a device, the GPU is either busy or idle (``gpu_timeline``).
When it is busy more than half the window, the GPU is the limit (``gpu_compute``): the
host keeps ahead of it. Otherwise the host is, and the cause holding most of the idle
time names how: ``launch_bound`` (launch calls, or the framework dispatching the ops
that launch: eager mode's per-op host cost), ``gpu_starved`` (the host's other work:
Python and CPU ops, a data loader, work exposed by a synchronisation; the cause is in the
evidence). A window mostly spent warming up (allocations, module loading, context
creation) is not a steady state, and the verdict says so rather than diagnose it.

Each idle cause and the synchronous copies holding ``finding_share`` of the window or
more are findings of their own, after the primary. Confidence is how clear the split is:
``|busy - idle| / window`` (a window split evenly between the GPU's work and its waits is
no verdict either way), times -- for a host-side limit -- the leading cause's share of the
idle time; the other findings carry the split's clarity too. No other constant: the
shares come from the trace's intervals.
"""

from __future__ import annotations

import pandas as pd

from probe.analyzers.gpu_timeline import GpuTimeline
from probe.analyzers.rules import THRESHOLDS, Finding, Thresholds

__all__ = ["trace_findings"]

# the idle causes and the subkind a host-side limit of that cause is
_SUBKIND_OF_CAUSE = {
    "launch": "launch_bound",
    "framework": "launch_bound",
    "host": "gpu_starved",
    "input": "gpu_starved",
    "sync": "gpu_starved",
    "queued": "gpu_starved",
    "unknown": "gpu_starved",
}


def trace_findings(
    timeline: GpuTimeline, copies: pd.DataFrame, t: Thresholds = THRESHOLDS
) -> list[Finding]:
    """The trace's findings, the primary limit first (the module doc); ``copies`` as
    ``analyzers.copies.read_copies`` gives them. Empty without GPU work."""
    if timeline.devices.empty:
        return []
    window = float(timeline.devices["window_ns"].sum())
    busy = float(timeline.devices["busy_ns"].sum()) / window if window > 0 else 0.0
    causes = timeline.by_cause.set_index("cause")
    idle = causes["idle_ns"].astype("float64")
    clarity = abs(busy - (1.0 - busy))
    evidence = {"busy_share": round(busy, 4), "window_s": round(window / 1e9, 6)}
    findings: list[Finding] = []
    if not timeline.steady:
        warm = float(idle.get("warm_up", 0.0)) / window
        findings.append(
            Finding("gpu", "warm_up", "trace", warm, clarity, "trace_window_warm_up",
                    {**evidence, "warm_up_share": round(warm, 4)})
        )  # fmt: skip
    elif busy > 0.5:
        findings.append(
            Finding("gpu", "gpu_compute", "trace", busy, clarity, "trace_gpu_busy", evidence)
        )
    else:
        host_side = idle.drop(labels=["warm_up"], errors="ignore")
        cause = str(host_side.idxmax())
        lead = float(host_side.max()) / float(host_side.sum()) if host_side.sum() else 0.0
        share = float(host_side.max()) / window
        findings.append(
            Finding("gpu", _SUBKIND_OF_CAUSE[cause], "trace", share, clarity * lead,
                    f"trace_idle_{cause}", {**evidence, "cause": cause,
                                            "cause_share_of_idle": round(lead, 4)})
        )  # fmt: skip
    findings += _secondary(findings[0], idle / window, copies, window, t, clarity)
    return findings


def _secondary(
    primary: Finding,
    idle_share: pd.Series,
    copies: pd.DataFrame,
    window: float,
    t: Thresholds,
    clarity: float,
) -> list[Finding]:
    """Each idle cause, and the synchronous copies, holding ``finding_share`` of the window
    (the primary's own cause aside)."""
    out = []
    for cause, share in idle_share.items():
        if cause == "warm_up" or share < t.finding_share:
            continue
        if primary.evidence.get("cause") == cause:
            continue
        out.append(
            Finding("gpu", _SUBKIND_OF_CAUSE[str(cause)], "trace", float(share), clarity,
                    f"trace_idle_{cause}", {"cause": str(cause)})
        )  # fmt: skip
    if len(copies) and "synchronous" in copies:
        waited = float(copies.loc[copies["synchronous"], "dur_ns"].sum()) / window
        if waited >= t.finding_share:
            out.append(
                Finding("gpu", "transfer", "trace", waited, clarity, "trace_synchronous_copies",
                        {"synchronous_copy_share": round(waited, 4)})
            )  # fmt: skip
    return sorted(out, key=lambda f: f.share, reverse=True)
