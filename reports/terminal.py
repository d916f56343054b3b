"""Terminal renderer: the run summary as plain text for the end of ``probe run``."""

from __future__ import annotations

from analyzers.summary import RunSummary

__all__ = ["render_summary"]


def _bytes(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(n) < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GiB"


def _bar(share: float, width: int = 20) -> str:
    filled = round(max(0.0, min(1.0, share)) * width)
    return "█" * filled + "·" * (width - filled)


def render_summary(s: RunSummary, *, max_threads: int = 8) -> str:
    lines: list[str] = []
    status = "?" if s.exit_status is None else str(s.exit_status)
    lines.append(f"probe: {' '.join(s.command)}")
    lines.append(
        f"  wall {s.wall_s:.2f} s · process CPU {s.process_cpu_s:.2f} s"
        f" (native threads {s.native_cpu_s:.2f} s) · peak RSS {_bytes(s.peak_rss_bytes)}"
        f" · exit {status} ({s.ended_by}) · GPU {s.gpu}"
    )
    if s.states:
        lines.append("")
        lines.append(f"Where thread time went ({s.sampled_s:.2f} s sampled across threads):")
        for st in s.states:
            where = f"  {st.top_call}" if st.top_call else ""
            lines.append(f"  {st.state:<10} {_bar(st.share)} {st.share:6.1%}{where}")
    else:
        lines.append("")
        lines.append("No stack samples (the target ended before the first sampling interval).")
    if s.threads:
        lines.append("")
        lines.append("Threads (sampled time, CPU time):")
        lines.extend(
            f"  {t.name[:28]:<28} {t.sampled_s:8.2f} s {t.cpu_s:8.2f} s CPU"
            f"  ({t.on_cpu_share:.0%} on-CPU)"
            for t in s.threads[:max_threads]
        )
        if len(s.threads) > max_threads:
            lines.append(f"  … and {len(s.threads) - max_threads} more")
    if s.top_functions:
        lines.append("")
        lines.append("Top functions by on-CPU time (leaf frames; hottest line):")
        lines.extend(
            f"  {f.cpu_share:6.1%}  {f.cpu_s:7.2f} s  {f.function}  {f.location}"
            for f in s.top_functions
        )
    if s.stages:
        lines.append("")
        lines.append("Spans (count, total, mean, p95):")
        lines.extend(
            f"  {st.category:<8} {st.name[:32]:<32} {st.count:>7} {st.total_s:8.2f} s"
            f" {st.mean_ms:9.2f} ms {st.p95_ms:9.2f} ms"
            for st in s.stages
        )
    lines.extend(f"note: {note}" for note in s.notes)
    lines.append("")
    lines.append(f"Run directory: {s.run_dir}")
    return "\n".join(lines)
