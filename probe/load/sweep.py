"""``probe load --sweep``: the load stepped through several concurrencies (closed loop) or
rates (open loop), each measured as one ``probe load`` would, to find where throughput
stops growing and latency starts to -- and, given a run's diagnosis, to hold its capacity
prediction (``analyzers.capacity``) to what each step measured."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from probe.errors import ProbeError
from probe.load.driver import LoadSettings
from probe.load.figures import LoadFigures

__all__ = ["Step", "SweepStep", "parse_steps", "predicted_at", "sweep"]


@dataclass(frozen=True)
class Step:
    concurrency: int | None = None  # closed loop
    rate: float | None = None  # open loop, requests a second

    def label(self) -> str:
        return f"{self.concurrency} clients" if self.rate is None else f"{self.rate:g}/s"


@dataclass(frozen=True)
class SweepStep:
    step: Step
    figures: LoadFigures
    predicted_per_s: float | None = None  # from a run's capacity curve, closed loop only
    predicted_ms: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "concurrency": self.step.concurrency,
            "rate_per_s": self.step.rate,
            "predicted_per_s": self.predicted_per_s,
            "predicted_mean_ms": self.predicted_ms,
            **self.figures.to_dict(),
        }


def parse_steps(text: str) -> list[Step]:
    """``1,4,16`` (clients) or ``50/s,100/s`` (rates): ascending, all of one kind."""
    steps: list[Step] = []
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        try:
            if part.endswith("/s"):
                rate = float(part[:-2])
                if not math.isfinite(rate) or rate <= 0:
                    raise ValueError
                steps.append(Step(rate=rate))
            else:
                clients = int(part)
                if not 1 <= clients <= 10_000:
                    raise ValueError
                steps.append(Step(concurrency=clients))
        except ValueError:
            raise ProbeError(
                f"--sweep: {part!r} is neither a number of clients (1 to 10000) nor a rate "
                "(such as 50/s)"
            ) from None
    if not steps:
        raise ProbeError("--sweep: no step given (such as 1,4,16 or 50/s,100/s)")
    if len({s.rate is None for s in steps}) > 1:
        raise ProbeError("--sweep: give clients (1,4,16) or rates (50/s,100/s), not both")
    return steps


def predicted_at(capacity: dict[str, Any], clients: int) -> tuple[float, float] | None:
    """(throughput, mean latency ms) the run's capacity curve (diagnosis.json's
    ``capacity.curve``) predicts for ``clients`` in a closed loop; past its last point,
    the last point's throughput (the curve runs well past the knee)."""
    curve = capacity.get("curve") or []
    if not curve:
        return None
    by_clients = {int(p["clients"]): p for p in curve}
    point = by_clients.get(clients)
    if point is None:
        last = curve[-1]
        x = float(last["throughput_per_s"])
        return x, 1e3 * clients / x if x > 0 else math.inf
    return float(point["throughput_per_s"]), float(point["latency_ms"])


def sweep(
    steps: list[Step],
    settings: LoadSettings,
    measure: Callable[[LoadSettings], LoadFigures],
    capacity: dict[str, Any] | None = None,
    progress: Callable[[SweepStep], None] | None = None,
) -> list[SweepStep]:
    """Each step measured with ``measure`` (the driver and its figures) under
    ``settings`` with the step's concurrency or rate; ``progress`` is told of each."""
    out = []
    for step in steps:
        figures = measure(replace(settings, concurrency=step.concurrency, rate=step.rate))
        predicted = (
            predicted_at(capacity, step.concurrency)
            if capacity and step.concurrency is not None
            else None
        )
        done = SweepStep(
            step,
            figures,
            predicted_per_s=None if predicted is None else predicted[0],
            predicted_ms=None if predicted is None else predicted[1],
        )
        if progress is not None:
            progress(done)
        out.append(done)
    return out
