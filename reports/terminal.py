"""Terminal renderer: the verdict at the end of ``probe run`` / ``probe analyze``, and diffs.

``Verdict.from_analysis(analysis)`` gathers what the verdict says as plain data -- the
primary limit, the run's figures, where the time goes, the top three recommendations
with their estimated speedups and the best one's how-to, a leak if one was found, the
notes -- and ``render()`` lays it out. ``DiffText.from_comparison`` does the same for
``probe diff``.

Every line goes through ``printable``: names in the verdict come from the profiled
service, and a stage named ``"\\x1b[2J…"`` must not clear the user's terminal, nor a
right-to-left override reorder what they read.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from probe.analyzers.leaks.words import what_holds
from probe.analyzers.vocabulary import WAITS, confidence_words, speedup_range_words
from probe.printable import printable, shown_path
from probe.reports.batching import batching_lines
from probe.reports.host_ops import host_op_lines

if TYPE_CHECKING:
    from probe.analyzers.analysis import Analysis
    from probe.analyzers.capacity import Capacity
    from probe.analyzers.diagnosis import Diagnosis
    from probe.analyzers.diff import Comparison
    from probe.analyzers.recommendations import Recommendation

__all__ = [
    "DiffText",
    "Verdict",
    "advice_lines",
    "head_lines",
    "limit_text",
    "recommendation_line",
    "recommendation_rows",
    "span_time_lines",
]


def _bytes(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(n) < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GiB"


def _x(value: float | None) -> str:
    if value is None:
        return "—"
    return "∞" if not math.isfinite(value) else f"{value:.2f}×"


def _bar(share: float, width: int = 20) -> str:
    filled = round(max(0.0, min(1.0, share)) * width)
    return "█" * filled + "·" * (width - filled)


@dataclass(frozen=True)
class StageLine:
    name: str
    path_share: float
    cpu_share: float
    top_wait: str  # the largest named wait, "" under 5% of the stage
    wait_share: float


@dataclass(frozen=True)
class Verdict:
    format: ClassVar[str] = "text"
    filename: ClassVar[str] = "verdict.txt"
    max_stages: ClassVar[int] = 6

    summary: str
    facts: list[str]
    limit: str  # "" when nothing was judged
    stage_basis: str  # what the shares are of
    stages: list[StageLine]
    recommendations: list[dict[str, Any]]  # the top three (figures unrounded)
    how: tuple[str, str] | None  # (id, how-to) of the best
    leak: dict[str, Any] | None  # when one was found
    notes: list[str] = field(default_factory=list)
    torch: list[str] = field(default_factory=list)  # the torch.profiler windows' lines
    endpoints: list[str] = field(default_factory=list)  # a served app's, one line each
    minor: list[str] = field(default_factory=list)  # fixes under the bar: "id 1.21×"

    @classmethod
    def from_analysis(cls, analysis: Analysis) -> Verdict:
        return cls.from_diagnosis(analysis.diagnosis)

    @classmethod
    def from_diagnosis(cls, d: Diagnosis) -> Verdict:
        run, primary = d.run, d.primary
        best = d.recommendations[0] if d.recommendations else None
        return cls(
            summary=primary["summary"],
            facts=_facts(run),
            limit=limit_text(primary, where=primary["stage"]),
            stage_basis="request path"
            if run["requests"] and run.get("source") == "spans"
            else "sampled time",
            stages=_stage_lines(d, cls.max_stages),
            recommendations=recommendation_rows(d.recommendations),
            how=(best.id, best.how) if best is not None else None,
            # a leak and an open question are shown; "no leak" is the quiet default
            leak=None
            if d.leak.state == "no_leak"
            else {
                "state": d.leak.state,
                "slope_bytes_per_s": d.leak.slope_bytes_per_s,
                "bytes_per_request": d.leak.bytes_per_request,
                "confidence": d.leak.confidence,
                "reason": d.leak.reason,
                "settle": d.leak.settle,
                "top_sites": d.leak.top_sites[:3],
                "growing_types": d.leak.growing_types[:3],
                "small_objects_share": d.leak.small_objects_share,
                "malloc_share": d.leak.malloc_share,
                "piling_up": d.leak.piling_up,
            },
            notes=[n for n in d.notes if not n.startswith("torch.profiler: ")],
            torch=_torch_lines(d),
            endpoints=_endpoint_lines(d)
            + capacity_lines(d.capacity)
            + batching_lines(d.batching.to_dict() if d.batching is not None else None),
            minor=_minor_lines(d),
        )

    @classmethod
    def of_nothing_to_judge(cls, document: dict[str, Any]) -> Verdict:
        """The verdict on a run with nothing to judge (``analyzers.empty_run``'s
        document): no stage, no fix; its leak's open question, its notes."""
        leak = document["leak"]
        return cls(
            summary=document["primary"]["summary"],
            facts=_facts(document["run"]),
            limit="",
            stage_basis="sampled time",
            stages=[],
            recommendations=[],
            how=None,
            leak=None if leak["state"] == "no_leak" else leak,
            notes=list(document["notes"]),
        )

    def render(self) -> str:
        lines = head_lines(self.summary, self.facts, self.limit)
        if self.stages:
            lines += ["", f"Where the time goes (share of {self.stage_basis}; on-CPU / top wait):"]
            for s in self.stages:
                wait = f", {s.top_wait} {s.wait_share:.0%}" if s.top_wait else ""
                lines.append(
                    f"  {s.name[:28]:<28} {_bar(s.path_share)} {s.path_share:6.1%}"
                    f"   on-CPU {s.cpu_share:.0%}{wait}"
                )
        lines += self.endpoints
        lines += self.torch
        lines += advice_lines(
            self.recommendations, self.how, self.limit, speedup="estimated end-to-end speedup"
        )
        if self.minor:
            compound = "they compound with the fixes above; " if self.recommendations else ""
            lines += [
                "",
                f"{'Also proposed' if self.recommendations else 'Proposed'}, under 1.25× "
                f"alone ({compound}`probe diff --applied` takes them): {', '.join(self.minor)}",
            ]
        if self.leak is not None:
            lines += ["", *_leak_lines(self.leak)]
        lines += [f"note: {n}" for n in self.notes]
        return printable("\n".join(lines))


