"""A served app's capacity from one measured run: the most requests a second it can take,
the load where its latency starts to climb, and the load that keeps p99 within an SLA.

Operational analysis (Denning & Buzen 1978) on what each request needed, measured:

* stations a request queues at, each with ``demand_s`` seconds a request and ``servers``:
  ``gil`` -- the CPU it spent holding an interpreter (all but numeric kernels, which
  release it), one server per worker process; ``cpu`` -- all its CPU, one server per
  core the host left free; ``server slots`` -- its whole time in the server, where the
  server takes a fixed number of requests at once (gunicorn's sync workers: one each,
  ``gthread``: ``threads`` each); an async server has no such limit; ``... permits`` --
  the time a request holds a permit of a pool or a semaphore its requests queued for
  (the tasks holding them over the throughput, Little's law), as many servers as it
  lends;
* the **ceiling**, by the bottleneck law: ``X <= min_k servers_k / demand_k``;
* the **curve**, by exact mean-value analysis of a closed loop of N clients sending their
  next request as the last is answered (Reiser & Lavenberg 1980; Seidmann's
  approximation for a station of several servers), its throughput held to the ceiling
  (past the server's slots, clients wait at its door). A client's cycle is the
  request's queueing at the GIL and the cores, its own waits that queue nowhere here (a
  downstream call, a sleep, the disk: ``delay_s``, what the measured mean latency leaves
  once the model's queueing at the measured load is accounted -- solved for, so the
  model passes through the measured point). When the load driver ran, the measured
  point is its clients' cycle, the wire and a full server's door included (shop_flask
  under gunicorn -w 2 at 4 clients: 10.9 ms in the span, 23 ms a cycle), and the
  server's slots are a queue of their own: its door;
* the **knee**: the load where a closed system's two asymptotes cross,
  ``N* = ceiling x C(1)`` (C(1): a lone client's cycle, no queueing) -- below it latency
  stays near C(1), above it throughput stays near the ceiling and latency grows by a
  request's bottleneck demand per client added (Kleinrock; Lazowska et al. 1984, ch. 5);
* **p99 at load N**: the mean cycle plus the measured p99's excess over the mean, kept
  as a share of the cycle: the distribution's shape taken as the measured one, which
  holds near the measured load and errs short of queueing's own tail far above it
  (said in the notes);
* with an SLA: the most clients (and the rate they bring) whose predicted p99 is within
  it, and the goodput measured: the requests answered within it, per second (what the
  clients saw when the load driver recorded it, else the server's spans).

Per endpoint, the same ceiling as though every request were that route's: its handler
CPU plus the framework's per-request share (what the process spent beyond the
handlers, spread evenly over the requests).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import pandas as pd

from probe.analyzers.amdahl import max_throughput
from probe.analyzers.constants import constant

__all__ = [
    "CAPACITY",
    "Capacity",
    "CapacitySettings",
    "Demands",
    "Station",
    "capacity",
    "mva_curve",
]


@dataclass(frozen=True)
class CapacitySettings:
    max_clients: int = constant(
        512,
        "the curve's last point: past the knee by far, a closed loop's latency only grows "
        "by the bottleneck's demand per client; the MVA recursion is O(clients x stations)",
    )
    curve_past_knee: float = constant(
        3.0, "the curve runs to this many times the knee (or the measured load, doubled)"
    )
    far_above: float = constant(
        2.0,
        "a load this many times the measured one is far from it: the p99 there is the "
        "measured distribution's shape scaled, which understates queueing's own tail",
    )


CAPACITY = CapacitySettings()


@dataclass(frozen=True)
class Station:
    name: str
    demand_s: float  # seconds a request needs here
    servers: float  # how many requests it serves at once

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "demand_ms": round(1e3 * self.demand_s, 4),
            "servers": round(self.servers, 2),
            "ceiling_per_s": _finite(self.servers / self.demand_s if self.demand_s > 0 else None),
        }


@dataclass(frozen=True)
class Capacity:
    measured_per_s: float  # throughput over the serving window
    measured_in_flight: float  # mean requests in the server (Little: X x R)
    latency_ms: float  # mean server-side latency
    p99_ms: float | None
    stations: list[Station]
    delay_s: float  # waits that queue nowhere modelled (solved for: module doc)
    ceiling_per_s: float  # the bottleneck law
    bound_by: str  # the station that sets it
    knee_in_flight: float  # N* = ceiling x R(1)
    curve: pd.DataFrame  # clients, throughput_per_s, latency_ms, p99_ms
    slots: int | None  # requests the server takes at once (None: no such limit known)
    beyond_server_ms: float = 0.0  # the clients' mean wait beyond the server's span
    sla_ms: float | None = None
    clients_at_sla: int | None = None  # the most clients whose predicted p99 meets the SLA
    rate_at_sla: float | None = None  # the throughput they bring
    within_sla: float | None = None  # measured: the share of requests within the SLA
    goodput_per_s: float | None = None  # measured: those requests, per second
    goodput_from: str = ""  # "clients" (the load driver's records) or "server spans"
    endpoints: pd.DataFrame = field(default_factory=pd.DataFrame)
    notes: list[str] = field(default_factory=list)

    def headroom(self) -> float:
        """How many times the measured throughput the ceiling is."""
        return self.ceiling_per_s / self.measured_per_s if self.measured_per_s > 0 else math.inf

    def to_dict(self) -> dict[str, Any]:
        curve = self.curve
        return {
            "measured_per_s": round(self.measured_per_s, 3),
            "measured_in_flight": round(self.measured_in_flight, 3),
            "latency_ms": round(self.latency_ms, 3),
            "ceiling_per_s": _finite(self.ceiling_per_s),
            "bound_by": self.bound_by,
            "knee_in_flight": _finite(self.knee_in_flight),
            "delay_ms": round(1e3 * self.delay_s, 3),
            "slots": self.slots,
            "beyond_server_ms": round(self.beyond_server_ms, 3),
            "stations": [s.to_dict() for s in self.stations],
            "sla_ms": self.sla_ms,
            "clients_at_sla": self.clients_at_sla,
            "rate_at_sla_per_s": _finite(self.rate_at_sla),
            "within_sla": None if self.within_sla is None else round(self.within_sla, 4),
            "goodput_per_s": _finite(self.goodput_per_s),
            "goodput_from": self.goodput_from or None,
            "curve": [
                {k: _finite(v) if k != "clients" else int(v) for k, v in row.items()}
                for row in curve.to_dict("records")
            ],
            "endpoints": [
                {
                    "name": str(name),
                    **{k: v if isinstance(v, str) else _finite(v) for k, v in row.items()},
                }
                for name, row in self.endpoints.iterrows()
            ],
            "notes": self.notes,
        }


def _finite(value: Any) -> float | None:
    if value is None:
        return None
    value = float(value)
    return round(value, 3) if math.isfinite(value) else None


# -- the model ---------------------------------------------------------------------------
def _mva_latencies(delay_s: float, queues: list[Station], clients: int) -> np.ndarray:
    """Mean latency at 1..clients clients in a closed loop (exact MVA, Seidmann's
    approximation for several servers: a queue of demand D/m plus a delay of D(m-1)/m)."""
    delay = delay_s + sum(s.demand_s * (s.servers - 1) / s.servers for s in queues if s.servers > 1)
    demand = np.array([s.demand_s / max(s.servers, 1.0) for s in queues], dtype="float64")
    queued = np.zeros_like(demand)
    out = np.empty(max(1, clients), dtype="float64")
    for n in range(1, len(out) + 1):
        residence = demand * (1.0 + queued)
        latency = delay + float(residence.sum())
        out[n - 1] = latency
        throughput = n / latency if latency > 0 else math.inf
        queued = throughput * residence
    return out


def _queues(stations: list[Station]) -> list[Station]:
    """The stations as a request queues at them, its time counted once: the CPU that
    holds an interpreter at the GIL (as many at once as processes, and no more than
    cores), the rest of its CPU at the cores, and where the server takes a fixed number
    of requests at once, the rest of its time in the server at those slots (a full
    server's door is a queue)."""
    by_name = {s.name: s for s in stations}
    gil, cpu, slots = by_name.get("gil"), by_name.get("cpu"), by_name.get("server slots")
    out = []
    if gil is not None and gil.demand_s > 0:
        servers = min(gil.servers, cpu.servers) if cpu is not None else gil.servers
        out.append(Station("gil", gil.demand_s, servers))
    if cpu is not None:
        rest = cpu.demand_s - (gil.demand_s if gil is not None else 0.0)
        if rest > 0:
            out.append(Station("cpu", rest, cpu.servers))
    if slots is not None:
        held = slots.demand_s - (cpu.demand_s if cpu is not None else 0.0)
        if held > 0:
            out.append(Station("server slots", held, slots.servers))
    return out


def mva_curve(
    delay_s: float, stations: list[Station], clients: int
) -> tuple[np.ndarray, np.ndarray]:
    """(throughput, mean cycle) at 1..clients clients in a closed loop with no think time:
    a client's cycle is ``delay_s`` plus its queueing at ``stations``' GIL and cores
    (``_queues``); the throughput is held to the bottleneck law's ceiling of all of
    ``stations`` (the server's slots too: past them, clients wait at its door)."""
    cycle = _mva_latencies(delay_s, _queues(stations), clients)
    n = np.arange(1, clients + 1, dtype="float64")
    ceiling, _ = max_throughput({s.name: (s.demand_s, s.servers) for s in stations})
    throughput = np.minimum(n / cycle, ceiling)
    return throughput, n / throughput


def _cycle_at(delay_s: float, stations: list[Station], clients: float) -> float:
    """The model's mean cycle at a (fractional) number of clients."""
    lo = max(1, math.floor(clients))
    _, cycle = mva_curve(delay_s, stations, lo + 1)
    if clients <= 1:
        return float(cycle[0])
    w = clients - lo
    return float((1 - w) * cycle[lo - 1] + w * cycle[lo])


def _solve_delay(stations: list[Station], clients: float, cycle_s: float) -> float:
    """The least delay that makes the model's cycle at the measured load the measured one
    (0 when the modelled queueing alone already reaches it): bisection, as the cycle grows
    with the delay. Least, because a point on the ceiling's asymptote does not tell the
    delay: there the model's cycle is N / ceiling whatever delay the saturated station
    hides (shop_flask at 4 clients on 2 slots: any delay up to ~5 ms), and which of those
    an unguarded bisection ended on was decided by rounding: over measured rates of
    150-175/s in steps of 0.5, 11 of 52 took 1.2-5.2 ms, and a lone client predicted at
    58/s, not 82/s, failed a CI run's capacity test."""
    reached = cycle_s * (1.0 - _SAME)
    if _cycle_at(0.0, stations, clients) >= reached:
        return 0.0
    lo, hi = 0.0, cycle_s
    for _ in range(60):
        mid = (lo + hi) / 2
        if _cycle_at(mid, stations, clients) < reached:
            lo = mid
        else:
            hi = mid
    return hi


# Two cycles this close are one: the model's saturated cycle and N / X differ by rounding
# alone (1.6e-16 of it where the bisection took 5 ms of delay), and a measured mean
# cycle is known to no better than its standard error, ~0.4% over a run's thousand
# requests, far above this.
_SAME = 1e-9


# -- from a run ----------------------------------------------------------------------------
@dataclass(frozen=True)
class Demands:
    """What each request needed, measured (``recommendations.demands``), and what the
    server offers."""

    cpu_s: float  # CPU a request, the process tree's over the serving window
    gil_s: float  # of it, holding an interpreter
    free_cores: float
    processes: int  # worker processes, one interpreter each
    slots: int | None  # requests the server takes at once (None: no limit known)
    # a pool's or a semaphore's permits requests queued for (rules' queued_for_a_limit):
    # (what it is, its permits, seconds a request holds one)
    limit: tuple[str, int, float] | None = None


def capacity(
    *,
    requests: int,
    window_s: float,
    latencies_s: np.ndarray,
    demands: Demands,
    endpoints: pd.DataFrame | None = None,
    client_latencies_s: np.ndarray | None = None,
    sla_s: float | None = None,
    settings: CapacitySettings = CAPACITY,
) -> Capacity | None:
    """The capacity of a served app from a measured run, or None without requests.

    ``latencies_s``: each request's server-side latency (its span); ``endpoints``: the
    per-endpoint table (``analyzers.endpoints``, with ``mean_ms``);
    ``client_latencies_s``: what the load driver's clients saw, each request from its
    send (or, open loop, its due time) to its answer, when it ran: the clients' cycle,
    the wire and a full server's door included, is then the measured point."""
    latencies_s = np.asarray(latencies_s, dtype="float64")
    if requests <= 0 or window_s <= 0 or not len(latencies_s):
        return None
    measured = requests / window_s
    mean_s = float(latencies_s.mean())
    cycle_s = mean_s
    if client_latencies_s is not None and len(client_latencies_s):
        cycle_s = max(mean_s, float(np.mean(client_latencies_s)))
    stations = _stations(demands, mean_s, measured, measured * cycle_s)
    ceiling, bound_by = max_throughput({s.name: (s.demand_s, s.servers) for s in stations})
    delay = _solve_delay(stations, measured * cycle_s, cycle_s)
    lone = delay + sum(s.demand_s for s in _queues(stations))
    knee = ceiling * lone if math.isfinite(ceiling) else math.inf
    reach = max(knee * settings.curve_past_knee, 2.0 * measured * cycle_s, 8.0)
    if sla_s is not None and math.isfinite(ceiling):
        # past the knee a cycle is N / ceiling and p99 no shorter: the SLA is crossed
        # by N = sla x ceiling, so the curve runs past it and says where
        reach = max(reach, 1.1 * sla_s * ceiling + 1.0)
    clients = int(min(settings.max_clients, math.ceil(reach)))
    curve = _curve(
        delay, stations, clients, latencies_s, _cycle_at(delay, stations, measured * cycle_s)
    )
    result = Capacity(
        measured_per_s=measured,
        measured_in_flight=measured * mean_s,  # Little's law, in the server
        latency_ms=1e3 * mean_s,
        p99_ms=_p99(latencies_s),
        stations=stations,
        delay_s=delay,
        ceiling_per_s=ceiling,
        bound_by=bound_by,
        knee_in_flight=knee,
        curve=curve,
        slots=demands.slots,
        beyond_server_ms=1e3 * (cycle_s - mean_s),
        endpoints=_per_endpoint(endpoints, stations, demands.cpu_s, demands.gil_s),
        notes=_past_the_ceiling(measured, ceiling),
    )
    if sla_s is None:
        return result
    return _with_sla(result, sla_s, latencies_s, client_latencies_s, settings)


def _stations(demands: Demands, mean_s: float, measured: float, clients: float) -> list[Station]:
    """The stations, a slot held for the request's span -- or, where the closed loop had
    a client more than the server has slots (a queue at its door: every slot busy),
    for what the utilization law says at U = 1: ``slots / X``, the worker's time outside
    the span included (shop_flask under gunicorn -w 2 at 4 clients: 10.9 ms in the span,
    12.5 ms a request a worker; a lone client measured 12.4 ms a cycle)."""
    stations = [
        Station("gil", demands.gil_s, float(max(1, demands.processes))),
        Station("cpu", demands.cpu_s, max(1.0, demands.free_cores)),
    ]
    if demands.slots is not None:
        held = mean_s
        if clients >= demands.slots + 1 and measured > 0:
            held = max(mean_s, demands.slots / measured)
        stations.append(Station("server slots", held, float(demands.slots)))
    if demands.limit is not None:
        name, permits, held_s = demands.limit
        stations.append(Station(f"{name} permits", held_s, float(permits)))
    return stations


def _p99(latencies_s: np.ndarray) -> float | None:
    return 1e3 * float(np.percentile(latencies_s, 99)) if len(latencies_s) >= 2 else None


def _curve(
    delay_s: float,
    stations: list[Station],
    clients: int,
    latencies_s: np.ndarray,
    at_measured_s: float,
) -> pd.DataFrame:
    """The closed-loop curve; its p99 the measured p99 scaled as the mean cycle is."""
    throughput, cycle = mva_curve(delay_s, stations, clients)
    p99 = _p99(latencies_s)
    mean_s = float(latencies_s.mean())
    # the measured p99's excess over the mean, kept as a share of the cycle
    scale = (1.0 + (p99 / 1e3 - mean_s) / at_measured_s) if p99 is not None else None
    return pd.DataFrame(
        {
            "clients": np.arange(1, clients + 1),
            "throughput_per_s": throughput,
            "latency_ms": 1e3 * cycle,
            "p99_ms": 1e3 * cycle * scale if scale is not None else np.nan,
        }
    )


def _past_the_ceiling(measured: float, ceiling: float) -> list[str]:
    if measured <= ceiling * 1.05:
        return []
    return [
        f"the measured {measured:.1f} requests/s pass the modelled ceiling of "
        f"{ceiling:.1f}/s: the demands per request are short of what they were (work "
        "outside the process tree, or CPU the window left out)"
    ]


def _with_sla(
    result: Capacity,
    sla_s: float,
    latencies_s: np.ndarray,
    client_latencies_s: np.ndarray | None,
    settings: CapacitySettings,
) -> Capacity:
    curve = result.curve
    meets = curve[curve["p99_ms"] <= 1e3 * sla_s]
    clients = int(meets["clients"].max()) if not meets.empty else None
    rate = float(meets["throughput_per_s"].max()) if not meets.empty else None
    notes = list(result.notes)
    if clients is None and curve["p99_ms"].notna().any():
        notes.append(
            f"no load keeps p99 within {1e3 * sla_s:g} ms: a lone request's predicted p99 "
            f"is {curve['p99_ms'].iloc[0]:.1f} ms"
        )
    elif clients is not None and clients == int(curve["clients"].max()):
        notes.append(f"p99 stays within {1e3 * sla_s:g} ms as far as the curve runs")
    if clients is not None and clients > settings.far_above * max(result.measured_in_flight, 1):
        notes.append(
            f"{clients} clients is far above the measured load "
            f"({result.measured_in_flight:.1f} in flight): its p99 is the measured "
            "distribution's shape scaled, short of queueing's own tail; measure it "
            f"(probe load --sweep {clients})"
        )
    seen, source = (
        (client_latencies_s, "clients")
        if client_latencies_s is not None and len(client_latencies_s)
        else (latencies_s, "server spans")
    )
    within = float((np.asarray(seen) <= sla_s).mean())
    return replace(
        result,
        sla_ms=1e3 * sla_s,
        clients_at_sla=clients,
        rate_at_sla=rate,
        within_sla=within,
        goodput_per_s=within * result.measured_per_s,
        goodput_from=source,
        notes=notes,
    )


def _per_endpoint(
    table: pd.DataFrame | None,
    stations: list[Station],
    cpu_s_per_request: float,
    gil_s_per_request: float,
) -> pd.DataFrame:
    """Each endpoint's demands and its ceiling were every request that route's."""
    if table is None or table.empty or "cpu_ms_per_request" not in table:
        return pd.DataFrame()
    requests = table["requests"].astype("float64")
    handler = table["cpu_ms_per_request"].astype("float64").fillna(0.0) / 1e3
    total = float(requests.sum())
    if total <= 0:
        return pd.DataFrame()
    framework = max(0.0, cpu_s_per_request - float((handler * requests).sum()) / total)
    holds = gil_s_per_request / cpu_s_per_request if cpu_s_per_request > 0 else 1.0
    servers: Mapping[str, float] = {s.name: s.servers for s in stations}
    cpu = handler + framework
    rows = []
    for name in table.index:
        demands = {
            "gil": (float(cpu[name]) * holds, servers["gil"]),
            "cpu": (float(cpu[name]), servers["cpu"]),
        }
        if "server slots" in servers and "mean_ms" in table:
            demands["server slots"] = (
                float(table.at[name, "mean_ms"]) / 1e3,
                servers["server slots"],
            )
        bound, which = max_throughput(demands)
        rows.append(
            {
                "share": float(requests[name]) / total,
                "cpu_ms_per_request": 1e3 * float(cpu[name]),
                "ceiling_per_s": bound,
                "bound_by": which,
            }
        )
    return pd.DataFrame(rows, index=table.index)
