"""Amdahl's law and the bottleneck law: what a local speedup buys end to end.

* Amdahl: a fix that makes a share ``p`` of the critical path ``s`` times faster speeds
  the whole up by ``S = 1 / ((1 - p) + p / s)``, at most ``1 / (1 - p)`` (s -> infinity).
  Several fixes on disjoint parts combine as ``1 / ((1 - sum p_i) + sum p_i / s_i)``.
* Bottleneck law (operational analysis, Denning & Buzen 1978): a system whose requests
  each need ``D_k`` seconds of resource ``k`` (with ``c_k`` servers) cannot exceed
  ``min_k c_k / D_k`` requests per second, however much concurrency it is given.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping

__all__ = [
    "amdahl",
    "amdahl_combined",
    "ceiling",
    "local_speedup_for",
    "max_throughput",
    "mva_throughput",
]


def amdahl(p: float, s: float) -> float:
    """End-to-end speedup when a share ``p`` of the time gets ``s`` times faster."""
    p = min(max(p, 0.0), 1.0)
    if s <= 0:
        raise ValueError("a local speedup must be positive")
    rest = (1.0 - p) + (p / s if math.isfinite(s) else 0.0)
    return 1.0 / rest if rest > 0 else math.inf


def amdahl_combined(parts: Iterable[tuple[float, float]]) -> float:
    """Speedup of several fixes on disjoint shares: ``[(p, s), ...]``."""
    parts = list(parts)
    total_p = min(1.0, sum(p for p, _ in parts))
    rest = (1.0 - total_p) + sum(p / s for p, s in parts if math.isfinite(s))
    return 1.0 / rest if rest > 0 else math.inf


def ceiling(p: float) -> float:
    """Amdahl's limit: the speedup if the share ``p`` took no time at all."""
    return 1.0 / (1.0 - p) if p < 1.0 else math.inf


def local_speedup_for(p: float, overall: float) -> float:
    """The ``s`` that gives ``overall`` on a share ``p`` (inverse of ``amdahl``)."""
    if overall <= 1.0 or p <= 0:
        return 1.0
    rest = 1.0 / overall - (1.0 - p)
    return p / rest if rest > 0 else math.inf


def max_throughput(demands: Mapping[str, tuple[float, float]]) -> tuple[float, str]:
    """``{resource: (seconds per request, servers)}`` -> (max requests/s, the bottleneck)."""
    best, which = math.inf, ""
    for resource, (demand, servers) in demands.items():
        if demand > 0 and servers > 0 and servers / demand < best:
            best, which = servers / demand, resource
    return best, which


def mva_throughput(
    think_s: float, stations: Mapping[str, tuple[float, int]], customers: int
) -> float:
    """Throughput of a closed system with ``customers`` requests in flight (exact MVA).

    Each request waits ``think_s`` without queueing (the network, a sleep: a delay
    station) and needs ``demand`` seconds at each queueing station (``{name: (demand,
    servers)}``: the GIL has one server, the CPU one per core). Mean-value analysis
    (Reiser & Lavenberg 1980) with Seidmann's approximation for multi-server stations
    (a queue of demand D/m plus a delay of D(m-1)/m). Unlike the bottleneck law's
    asymptote, it includes the queueing that builds up as a station nears saturation.
    """
    queues = {name: 0.0 for name in stations}
    think = think_s + sum(d * (m - 1) / m for d, m in stations.values() if m > 1)
    throughput = 0.0
    for n in range(1, max(1, customers) + 1):
        residence = {name: (d / m) * (1.0 + queues[name]) for name, (d, m) in stations.items()}
        total = think + sum(residence.values())
        throughput = n / total if total > 0 else math.inf
        queues = {name: throughput * r for name, r in residence.items()}
    return throughput