def _minor_lines(d: Diagnosis) -> list[str]:
    """The fixes under the bar, "id 1.05x"; one whose id a listed fix also has names its
    stage ("vectorize_python in main (pool_score.py) 1.05x"): the same id for a stage the
    verdict did not name read as that fix again."""
    listed = Counter(r.id for r in (*d.recommendations, *d.minor_recommendations))
    return [
        f"{r.id}{f' in {r.stage}' if listed[r.id] > 1 and r.stage else ''} "
        f"{_x(r.estimated_speedup)}"
        for r in d.minor_recommendations
    ]


# a request's phases as the verdict names them (analyzers.endpoints: queued is the wait
# for the event loop before the handler, after is the app's work past the answer)
_PHASE_NAMES = {
    "queued": "loop wait",
    "handler": "handler",
    "send": "send",
    "after": "after answer",
    "loop_lag": "worst loop lag",
}


def _phase_lines(table: Any) -> list[str]:
    """Per endpoint, the phases the server and app let probe time (p50 / p99)."""
    lines = []
    for name, row in table.iterrows():
        parts = [
            f"{label} {row[f'{phase}_p50_ms']:.2f} / {row[f'{phase}_p99_ms']:.2f}"
            for phase, label in _PHASE_NAMES.items()
            if f"{phase}_p50_ms" in row and math.isfinite(row[f"{phase}_p50_ms"])
        ]
        if parts:
            lines.append(f"  {str(name)[:30]:<30} " + " · ".join(parts) + " ms")
    return ["", "Request phases (p50 / p99):", *lines] if lines else []


def _endpoint_lines(d: Diagnosis, limit: int = 8) -> list[str]:
    e = d.endpoints
    if e is None:
        return []
    lines = ["", "Endpoints (requests, errors, latency p50/p99, CPU a request, top wait):"]
    waits = [c for c in e.table.columns if c.startswith("wait_") or c == "gil_s"]
    for name, row in e.table.head(limit).iterrows():
        top = max(waits, key=lambda c: row[c]) if waits else ""
        share = row[top] / row["sampled_s"] if top and row["sampled_s"] > 0 else 0.0
        wait = (
            f", {top.removeprefix('wait_').removesuffix('_s')} {share:.0%}" if share >= 0.05 else ""
        )
        mark = "  <- limits throughput" if name == e.limiting else ""
        lines.append(
            f"  {str(name)[:30]:<30} {int(row['requests']):>6} {int(row['errors']):>5} err"
            f"  {row['p50_ms']:7.1f} / {row['p99_ms']:7.1f} ms"
            f"  {row['cpu_ms_per_request']:6.2f} ms CPU{wait}{mark}"
        )
    if len(e.table) > limit:
        lines.append(f"  … {len(e.table) - limit} more in diagnosis.json")
    lines += _phase_lines(e.table.head(limit))
    if e.workers is not None:
        lines += ["", "Workers (requests, errors, latency p50/p99, CPU in the handlers):"]
        for pid, row in e.workers.head(limit).iterrows():
            latency = (
                f"{row['p50_ms']:7.1f} / {row['p99_ms']:7.1f} ms"
                if row["requests"]
                else f"{'served no request':>20}"
            )
            lines.append(
                f"  pid {int(pid):<10} {int(row['requests']):>6} {int(row['errors']):>5} err"
                f"  {latency}  {row['cpu_s']:6.2f} s CPU"
            )
        if len(e.workers) > limit:
            lines.append(f"  … {len(e.workers) - limit} more in diagnosis.json")
    return lines


