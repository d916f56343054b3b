"""Per-endpoint figures of a served HTTP app: one row per ``METHOD route`` request name.

The requests are the ``probe.request`` spans the serving middleware writes
(``probe.serving``: attributes ``method``, ``route``, ``status``, ``error``, ``handler``).
Counts, errors and latency percentiles come from the spans, exactly. What each endpoint's
requests did -- on-CPU, waiting and on what -- comes from the stack samples, and a
sample belongs to an endpoint when:

1. its stack holds the endpoint's handler function (the code location the middleware
   recorded): a sync route's handler on a worker thread, an async route's coroutine on
   the event loop; or else
2. it fell in a span nested in one of the endpoint's requests on a thread where that
   request was the only one open (a worker thread's span for the request's sync work).

An endpoint's on-CPU seconds are measured, not sampled, where the middleware measured
each of its requests' CPU (``cpu_ns``: a WSGI request runs on one thread, whose CPU clock
it reads at both ends, ``probe.serving.wsgi``); ``cpu_source`` says which. A server that
starts a thread per connection makes threads that live a few milliseconds, which a
sampler at 100 Hz mostly misses: sampled, a CPU-heavy route read lighter than a light
one under CPU contention.

Samples of a loop thread inside a request's span but outside any handler are the
server's and the framework's (HTTP parsing, routing, serialising the response): several
requests are open on the loop at once, and nothing says which of them the loop worked
for, so they are not charged to an endpoint; ``server_s`` says how much there was.

The endpoint that limits the service's throughput is the one whose requests need the
most of the resource every request shares, the CPU under one GIL (the bottleneck law:
X <= 1/D_max): the most on-CPU plus GIL-wait seconds in total. Waits that are not a
shared resource (sleeping, a downstream service) add latency, not a throughput limit;
the slowest endpoint by p99 is named beside it when it is another one.

Served by several worker processes (gunicorn -w N, uvicorn --workers N; each recorded
in a shard, ``probe.workers``), the requests are counted per worker as well, from the
process each request's thread belongs to (``threads.pid``): how evenly the workers
shared the load, and what each spent on CPU in the handlers.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from probe.analyzers.spantree import innermost_span, latency_ns, span_attrs
from probe.rundir.schema import WAIT_REASONS

__all__ = ["EndpointFigures", "endpoints"]

# the request-span attributes that make a request an HTTP one (probe.serving)
_HTTP_KEYS = ("method", "route", "status")

# A request's phases (probe.serving.routes.Phases), from its attributes: the wait for the
# event loop before the handler (where the server stamps the request's receipt), the
# handler up to the response's start, sending the body, and the app's work after the
# answer. NaN where the server or app gave no such instant.
_PHASES = ("queued", "handler", "send", "after")

_COLUMNS = [
    "requests",
    "errors",
    "throughput_per_s",
    "p50_ms",
    "p90_ms",
    "p95_ms",
    "p99_ms",
    "sampled_s",
    "cpu_s",
    "gil_s",
    *(f"wait_{r}_s" for r in WAIT_REASONS if r != "gil"),
    "cpu_ms_per_request",
    "cpu_source",
    "top_frames",
    *(f"{phase}_{q}_ms" for phase in _PHASES for q in ("p50", "p99")),
    # the longest the event loop kept a request waiting at once (probe.serving.loop_lag)
    "loop_lag_p50_ms",
    "loop_lag_p99_ms",
]


@dataclass(frozen=True)
class EndpointFigures:
    table: pd.DataFrame  # indexed by endpoint name, _COLUMNS; sorted by requests
    window_s: float  # first request's start to the last one's end
    server_s: float  # loop-thread samples in requests but in no handler (module doc)
    limiting: str | None  # the endpoint with the most CPU + GIL time (module doc)
    slowest: str | None  # the endpoint with the highest p99
    notes: list[str] = field(default_factory=list)
    # per worker process, when requests were served by more than one (module doc):
    # indexed by pid, _WORKER_COLUMNS, most requests first
    workers: pd.DataFrame | None = None


_WORKER_COLUMNS = ["requests", "errors", "p50_ms", "p99_ms", "cpu_s", "routes"]


def endpoints(
    spans: pd.DataFrame,
    samples: pd.DataFrame,
    stacks: pd.DataFrame,
    frames: pd.DataFrame,
    threads: pd.DataFrame | None = None,
    worker_pids: tuple[int, ...] = (),
) -> EndpointFigures | None:
    """``spans`` as ``spantree.index_spans`` gives them with ``is_request``; ``samples``
    the attributed work samples (``breakdown``); ``stacks``/``frames``/``threads`` the
    run's tables (``threads.pid``: the per-worker figures), ``worker_pids`` the worker
    processes recorded (``Run.workers``). None when no request is an HTTP one."""
    if spans.empty or "is_request" not in spans:
        return None
    attrs, http = _request_attrs(spans)
    if not http.any():
        return None
    http_attrs = [attrs[i] for i in np.flatnonzero(http)]
    # the HTTP requests, each with its latency (to the answer: spantree.latency_ns)
    req = spans[http]
    req = req.assign(latency_ns=latency_ns(req, http_attrs))
    table, window_s = _route_table(req, http_attrs)
    owner, server = _owners(spans, http, attrs, samples, stacks, frames)
    cpu = samples["cpu_ns"].to_numpy(dtype="float64") / 1e9 if len(samples) else np.zeros(0)
    wait = samples["wait_ns"].to_numpy(dtype="float64") / 1e9 if len(samples) else np.zeros(0)
    if "awaited" in samples:
        # a row made for a task awaiting I/O shares its loop's interval, whose CPU was the
        # loop's work for others (analyzers.tasks): the task itself was not running
        cpu = np.where(samples["awaited"].to_numpy(dtype=bool), 0.0, cpu)
    table = _with_samples(table, samples, owner, cpu, wait)
    table = _with_measured_cpu(table, req, http_attrs)
    table = _with_phases(table, req, http_attrs)
    shared = table["cpu_s"] + table["gil_s"]
    notes = []
    if not samples.empty and float(table["sampled_s"].sum()) == 0:
        notes.append(
            "no stack sample fell in an endpoint's handler: the per-endpoint on-CPU and "
            "wait figures are empty (a run too short for the sampling rate?)"
        )
    pid_of = _pid_of_thread(threads)
    workers = _worker_table(req, http_attrs, pid_of, samples, owner, cpu, worker_pids)
    if workers is not None and (workers["requests"] == 0).any():
        idle = [str(p) for p in workers.index[workers["requests"] == 0]]
        notes.append(
            f"worker process{'es' if len(idle) > 1 else ''} {', '.join(idle)} served no "
            f"request of the {int(workers['requests'].sum())}: the other workers took every "
            "connection (a keep-alive connection stays with the worker that accepted it)"
        )
    return EndpointFigures(
        table=table,
        window_s=window_s,
        server_s=float((cpu[server] + wait[server]).sum()),
        limiting=str(shared.idxmax()) if float(shared.max()) > 0 else None,
        slowest=str(table["p99_ms"].idxmax()) if table["p99_ms"].notna().any() else None,
        notes=notes,
        workers=workers,
    )


def _request_attrs(spans: pd.DataFrame) -> tuple[list[dict[str, object]], np.ndarray]:
    """Each span's attrs where it is a request ({} elsewhere: one shared, read-only), and
    which spans are HTTP requests. Only the request spans' attrs are read: a decorated
    service's stages outnumber its requests (a 30-s loop: 700,000 spans, 140,000
    requests; reading every span's took 1.2 s of its 3-s diagnosis, 2026-12-02)."""
    rows = np.flatnonzero(spans["is_request"].to_numpy(dtype=bool))
    none: dict[str, object] = {}
    attrs = [none] * len(spans)
    http = np.zeros(len(spans), dtype=bool)
    for i, text in zip(rows, spans["attrs"].take(rows), strict=True):
        if isinstance(text, str):  # else none (NA): {}
            attrs[i] = found = span_attrs(text)
            http[i] = all(k in found for k in _HTTP_KEYS)
    return attrs, http


