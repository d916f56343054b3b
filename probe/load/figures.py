"""What a load run measured, per request label and in all: requests, answers, errors,
throughput, and latency percentiles from an HdrHistogram (3 significant digits: any
percentile within 0.1% of the exact one, in bounded memory whatever the run's length).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from hdrh.histogram import HdrHistogram

from probe.load.driver import LATE_NS, Record

__all__ = ["LoadFigures", "LabelFigures", "figures"]

# latencies in microseconds, from 1 us to an hour
_LOWEST_US, _HIGHEST_US, _DIGITS = 1, 3_600_000_000, 3
PERCENTILES = (50.0, 90.0, 95.0, 99.0, 99.9)
# more late sends than this share: the driver could not keep the rate (see driver)
LATE_SHARE_WARNING = 0.01


@dataclass(frozen=True)
class LabelFigures:
    label: str
    sent: int
    answered: int  # any status
    errors: int  # no answer, or a 5xx
    throughput_per_s: float  # answered, over the measured duration
    latency_ms: dict[str, float]  # "p50"... "p99.9", "max", "mean"


@dataclass(frozen=True)
class LoadFigures:
    mode: str  # "closed" or "open"
    duration_s: float
    warmup_requests: int
    late: int  # sends more than LATE_NS after they were due (open loop)
    labels: list[LabelFigures]
    total: LabelFigures
    warnings: list[str] = field(default_factory=list)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> LoadFigures:
        """As ``to_dict`` wrote it (``probe run --load``'s load/figures.json)."""
        return cls(
            mode=d["mode"],
            duration_s=d["duration_s"],
            warmup_requests=d["warmup_requests"],
            late=d["late_sends"],
            labels=[LabelFigures(**f) for f in d["labels"]],
            total=LabelFigures(**d["total"]),
            warnings=list(d.get("warnings", [])),
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "mode": self.mode,
            "duration_s": self.duration_s,
            "warmup_requests": self.warmup_requests,
            "late_sends": self.late,
            "total": self.total.__dict__,
            "labels": [f.__dict__ for f in self.labels],
            "warnings": self.warnings,
        }


def _label(label: str, records: list[Record], duration_s: float) -> LabelFigures:
    histogram = HdrHistogram(_LOWEST_US, _HIGHEST_US, _DIGITS)
    answered = errors = 0
    for r in records:
        histogram.record_value(min(max(r.latency_ns // 1000, _LOWEST_US), _HIGHEST_US))
        answered += r.status > 0
        errors += r.status == 0 or r.status >= 500
    latency = {f"p{p:g}": histogram.get_value_at_percentile(p) / 1e3 for p in PERCENTILES} | {
        "max": histogram.get_max_value() / 1e3,
        "mean": histogram.get_mean_value() / 1e3,
    }
    return LabelFigures(
        label=label,
        sent=len(records),
        answered=answered,
        errors=errors,
        throughput_per_s=answered / duration_s if duration_s > 0 else 0.0,
        latency_ms=latency if records else {},
    )


def figures(records: list[Record], *, mode: str, duration_s: float) -> LoadFigures:
    measured = [r for r in records if not r.warmup]
    by_label: dict[str, list[Record]] = {}
    for r in measured:
        by_label.setdefault(r.label, []).append(r)
    late = sum(r.sent_ns - r.intended_ns > LATE_NS for r in measured) if mode == "open" else 0
    warnings = []
    if measured and late / len(measured) > LATE_SHARE_WARNING:
        warnings.append(
            f"{late} of {len(measured)} requests ({late / len(measured):.1%}) went out more "
            f"than {LATE_NS / 1e6:.0f} ms after they were due: the service (or the driver) "
            "could not keep the rate; their latency counts from when they were due"
        )
    failed = sum(r.status == 0 for r in measured)
    if failed:
        first = next(r.error for r in measured if r.status == 0)
        warnings.append(f"{failed} requests got no answer (first: {first})")
    return LoadFigures(
        mode=mode,
        duration_s=duration_s,
        warmup_requests=len(records) - len(measured),
        late=late,
        labels=[_label(k, v, duration_s) for k, v in sorted(by_label.items())],
        total=_label("all", measured, duration_s),
        warnings=warnings,
    )