_STATION_WORDS = {
    "gil": "the GIL (CPU holding the interpreter)",
    "cpu": "the cores",
    "server slots": "the server's slots (requests it takes at once)",
}


def capacity_lines(c: Capacity | None) -> list[str]:
    """A served app's capacity (``analyzers.capacity``): ceiling, knee, SLA, goodput."""
    if c is None:
        return []
    lines = ["", "Capacity (bottleneck law and MVA on the measured demands):"]
    ceiling = (
        f"{c.ceiling_per_s:.1f} requests/s, bound by {_STATION_WORDS.get(c.bound_by, c.bound_by)}"
        if math.isfinite(c.ceiling_per_s)
        else "no ceiling: no request needed CPU"
    )
    lines.append(f"  ceiling      {ceiling}")
    lines.append(
        f"  measured     {c.measured_per_s:.1f} requests/s with {c.measured_in_flight:.1f} in "
        f"flight ({c.headroom():.1f}x headroom)"
    )
    if math.isfinite(c.knee_in_flight):
        lines.append(
            f"  knee         {c.knee_in_flight:.1f} requests in flight: past it latency grows "
            "with every client added, throughput no more"
        )
    demands = ", ".join(
        f"{s.name} {1e3 * s.demand_s:.2f} ms x {s.servers:g}" for s in c.stations if s.demand_s > 0
    )
    lines.append(f"  per request  {demands}; waits {1e3 * c.delay_s:.1f} ms")
    if c.sla_ms is not None:
        if c.clients_at_sla is not None and c.rate_at_sla is not None:
            lines.append(
                f"  SLA p99 {c.sla_ms:g} ms  met up to {c.clients_at_sla} in flight, "
                f"{c.rate_at_sla:.1f} requests/s (predicted)"
            )
        else:
            lines.append(f"  SLA p99 {c.sla_ms:g} ms  met at no load (predicted)")
        if c.goodput_per_s is not None and c.within_sla is not None:
            lines.append(
                f"  goodput      {c.goodput_per_s:.1f} requests/s within the SLA "
                f"({c.within_sla:.1%} of them, as the {c.goodput_from} saw them)"
            )
    lines += [f"  note: {n}" for n in c.notes]
    return lines


def _torch_lines(d: Diagnosis) -> list[str]:
    t = d.torch
    if t is None:
        return []
    shown = next((w for w in t.windows if w["file"] == t.chosen), t.windows[0])
    length = shown["end_s"] - shown["start_s"]
    lines = [
        "",
        f"PyTorch ops ({shown['file']}, {length:.1f} s from {shown['start_s']:.1f} s; "
        f"{len(t.windows)} window(s) in all):",
    ]
    if t.diagnosis.run.get("gpu"):
        lines.append(f"  {t.diagnosis.primary.get('summary', '')}")
        stages = t.diagnosis.stages.head(5).to_dict("records")
        if stages:
            lines.append("  spans in the window (a call: host / GPU time of the work it launched):")
            lines += span_time_lines(stages, indent="    ")
    lines += host_op_lines(t.diagnosis.cpu_to_dict(), rows=3)
    return lines + [f"  note: {n}" for n in t.diagnosis.notes]


def span_time_lines(stages: list[dict[str, Any]], *, indent: str = "  ") -> list[str]:
    """Each span's host time and the GPU time of the work it launched, a call (a trace's
    stage table: ``analyzers.device_time``; its wall times land on whichever call
    synchronises, these on the span that launched the work). The run's verdict and
    ``probe analyze TRACE``'s both print them so."""
    out = []
    for s in stages:
        n = max(int(s["spans"]), 1)
        out.append(
            f"{indent}{str(s['name'])[:36]:<36} x{n:<5} host {s['host_ns'] / n / 1e6:8.3f} ms"
            f"   GPU {s['device_ns'] / n / 1e6:8.3f} ms"
        )
    return out