def _pid_of_thread(threads: pd.DataFrame | None) -> dict[int, int]:
    if threads is None or threads.empty or "pid" not in threads:
        return {}
    known = threads[threads["pid"].notna()]
    return dict(zip(known["thread_id"].astype(int), known["pid"].astype(int), strict=True))


def _worker_table(
    req: pd.DataFrame,
    attrs: list[dict[str, object]],
    pid_of: dict[int, int],
    samples: pd.DataFrame,
    owner: np.ndarray,
    cpu: np.ndarray,
    worker_pids: tuple[int, ...],
) -> pd.DataFrame | None:
    """Per worker process (module doc), one that served nothing included; None where no
    worker process served a request (one process, or a root serving with a pool)."""
    pid = req["thread_id"].map(pid_of)
    if not pid.isin(worker_pids).any():
        return None
    errors = pd.Series([bool(a.get("error")) for a in attrs], index=req.index)
    dur_ms = req["latency_ns"].astype("float64") / 1e6
    measured = pd.Series(_attr_ns(attrs, "cpu_ns"), index=req.index)
    known = pid.notna()
    pid, errors, dur_ms, names = (
        pid[known].astype(int),
        errors[known],
        dur_ms[known],
        req["name"].astype(str)[known],
    )
    table = pd.DataFrame(
        {
            "requests": pid.value_counts(),
            "errors": errors.groupby(pid).sum().astype(int),
            "p50_ms": dur_ms.groupby(pid).quantile(0.5),
            "p99_ms": dur_ms.groupby(pid).quantile(0.99),
        }
    )
    idle = sorted(set(worker_pids) - set(table.index))
    table = table.reindex([*table.index, *idle])
    table[["requests", "errors"]] = table[["requests", "errors"]].fillna(0).astype(int)
    mine = owner != ""
    sample_pid = samples["thread_id"].map(pid_of).to_numpy() if len(samples) else np.zeros(0)
    handler_cpu = pd.Series(cpu[mine]).groupby(sample_pid[mine]).sum() if mine.any() else {}
    table["cpu_s"] = [float(handler_cpu.get(p, 0.0)) for p in table.index]
    # a worker whose every request's CPU was measured (WSGI: the request thread's clock)
    # gets it in place of the sampled figure, as the endpoints do (_with_measured_cpu)
    mine_measured = measured[known]
    complete = mine_measured.notna().groupby(pid).all()
    total_s = mine_measured.groupby(pid).sum() / 1e9
    for p in complete.index[complete.to_numpy(dtype=bool)]:
        table.at[p, "cpu_s"] = float(total_s[p])
    table["routes"] = [
        {str(k): int(v) for k, v in names[pid == p].value_counts().items()} for p in table.index
    ]
    table.index.name = "pid"
    return table[_WORKER_COLUMNS].sort_values("requests", ascending=False, kind="stable")


