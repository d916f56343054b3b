"""Renderer of ``probe check``'s verdict: a table of what held, the regressions against
the baseline with their noise, and the outcome.

An output with a model of its own, like ``terminal.DiffText``: ``GateText.from_results
(checks, regressions, notes)`` gathers plain rows (what tests read, and what ``--json``
prints), ``render()`` lays them out. Names from the service (routes, stages) go through
``printable``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from probe.analyzers.gate import change_text
from probe.printable import printable

if TYPE_CHECKING:
    from probe.analyzers.gate import CheckResult, Regression

__all__ = ["GateText"]


def _value(v: float, unit: str) -> str:
    if not math.isfinite(v):
        return "n/a"
    if unit == "/s":
        return f"{v:,.1f}/s"
    return f"{v * 1e3:,.2f} ms" if v < 10 else f"{v:,.2f} s"


def _without_the_machine(r: Regression) -> dict[str, Any] | None:
    """The slowdown with the wait for a CPU other processes held taken out, where a side
    waited so."""
    if r.without_the_machine is None:
        return None
    slowdown, interval = r.without_the_machine
    return {
        "slowdown": slowdown if math.isfinite(slowdown) else None,
        "interval": list(interval) if interval else None,
    }


@dataclass(frozen=True)
class GateText:
    checks: list[dict[str, Any]]
    regressions: list[dict[str, Any]]
    max_regression: float | None
    notes: list[str] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return all(c["held"] for c in self.checks) and not any(
            r["regressed"] for r in self.regressions
        )

    @classmethod
    def from_results(
        cls,
        checks: list[CheckResult],
        regressions: list[Regression],
        *,
        max_regression: float | None = None,
        notes: list[str] | None = None,
    ) -> GateText:
        rows = [{"check": c.text, "value": c.shown, "held": c.held, "note": c.note} for c in checks]
        regs = [
            {
                "figure": r.figure,
                "baseline": _value(r.baseline, r.unit),
                "value": _value(r.value, r.unit),
                "change": change_text(r.slowdown, r.interval),
                "slowdown": r.slowdown if math.isfinite(r.slowdown) else None,
                "interval": list(r.interval) if r.interval else None,
                "regressed": r.regressed,
                "state": r.state,
                "notes": r.notes,
                "without_the_machine": _without_the_machine(r),
            }
            for r in regressions
        ]
        return cls(rows, regs, max_regression, list(notes or []))

    def to_dict(self) -> dict[str, Any]:
        return {
            "passed": self.passed,
            "checks": self.checks,
            "max_regression": self.max_regression,
            "regressions": self.regressions,
            "notes": self.notes,
        }

    def render(self) -> str:
        lines: list[str] = []
        if self.checks:
            width = max(len(c["check"]) for c in self.checks)
            lines.append(f"  {'check':<{width}}  {'value':>14}  result")
            for c in self.checks:
                result = "held" if c["held"] else "FAILED"
                note = f"  ({c['note']})" if c["note"] else ""
                lines.append(f"  {c['check']:<{width}}  {c['value']:>14}  {result}{note}")
        if self.regressions:
            allowed = f"{self.max_regression:.0%}" if self.max_regression is not None else "?"
            lines.append(f"  against the baseline (a regression: worse by more than {allowed},")
            lines.append("  beyond the runs' noise):")
            width = max(len(r["figure"]) for r in self.regressions)
            for r in self.regressions:
                result = {"regressed": "REGRESSED", "inconclusive": "inconclusive"}.get(
                    r["state"], "ok"
                )
                lines.append(
                    f"  {r['figure']:<{width}}  {r['baseline']:>11} → {r['value']:>11}  "
                    f"{r['change']}  {result}"
                )
                lines.extend(f"      {n}" for n in r["notes"])
        lines.extend(f"  note: {n}" for n in self.notes)
        failed = sum(not c["held"] for c in self.checks) + sum(
            r["regressed"] for r in self.regressions
        )
        outcome = "passed" if self.passed else f"FAILED ({failed} of {self._total()})"
        lines.insert(0, f"probe check: {outcome}")
        return "\n".join(printable(line) for line in lines)

    def _total(self) -> int:
        return len(self.checks) + len(self.regressions)
