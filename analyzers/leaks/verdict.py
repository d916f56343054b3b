"""The leak verdict: leak, no leak, or undetermined -- and why, and what would settle it.

Three states, not two: a short run, growth within the allocator's step size, or growth
that is slowing down (warm-up, or a leak under warm-up) cannot be told apart honestly,
and saying "no leak" there would hide leaks while saying "leak" would invent them.
``detected`` keeps its meaning (the state is ``leak``); ``settle`` says what would turn an
undetermined verdict into an answer.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, TypedDict

if TYPE_CHECKING:
    from probe.analyzers.leaks.trend import Trend

__all__ = [
    "LEAK",
    "NO_LEAK",
    "UNDETERMINED",
    "LeakVerdict",
    "SETTLE",
    "State",
    "time_to_limit",
    "too_few_readings",
    "trend_fields",
]

State = Literal["leak", "no_leak", "undetermined"]
LEAK: State = "leak"
NO_LEAK: State = "no_leak"
UNDETERMINED: State = "undetermined"

# What would settle an undetermined verdict, or check a small rise: a longer look.
SETTLE = (
    "a longer run (more requests, or --duration), `--memory` to see what grows, or "
    "`probe watch` on the service to follow it for hours"
)


@dataclass(frozen=True)
class LeakVerdict:
    state: State
    reason: str
    slope_bytes_per_s: float = 0.0
    slope_low: float = 0.0  # Sen's 99% interval of the slope
    slope_high: float = 0.0
    confidence: float = 0.0  # that the floor rises: 1 - the trend test's p-value
    onset_s: float | None = None
    level_bytes: float = 0.0
    points: int = 0
    settle: str = ""  # what would settle an undetermined verdict
    bytes_per_request: float | None = None  # when the growth was judged per request
    basis: str = "time"  # what the growth was judged against: "requests" or "time"
    top_sites: list[dict[str, Any]] = field(default_factory=list)
    growing_types: list[dict[str, Any]] = field(default_factory=list)
    seconds_to_limit: float | None = None
    limit_bytes: float | None = None
    intercept_bytes: float = 0.0  # the fitted line: intercept + slope * t (t as given)
    test: str = "run"  # which test spoke: "run" (a recorded series), "fast", "slow"
    at_s: float | None = None  # when the verdict was reached (same clock as the series)
    growing_containers: list[dict[str, Any]] = field(default_factory=list)
    # bounds on the share of the rise Python's small objects (<= 512 bytes) can hold,
    # from their live blocks (None: not judged, or no heap readings)
    small_objects_share: tuple[float, float] | None = None
    # the share of the rise malloc's bytes in use rose by (larger objects, native memory)
    malloc_share: float | None = None
    # the process's threads and descriptors that climbed with it (growth.piling_up)
    piling_up: list[dict[str, Any]] = field(default_factory=list)
    # how long the watch traced for the sites, and why tracing stopped (empty: not said)
    attribution_note: str = ""

    @property
    def detected(self) -> bool:
        return self.state == LEAK

    def to_dict(self) -> dict[str, Any]:
        return {
            "detected": self.detected,
            "state": self.state,
            "slope_bytes_per_s": round(self.slope_bytes_per_s, 1),
            "slope_interval_bytes_per_s": [round(self.slope_low, 1), round(self.slope_high, 1)],
            "bytes_per_request": None
            if self.bytes_per_request is None
            else round(self.bytes_per_request, 1),
            "basis": self.basis,
            # the confidence of the leak verdict: on the other states there is none to give
            # (an undetermined rise read 100% beside "detected": false); the rise's own
            # (1 - the trend test's p-value) is kept for every state
            "confidence": round(self.confidence, 4) if self.detected else 0.0,
            "rise_confidence": round(self.confidence, 4),
            "onset_s": None if self.onset_s is None else round(self.onset_s, 2),
            "level_bytes": int(self.level_bytes),
            "points": self.points,
            "reason": self.reason,
            "settle": self.settle,
            "test": self.test,
            "seconds_to_limit": (
                None if self.seconds_to_limit is None else round(self.seconds_to_limit, 1)
            ),
            "intercept_bytes": round(self.intercept_bytes),  # the fit: intercept + slope * t
            "limit_bytes": self.limit_bytes,
            "top_sites": self.top_sites,
            "growing_types": self.growing_types,
            "growing_containers": self.growing_containers,
            "small_objects_share": None
            if self.small_objects_share is None
            else [round(v, 4) for v in self.small_objects_share],
            "malloc_share": None if self.malloc_share is None else round(self.malloc_share, 4),
            "piling_up": self.piling_up,
            "attribution_note": self.attribution_note,
        }


def too_few_readings(points: int) -> LeakVerdict:
    """Undetermined: ``points`` memory readings are too few for any trend (a run shorter
    than the sampler's first readings, one whose process ended during them)."""
    return LeakVerdict(
        state=UNDETERMINED,
        reason=f"too few memory readings ({points}) to judge a trend",
        settle=SETTLE,
        points=points,
    )


def time_to_limit(limit: float | None, level: float, slope: float) -> float | None:
    """Seconds until ``level`` reaches ``limit`` at ``slope`` bytes/s (None: no limit, no rise)."""
    if not limit or slope <= 0:
        return None
    return max(0.0, (limit - level) / slope)


class TrendFields(TypedDict):
    slope_bytes_per_s: float
    slope_low: float
    slope_high: float
    confidence: float
    intercept_bytes: float


def trend_fields(tr: Trend) -> TrendFields:
    """A verdict's rate fields from the trend of its floors (the live tests build one per
    judgement; ``LeakVerdict(**trend_fields(tr), ...)`` or ``replace(v, **...)``)."""
    return {
        "slope_bytes_per_s": tr.slope,
        "slope_low": tr.low,
        "slope_high": tr.high,
        "confidence": 1.0 - tr.p_up,
        "intercept_bytes": tr.intercept,
    }