def _route_table(req: pd.DataFrame, attrs: list[dict[str, object]]) -> tuple[pd.DataFrame, float]:
    """Per route, from its request spans (with their ``latency_ns``): counts, errors,
    latency percentiles, rate."""
    window_s = (int(req["end_ns"].max()) - int(req["start_ns"].min())) / 1e9
    by = req["name"].astype(str)
    errors = pd.Series([bool(a.get("error")) for a in attrs], index=req.index)
    dur_ms = req["latency_ns"].astype("float64") / 1e6
    q = dur_ms.groupby(by).quantile([0.5, 0.9, 0.95, 0.99]).unstack()
    table = pd.DataFrame(
        {
            "requests": by.value_counts(),
            "errors": errors.groupby(by).sum(),
            "p50_ms": q[0.5],
            "p90_ms": q[0.9],
            "p95_ms": q[0.95],
            "p99_ms": q[0.99],
        }
    )
    table["throughput_per_s"] = table["requests"] / window_s if window_s > 0 else np.nan
    return table, window_s


def _owners(
    spans: pd.DataFrame,
    http: np.ndarray,
    attrs: list[dict[str, object]],
    samples: pd.DataFrame,
    stacks: pd.DataFrame,
    frames: pd.DataFrame,
) -> tuple[np.ndarray, np.ndarray]:
    """(each sample's endpoint, "" for none; the samples that are the server's)."""
    owner = np.full(len(samples), "", dtype=object)
    server = np.zeros(len(samples), dtype=bool)
    if samples.empty:
        return owner, server
    names = spans["name"].astype(str).to_numpy()
    handlers: dict[str, str] = {}
    for i in np.flatnonzero(http):
        where = attrs[i].get("handler")
        if isinstance(where, str):
            handlers.setdefault(where, names[i])
    by_stack = _stacks_holding(handlers, stacks, frames)
    # a copy: with nothing to fill, pandas (copy-on-write) hands back a read-only view
    owner = samples["stack_id"].map(by_stack).fillna("").to_numpy(dtype=object, copy=True)
    pos = innermost_span(spans, samples["thread_id"].to_numpy(), samples["ts_ns"].to_numpy())
    root = np.where(pos >= 0, spans["root_pos"].to_numpy()[np.maximum(pos, 0)], -1)
    in_http = (root >= 0) & http[np.maximum(root, 0)]
    # a nested span (a worker thread's) names its request; the request span itself, on
    # a loop thread with others open, does not (module doc)
    nested = in_http & (pos != root)
    fallback = (owner == "") & nested
    owner[fallback] = names[root[fallback]]
    return owner, in_http & ~nested & (owner == "")