def _leak_lines(leak: dict[str, Any]) -> list[str]:
    if leak["state"] == "leak":
        per = leak.get("bytes_per_request")
        per_request = f", {_bytes(per)} a request" if per else ""
        _, held = what_holds(leak, brief=True)
        lines = [
            f"Leak: memory grows {_bytes(leak['slope_bytes_per_s'])}/s{per_request} "
            f"(confidence {confidence_words(leak['confidence'])})" + (f", {held}" if held else "")
        ]
    else:
        lines = [
            f"Leak: undetermined: {leak['reason']}.",
            f"  to settle it: {leak['settle']}",
        ]
    lines += [f"  +{_bytes(s['grew_bytes'])}  {s['site']}" for s in leak["top_sites"][:3]]
    lines += [f"  +{t['count_grew']:,} {t['type']} objects" for t in leak["growing_types"][:3]]
    return lines


def _stage_lines(d: Diagnosis, limit: int) -> list[StageLine]:
    stages = d.breakdown.stages
    if stages.empty:
        return []
    shown = stages[stages["category"] != "request"] if d.run["requests"] else stages
    out = []
    for name, row in shown.head(limit).iterrows():
        waits = {r: float(row[f"wait_{r}"]) for r in WAITS}
        top = max(waits, key=lambda r: waits[r])
        out.append(
            StageLine(
                name=str(name),
                path_share=float(row["path_share"]),
                cpu_share=float(row["cpu_share"]),
                top_wait=top if waits[top] >= 0.05 else "",
                wait_share=waits[top],
            )
        )
    return out


def recommendation_rows(recs: list[Recommendation], n: int = 3) -> list[dict[str, Any]]:
    """The first ``n`` recommendations as the verdict shows them."""
    return [
        {
            "id": r.id,
            "title": r.title,
            "scope": r.scope,
            "estimated_speedup": r.estimated_speedup,
            "p": r.p,
            "s": r.s,
            "ceiling": r.ceiling,
            "range": r.evidence.get("speedup_range"),  # what such fixes realised
        }
        for r in recs[:n]
    ]


def limit_text(primary: dict[str, Any], *, where: str = "") -> str:
    """The verdict's "limit:" figure: kind/subkind [in WHERE] (share, confidence); "" when
    nothing was judged."""
    if primary["kind"] == "none":
        return ""
    place = f" in {where}" if where else ""
    return (
        f"{primary['kind']}/{primary['subkind']}{place} "
        f"({primary['share']:.0%}, confidence {confidence_words(primary['confidence'])})"
    )


def with_run_dir(
    verdict: str, run_dir: Path, written: tuple[str, ...] = (), cwd: str | None = None
) -> str:
    """``verdict`` followed by where its run directory is (shown from ``cwd``, else the
    working directory) and the files ``written`` there."""
    files = f"  ({', '.join(written)})" if written else ""
    return verdict + "\n\n" + printable(f"Run directory: {shown_path(run_dir, cwd)}{files}")


def head_lines(summary: str, facts: list[str], limit: str) -> list[str]:
    """A verdict's first lines: the summary, its facts, the limit when one was judged."""
    lines = [f"probe: {summary}", "  " + " · ".join(facts)]
    return lines + [f"  limit: {limit}"] if limit else lines


def advice_lines(
    recommendations: list[dict[str, Any]], how: tuple[str, str] | None, limit: str, *, speedup: str
) -> list[str]:
    """The recommendations (their figures named by ``speedup``), the best one's how-to, or
    the line that says no fix was estimated to pay when a limit was judged."""
    lines: list[str] = []
    if recommendations:
        lines += ["", f"Recommendations ({speedup}, ceiling):"]
        lines += [recommendation_line(i, r) for i, r in enumerate(recommendations, 1)]
    if how is not None:
        lines += ["", f"How ({how[0]}):"]
        lines += [f"  {line}" for line in how[1].splitlines()]
    elif limit:
        lines += ["", "No fix estimated to buy 1.25× or more."]
    return lines


