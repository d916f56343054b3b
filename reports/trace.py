"""Terminal renderer of a trace's diagnosis (``probe analyze TRACE.json.gz``).

An output with a model of its own, like ``terminal.DiffText``: ``TraceVerdict.
from_trace_diagnosis(d)`` gathers what the verdict says as plain data -- the limit, the
trace's figures, GPU time by kernel family and precision, idle time by cause, the spans'
host and device time side by side, the host's ops and its threads' time between them
(``reports.host_ops``), the top recommendations and the best one's how-to, the
notes -- and ``render()`` lays it out. The JSON document is ``TraceDiagnosis.to_dict()``
made JSON-safe (``reports.json.json_safe``). Every line goes through ``printable``: kernel
and span names come from the traced program.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from probe.reports.host_ops import host_op_lines
from probe.reports.terminal import (
    advice_lines,
    head_lines,
    limit_text,
    printable,
    recommendation_rows,
    span_time_lines,
)

if TYPE_CHECKING:
    from probe.analyzers.trace_diagnosis import TraceDiagnosis

__all__ = ["TraceVerdict"]


def _ms(ns: float) -> str:
    return f"{ns / 1e6:,.2f} ms" if ns < 1e9 else f"{ns / 1e9:,.2f} s"


@dataclass(frozen=True)
class TraceVerdict:
    summary: str
    facts: list[str]
    limit: str
    kernels: list[dict[str, Any]] = field(default_factory=list)
    idle: list[dict[str, Any]] = field(default_factory=list)
    stages: list[dict[str, Any]] = field(default_factory=list)
    host: list[str] = field(default_factory=list)  # the host's ops (reports.host_ops)
    recommendations: list[dict[str, Any]] = field(default_factory=list)
    how: tuple[str, str] | None = None
    notes: list[str] = field(default_factory=list)
    max_rows: int = 6

    @classmethod
    def from_trace_diagnosis(cls, d: TraceDiagnosis) -> TraceVerdict:
        run, primary = d.run, d.primary
        facts = [f"trace {run['trace']}", f"window {_ms(run['wall_s'] * 1e9)}"]
        gpus = run["gpus"]
        facts.append(f"{len(gpus)} GPU ({', '.join(sorted(set(gpus)))})" if gpus else "no GPU")
        if run["kernels"]:
            facts.append(f"{run['kernels']:,} kernels")
        best = d.recommendations[0] if d.recommendations else None
        return cls(
            summary=primary["summary"],
            facts=facts,
            limit=limit_text(primary),
            kernels=d.kernels.head(cls.max_rows).to_dict("records"),
            idle=d.idle.sort_values("idle_ns", ascending=False).to_dict("records"),
            stages=d.stages.head(cls.max_rows).to_dict("records"),
            host=host_op_lines(d.cpu_to_dict(), rows=cls.max_rows),
            recommendations=recommendation_rows(d.recommendations),
            how=(best.id, best.how) if best is not None else None,
            notes=list(d.notes),
        )

    def render(self) -> str:
        lines = head_lines(self.summary, self.facts, self.limit)
        if self.kernels:
            lines += ["", "GPU time by kernel family and precision:"]
            lines += [
                f"  {k['family']:<12} {k['precision']:<8} {k['share']:6.1%}  "
                f"{k['kernels']:>6,} kernels, mean {k['mean_ns'] / 1e3:,.1f} us, "
                f"{k['short_share']:.0%} under 10 us"
                for k in self.kernels
            ]
        if self.idle:
            shown = ", ".join(f"{i['cause']} {i['share']:.1%}" for i in self.idle)
            lines += ["", f"GPU idle by cause (share of the window): {shown}"]
        if self.stages:
            lines += ["", "Spans (a call: host / GPU time of the work it launched):"]
            lines += span_time_lines(self.stages)
        if self.host:
            lines += ["", "Host (CPU ops):", *self.host]
        lines += advice_lines(
            self.recommendations, self.how, self.limit, speedup="estimated speedup of the window"
        )
        lines += [f"note: {n}" for n in self.notes]
        return printable("\n".join(lines))