def _with_samples(
    table: pd.DataFrame,
    samples: pd.DataFrame,
    owner: np.ndarray,
    cpu: np.ndarray,
    wait: np.ndarray,
) -> pd.DataFrame:
    """The route table with its samples' on-CPU and wait seconds, CPU a request and top
    frames, in ``_COLUMNS`` order, most requests first."""
    mine = owner != ""
    reason = samples["reason"].to_numpy(dtype=object) if len(samples) else np.zeros(0, object)
    sums = (
        pd.DataFrame(
            {
                "endpoint": owner[mine],
                "cpu_s": cpu[mine],
                "sampled_s": cpu[mine] + wait[mine],
                **{
                    (f"wait_{r}_s" if r != "gil" else "gil_s"): np.where(
                        reason[mine] == r, wait[mine], 0.0
                    )
                    for r in WAIT_REASONS
                },
            }
        )
        .groupby("endpoint")
        .sum()
    )
    table = table.join(sums, how="left")
    for column in _COLUMNS:
        if column not in ("top_frames", "cpu_source"):
            table[column] = table[column].fillna(0.0) if column in table else 0.0
    table["cpu_ms_per_request"] = table["cpu_s"] * 1e3 / table["requests"]
    table["top_frames"] = _top_frames(samples, owner, mine, cpu + wait, table.index)
    table["cpu_source"] = "sampled"
    table = table[_COLUMNS].sort_values("requests", ascending=False, kind="stable")
    table.index.name = "endpoint"
    return table


