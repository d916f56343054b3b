"""``probe load``'s figures as terminal text."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import pandas as pd

from probe.load.figures import LoadFigures
from probe.load.sweep import SweepStep
from probe.printable import printable

__all__ = ["LoadText", "SweepText", "split_lines"]


@dataclass(frozen=True)
class LoadText:
    format: ClassVar[str] = "text"

    figures: LoadFigures

    @classmethod
    def from_figures(cls, figures: LoadFigures) -> LoadText:
        return cls(figures)

    def render(self) -> str:
        f = self.figures
        loop = (
            "open loop, latency from each request's due time"
            if f.mode == "open"
            else ("closed loop")
        )
        lines = [
            f"probe load: {f.total.answered} answers in {f.duration_s:g} s "
            f"({f.total.throughput_per_s:.1f}/s), {f.total.errors} errors; {loop}"
            + (f"; {f.warmup_requests} warm-up requests left out" if f.warmup_requests else ""),
            "",
            f"  {'request':<30} {'sent':>7} {'errors':>6} {'rate/s':>8}   "
            "p50      p90      p99      p99.9    max (ms)",
        ]
        for row in [*f.labels, f.total] if len(f.labels) > 1 else f.labels:
            ms = row.latency_ms
            cells = "".join(
                f"{ms.get(k, float('nan')):8.2f} " for k in ("p50", "p90", "p99", "p99.9", "max")
            )
            lines.append(
                f"  {row.label[:30]:<30} {row.sent:>7} {row.errors:>6} "
                f"{row.throughput_per_s:>8.1f}  {cells}"
            )
        lines += [f"warning: {w}" for w in f.warnings]
        return printable("\n".join(lines))


def split_lines(split: pd.DataFrame) -> list[str]:
    """``analyzers.load_split``'s table: per label, the client's median time on the wire
    beside the server's for the same requests."""
    if split.empty:
        return []
    lines = ["", "Client and server, the same requests (medians, ms):"]
    lines.append(f"  {'request':<30} {'matched':>9} {'client':>8} {'server':>8} {'rest':>8}")
    for label, row in split.iterrows():
        lines.append(
            f"  {str(label)[:30]:<30} {int(row['matched']):>4}/{int(row['sent']):<4} "
            f"{row['client_p50_ms']:8.2f} {row['server_p50_ms']:8.2f} {row['rest_p50_ms']:8.2f}"
        )
    unmatched = int((split["sent"] - split["matched"]).sum())
    if unmatched:
        lines.append(
            f"  {unmatched} answered requests have no server span: not a served app probe "
            "wraps, or --no-http-spans"
        )
    return [printable(line) for line in lines]


@dataclass(frozen=True)
class SweepText:
    """``probe load --sweep``: a line a step, the prediction beside it when given."""

    format: ClassVar[str] = "text"

    steps: list[SweepStep]
    capacity: dict[str, Any] | None = None

    @staticmethod
    def step_line(s: SweepStep) -> str:
        total = s.figures.total
        ms = total.latency_ms
        predicted = (
            f"   predicted {s.predicted_per_s:8.1f}/s {s.predicted_ms:8.2f} ms"
            if s.predicted_per_s is not None and s.predicted_ms is not None
            else ""
        )
        late = f", {s.figures.late} late" if s.figures.late else ""
        return printable(
            f"  {s.step.label():>12}  {total.throughput_per_s:9.1f}/s"
            f"  {ms.get('mean', float('nan')):8.2f} {ms.get('p50', float('nan')):8.2f}"
            f" {ms.get('p99', float('nan')):8.2f} ms  {total.errors:>5} err{late}{predicted}"
        )

    def render(self) -> str:
        lines = [
            f"probe load --sweep: {len(self.steps)} steps",
            "",
            f"  {'step':>12}  {'throughput':>11}  {'mean':>8} {'p50':>8} {'p99':>8}",
        ]
        lines += [self.step_line(s) for s in self.steps]
        best = max(self.steps, key=lambda s: s.figures.total.throughput_per_s)
        lines += [
            "",
            f"measured maximum: {best.figures.total.throughput_per_s:.1f} requests/s "
            f"at {best.step.label()}",
        ]
        capacity = self.capacity or {}
        ceiling = capacity.get("ceiling_per_s")
        if ceiling:
            measured = best.figures.total.throughput_per_s
            off = ceiling / measured - 1 if measured else float("inf")
            lines.append(
                f"predicted ceiling: {ceiling:.1f} requests/s, bound by "
                f"{capacity.get('bound_by')} ({off:+.1%} of the measured maximum)"
            )
        for s in self.steps:
            lines += [f"warning: {s.step.label()}: {w}" for w in s.figures.warnings]
        return printable("\n".join(lines))
