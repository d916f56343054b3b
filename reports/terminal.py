"""Terminal renderer: the verdict at the end of ``probe run`` / ``probe analyze``, and diffs.

The verdict: the primary limit (kind, stage, share), the top three recommendations with
their estimated speedups, a leak if one was found, and where the files are.
"""

from __future__ import annotations

import math

from probe.analyzers.diagnosis import Diagnosis
from probe.analyzers.diff import Comparison

__all__ = ["render_diff", "render_verdict"]


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


def render_verdict(
    d: Diagnosis,
    *,
    run_dir: str = "",
    written: tuple[str, ...] = ("diagnosis.json",),
    max_stages: int = 6,
) -> str:
    run = d.run
    lines = [f"probe: {d.primary['summary']}"]
    facts = [f"wall {run['wall_s']:.2f} s"]
    if run["requests"]:
        lat = run["latency_ms"]
        facts.append(f"{run['requests']} requests, {run['throughput_per_s']:.1f}/s")
        facts.append(f"latency p50 {lat['p50']:.1f} ms, p99 {lat['p99']:.1f} ms")
    facts.append(f"CPU {run['process_cores']:.2f} of {run['cpu_count']} cores")
    facts.append("GPU" if run["gpu"] else "no GPU")
    lines.append("  " + " · ".join(facts))
    if d.primary["kind"] != "none":
        lines.append(
            f"  limit: {d.primary['kind']}/{d.primary['subkind']} in "
            f"{d.primary['stage']} ({d.primary['share']:.0%}, confidence "
            f"{d.primary['confidence']:.0%})"
        )
    stages = d.breakdown.stages
    if not stages.empty:
        label = "request path" if run["requests"] else "sampled time"
        lines.append("")
        lines.append(f"Where the time goes (share of {label}; on-CPU / top wait):")
        shown = stages[stages["category"] != "request"] if run["requests"] else stages
        for name, row in shown.head(max_stages).iterrows():
            waits = {
                r: row[f"wait_{r}"]
                for r in ("network", "disk", "sleep", "lock", "subprocess", "gpu_sync", "gil")
            }
            top = max(waits, key=lambda r: waits[r])
            wait = f", {top} {waits[top]:.0%}" if waits[top] >= 0.05 else ""
            lines.append(
                f"  {str(name)[:28]:<28} {_bar(row['path_share'])} {row['path_share']:6.1%}"
                f"   on-CPU {row['cpu_share']:.0%}{wait}"
            )
    if d.recommendations:
        lines.append("")
        lines.append("Recommendations (estimated end-to-end speedup, ceiling):")
        for i, r in enumerate(d.recommendations[:3], 1):
            if r.id == "fix_leak":
                lines.append(f"  {i}. [{r.id}] {r.title}")
            else:
                lines.append(
                    f"  {i}. [{r.id}] {r.title}: {_x(r.estimated_speedup)}"
                    f" (p={r.p:.2f}, s={_x(r.s)}, ceiling {_x(r.ceiling)})"
                )
        best = d.recommendations[0]
        lines.append("")
        lines.append(f"How ({best.id}):")
        lines.extend(f"  {line}" for line in best.how.splitlines())
    elif d.primary["kind"] != "none":
        lines.append("")
        lines.append("No fix estimated to buy 1.25× or more.")
    if d.leak.detected:
        lines.append("")
        lines.append(
            f"Leak: memory grows {_bytes(d.leak.slope_bytes_per_s)}/s "
            f"(confidence {d.leak.confidence:.0%})"
        )
        lines.extend(f"  +{_bytes(s['grew_bytes'])}  {s['site']}" for s in d.leak.top_sites[:3])
    lines.extend(f"note: {n}" for n in d.notes)
    if run_dir:
        lines.append("")
        lines.append(f"Run directory: {run_dir}  ({', '.join(written)})")
    return "\n".join(lines)


def render_diff(c: Comparison, *, name_a: str = "A", name_b: str = "B") -> str:
    lines = [f"probe diff: {name_a} → {name_b}"]
    if c.throughput_a is not None and c.throughput_b is not None:
        lines.append(
            f"  throughput   {c.throughput_a:9.1f}/s → {c.throughput_b:9.1f}/s   "
            f"realized {_x(c.throughput_speedup)}"
        )
    if c.latency_p50_a_ms is not None and c.latency_p50_b_ms is not None:
        lines.append(
            f"  latency p50  {c.latency_p50_a_ms:8.2f} ms → {c.latency_p50_b_ms:8.2f} ms   "
            f"realized {_x(c.latency_speedup)}"
        )
    if c.predicted is not None:
        how = "as given" if c.matched_by == "given" else "the top recommendation"
        lines.append(
            f"  predicted    {_x(c.predicted)} for {' + '.join(c.applied)} ({how});"
            + (f" off by {c.error:.0%}" if c.error is not None else "")
        )
    else:
        lines.append("  predicted    — (RUN_A's diagnosis has no recommendation to compare)")
    if c.stages:
        lines.append("")
        lines.append("  per request, by stage:")
        for s in c.stages:
            a = "—" if s.a_ms_per_request is None else f"{s.a_ms_per_request:9.2f} ms"
            b = "—" if s.b_ms_per_request is None else f"{s.b_ms_per_request:9.2f} ms"
            lines.append(f"    {s.stage[:28]:<28} {a:>12} → {b:>12}   {_x(s.speedup)}")
    lines.extend(f"note: {n}" for n in c.notes)
    return "\n".join(lines)