def recommendation_line(i: int, r: dict[str, Any]) -> str:
    if r["scope"] == "memory":
        return f"  {i}. [{r['id']}] {r['title']}"
    stated = speedup_range_words(r.get("range"))
    spread = f"{stated}; " if stated else ""
    return (
        f"  {i}. [{r['id']}] {r['title']}: {_x(r['estimated_speedup'])}"
        f" ({spread}p={r['p']:.2f}, s={_x(r['s'])}, ceiling {_x(r['ceiling'])})"
    )


@dataclass(frozen=True)
class DiffText:
    comparison: dict[str, Any]  # ``Comparison.to_dict()``
    name_a: str = "A"
    name_b: str = "B"

    @classmethod
    def from_comparison(cls, c: Comparison, *, name_a: str = "A", name_b: str = "B") -> DiffText:
        return cls(c.to_dict(), name_a, name_b)

    def render(self) -> str:
        c = self.comparison
        tp, lat, job = c["throughput"], c["latency_p50_ms"], c["job_wall_s"]
        lines = [f"probe diff: {self.name_a} → {self.name_b}"]
        if job["speedup"] is not None:
            lines.append(
                f"  job wall     {job['a']:9.2f} s → {job['b']:9.2f} s    "
                f"realized {_x(job['speedup'])}"
            )
        if tp["a"] is not None and tp["b"] is not None:
            lines.append(
                f"  throughput   {tp['a']:9.1f}/s → {tp['b']:9.1f}/s   realized {_x(tp['speedup'])}"
            )
        if lat["a"] is not None and lat["b"] is not None:
            lines.append(
                f"  latency p50  {lat['a']:8.2f} ms → {lat['b']:8.2f} ms   "
                f"realized {_x(lat['speedup'])}"
            )
        if c["predicted_speedup"] is not None:
            how = {"given": "as given", "sweep": "the batch sweep's advice"}.get(
                c["matched_by"], "the top recommendation"
            )
            lines.append(
                f"  predicted    {_x(c['predicted_speedup'])} for {' + '.join(c['applied'])} "
                f"({how});" + _prediction_error_text(c)
            )
        else:
            lines.append("  predicted    — (RUN_A's diagnosis has no recommendation to compare)")
        if c["stages"]:
            lines += ["", f"  per {c['stages_per']}, by stage:"]
            for s in c["stages"]:
                a, b = s["a_ms"], s["b_ms"]
                a_text = "—" if a is None else f"{a:9.2f} ms"
                b_text = "—" if b is None else f"{b:9.2f} ms"
                lines.append(
                    f"    {s['stage'][:28]:<28} {a_text:>12} → {b_text:>12}   {_x(s['speedup'])}"
                )
        lines += [f"note: {n}" for n in c["notes"]]
        return printable("\n".join(lines))


def _prediction_error_text(c: dict[str, Any]) -> str:
    """How far the realization fell from the prediction: the plain relative error, or,
    for a fix stating a range (a conservative figure), where it fell against that."""
    error, stated = c["relative_error"], c.get("stated_range")
    if error is None:
        return ""
    if not stated:
        return f" off by {error:.0%}"
    span = f"its stated range {stated[0]:.1f}–{stated[1]:.1f}×"
    if not c.get("within_stated_range"):
        return f" outside {span} (off by {error:.0%})"
    held = c.get("held_error") or 0.0
    short = f", short of the figure by {held:.0%}" if held > 0 else ""
    return f" within {span}{short} (a conservative figure; off by {error:.0%})"


def _facts(run: dict[str, Any]) -> list[str]:
    """The verdict's figures line: wall time, requests and latency, CPU, GPU."""
    facts = [f"wall {run['wall_s']:.2f} s"]
    if run["requests"]:
        lat = run["latency_ms"]
        facts.append(f"{run['requests']} requests, {run['throughput_per_s']:.1f}/s")
        facts.append(f"latency p50 {lat['p50']:.1f} ms, p99 {lat['p99']:.1f} ms")
    facts.append(f"CPU {run['process_cores']:.2f} of {_cores_text(run)}")
    facts.append("GPU" if run["gpu"] else "no GPU")
    return facts


def _cores_text(run: dict[str, Any]) -> str:
    """``2 cores``, or what limits them: ``1 core allowed (affinity) of 2``."""
    count, limit = run["cpu_count"], run.get("cpu_limit") or ""
    if not limit:
        return f"{count} cores"
    allowed = float(run.get("cores_allowed") or count)
    return f"{allowed:g} core{'s' if allowed != 1 else ''} allowed ({limit}) of {count}"