def _with_measured_cpu(
    table: pd.DataFrame, req: pd.DataFrame, attrs: list[dict[str, object]]
) -> pd.DataFrame:
    """The endpoints whose every request carries its measured CPU (``cpu_ns``) get it as
    their ``cpu_s`` in place of the sampled figure (module doc)."""
    measured = pd.Series(_attr_ns(attrs, "cpu_ns"), index=req.index)
    by = req["name"].astype(str)
    complete = measured.notna().groupby(by).all()
    total_s = measured.groupby(by).sum() / 1e9
    table = table.copy()
    table["cpu_source"] = "sampled"
    for name in complete.index[complete.to_numpy()]:
        if name in table.index:
            table.at[name, "cpu_s"] = float(total_s[name])
            table.at[name, "cpu_source"] = "measured"
    table["cpu_ms_per_request"] = table["cpu_s"] * 1e3 / table["requests"]
    return table


def _with_phases(
    table: pd.DataFrame, req: pd.DataFrame, attrs: list[dict[str, object]]
) -> pd.DataFrame:
    """Each endpoint's phases (``_PHASES``) and loop lag, p50 and p99 over the requests
    that have them."""

    dur = req["dur_ns"].to_numpy(dtype="float64")
    first, answered = _attr_ns(attrs, "first_byte_ns"), _attr_ns(attrs, "answered_ns")
    answered = np.minimum(answered, dur)
    phases = (
        pd.DataFrame(
            {
                "queued": _attr_ns(attrs, "queued_ns"),
                "handler": first,
                "send": answered - first,
                "after": dur - answered,
                "loop_lag": _attr_ns(attrs, "loop_lag_ns"),
            },
            index=req.index,
        ).clip(lower=0)
        / 1e6
    )
    grouped = phases.groupby(req["name"].astype(str).to_numpy())
    table = table.copy()
    for q, label in ((0.5, "p50"), (0.99, "p99")):
        figures = grouped.quantile(q)
        for phase in (*_PHASES, "loop_lag"):
            table[f"{phase}_{label}_ms"] = figures[phase].reindex(table.index)
    return table


def _attr_ns(attrs: list[dict[str, object]], key: str) -> np.ndarray:
    """An integer attribute of each request (ns: ``cpu_ns``, the phases' offsets) as
    floats, NaN where a request lacks it."""
    return np.array([float(v) if isinstance(v := a.get(key), int) else np.nan for a in attrs])


def _stacks_holding(
    handlers: dict[str, str], stacks: pd.DataFrame, frames: pd.DataFrame
) -> dict[int, str]:
    """stack id -> the endpoint whose handler (``filename:first_line``) is in the stack;
    the innermost handler where a stack holds two (one endpoint calling another's)."""
    if not handlers or stacks.empty or frames.empty:
        return {}
    where = frames["filename"].astype(str) + ":" + frames["first_line"].astype("Int64").astype(str)
    endpoint_of_frame = {
        int(fid): handlers[w]
        for fid, w in zip(frames["frame_id"], where, strict=True)
        if w in handlers
    }
    if not endpoint_of_frame:
        return {}
    out: dict[int, str] = {}
    for sid, ids in zip(stacks["stack_id"], stacks["frame_ids"].fillna(""), strict=True):
        for f in reversed(str(ids).split(";")):  # root first: the leaf end is innermost
            name = endpoint_of_frame.get(int(f)) if f.lstrip("-").isdigit() else None
            if name is not None:
                out[int(sid)] = name
                break
    return out


def _top_frames(
    samples: pd.DataFrame,
    owner: np.ndarray,
    mine: np.ndarray,
    seconds: np.ndarray,
    index: pd.Index,
) -> list[list[tuple[str, float]]]:
    """Per endpoint, its three user functions with the most sampled seconds."""
    if not mine.any():
        return [[] for _ in index]
    functions = samples["user_function"].to_numpy(dtype=object)[mine]
    per = (
        pd.DataFrame({"endpoint": owner[mine], "function": functions, "s": seconds[mine]})
        .groupby(["endpoint", "function"])["s"]
        .sum()
    )
    out = []
    for name in index:
        if name in per.index.get_level_values(0):
            top = per.loc[name].sort_values(ascending=False).head(3)
            out.append([(str(f), round(float(s), 4)) for f, s in top.items()])
        else:
            out.append([])
    return out
