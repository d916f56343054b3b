"""The run on one timeline: the model the trace exporters (Perfetto, Chrome JSON) draw.

``timeline(tables, root_pid=..., limits=...)`` -> ``Timeline``:

* the processes and threads, named;
* the spans, each with the lane it is drawn in. Requests go on their process's request
  lanes, as many as were in flight at once (interval partitioning: two overlapping
  requests never share a lane); the other spans on their thread, nested, with extra lanes
  only where spans on one thread overlap without nesting (asyncio tasks interleaved on a
  loop's thread), which a single track cannot draw;
* the stack samples with their stacks (root first), each on-CPU or waiting, and on what;
  beside each row's recorded state, the time it stands for as the analysis attributes it
  (``analyzers.attribution``: a thread's exact CPU shared among the rows caught running,
  the rest of its wall time waited, by reason) -- what the profile exporters weigh by;
* counters per process (CPU in cores, RSS) and for the machine (CPU %, each GPU's
  utilisation and memory), in base units, at the times they were read;
* the torch.profiler windows' events -- ops, ranges and runtime calls on their threads,
  kernels and copies on their GPU streams -- on the run's clock
  (``analyzers.torch_timeline``).

Bounded by ``TimelineLimits``: past a limit, spans are kept as whole trees (a request with
all its stages) -- the slowest trees of each name first, the tail being what people open
a trace to look at, then every k-th of the others in time order, so the rest stays a
fair picture of the load over the whole run; samples and counter points are
thinned evenly in time. ``kept`` says how many of how many, ``notes`` how they were
chosen: the exporters write both into the file.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import numpy as np
import pandas as pd

from probe.analyzers.attribution import attribute
from probe.analyzers.spantree import index_spans, innermost_span
from probe.analyzers.torch_timeline import torch_events

__all__ = ["TIMELINE_TABLES", "CounterSeries", "Timeline", "TimelineLimits", "timeline"]

# The run directory's tables a timeline is drawn from (a loader need read no others).
TIMELINE_TABLES = ("spans", "threads", "samples", "stacks", "frames", "resources", "system", "gpu")

# The slowest trees of each span name kept before the even spread, when spans are
# thinned: the tail of a latency distribution at p99 and beyond, for a name with a few
# thousand requests, is a few tens of requests.
TAIL_TREES_PER_NAME = 20


@dataclass(frozen=True)
class TimelineLimits:
    """At most this many of each kind (None: all). The defaults keep a Perfetto export
    under 10 MB (issue 18's bound): measured on the hour-long synthetic run
    (``benchmarks/export_bounds.py``), a request span takes ~90 bytes there and a stage
    ~45, a stack sample ~23, a counter point ~30; so 80 k spans (<= 7.2 MB if all were
    requests, ~4.8 MB at that run's mix), 100 k samples (2.3 MB) and 5 k points a series
    (an hour at 1.4 Hz; 0.15 MB a series)."""

    spans: int | None = 80_000
    samples: int | None = 100_000
    counter_points: int | None = 5_000  # per series
    # torch.profiler events (ops, kernels ...), whole windows: 46-58 bytes each in
    # Perfetto (a begin and an end packet; the ten real GPU traces,
    # benchmarks/torch_event_bytes.py), so 50 k add ~2.4 MB to a bounded file's 6.7
    torch_events: int | None = 50_000

    @classmethod
    def unbounded(cls) -> TimelineLimits:
        return cls(spans=None, samples=None, counter_points=None, torch_events=None)


@dataclass(frozen=True)
class CounterSeries:
    name: str
    unit: str  # "cores", "bytes", "percent"
    pid: int | None  # None: the machine's (host CPU, GPUs)
    ts_ns: np.ndarray
    values: np.ndarray


@dataclass(frozen=True)
class Timeline:
    processes: pd.DataFrame  # pid, name; the run's own process first
    threads: pd.DataFrame  # thread_id, pid, name
    # span_id, parent_id, name, category, thread_id, pid, start_ns, end_ns, request_id,
    # attrs, track, lane, root_id; track: -pid for a request (its process's request
    # lanes), the thread id for the others (lane 0: the thread's own track); root_id: the
    # span's tree's outermost span (trees are kept whole)
    spans: pd.DataFrame
    # ts_ns, thread_id, pid, stack_id, wall_ns, cpu_ns, wait_reason, samples as recorded;
    # on_cpu_ns, waited_ns, waited_on as attributed (analyzers.attribution, computed over
    # every sample before any thinning); stage, route: the innermost span open on the
    # sample's thread at its instant and the request around it ("" where none)
    samples: pd.DataFrame
    stacks: dict[int, tuple[int, ...]]  # stack_id -> frame ids, root first
    frames: pd.DataFrame  # frame_id, function, filename, first_line
    counters: list[CounterSeries]
    kept: dict[str, tuple[int, int]]  # spans / samples / counter points: (kept, recorded)
    notes: list[str] = field(default_factory=list)
    # the torch.profiler windows' ops, ranges, runtime calls, kernels and copies on the
    # run's clock (analyzers.torch_timeline.TORCH_EVENT_COLUMNS; empty without torch)
    torch: pd.DataFrame = field(
        default_factory=lambda: torch_events([], shift_ns=0, limit=None, notes=[])[0]
    )

    @property
    def complete(self) -> bool:
        return all(k == n for k, n in self.kept.values())

    def frame(self, frame_id: int) -> tuple[str, str, int]:
        """(function, file, first line) of a frame id -- a placeholder name for one the
        run's frames table lacks (a salvaged run's last stacks)."""
        return self._frame_rows.get(frame_id, (f"<frame {frame_id}>", "", 0))

    @cached_property
    def _frame_rows(self) -> dict[int, tuple[str, str, int]]:
        f = self.frames
        return {
            int(i): (str(fn), str(file), int(line))
            for i, fn, file, line in zip(
                f["frame_id"], f["function"], f["filename"], f["first_line"], strict=True
            )
        }


def timeline(
    tables: dict[str, pd.DataFrame],
    *,
    root_pid: int,
    command: str = "",
    limits: TimelineLimits | None = None,
    torch_windows: list[tuple[dict[str, Any], Any]] | None = None,
    clock: dict[str, Any] | None = None,
) -> Timeline:
    """``torch_windows``: the run's (``Run.torch_windows``), placed on the run's clock with
    ``clock`` (meta.json's pair: ``unix_ns``, ``perf_ns``)."""
    limits = limits or TimelineLimits()
    threads = _threads(tables["threads"], root_pid)
    pid_of = dict(zip(threads["thread_id"], threads["pid"], strict=True))
    notes: list[str] = []
    spans = _with_pid(tables["spans"], pid_of, root_pid)
    # the span forest once: each span's tree (for thinning whole trees, and its trace in
    # OTLP) and the innermost span open at each sample
    indexed = index_spans(spans.assign(_row=np.arange(len(spans))))
    spans = spans.assign(root_id=_roots(indexed, spans))
    kept_spans = _bounded_spans(spans, limits.spans, notes)
    # the samples as taken, one event each (exports count them): a row's wait for a CPU
    # stays in its wait here, as the breakdown's split is for shares, not for drawing
    samples = _attributed(_with_pid(tables["samples"], pid_of, root_pid))
    samples = samples.sort_values("ts_ns", kind="stable")
    kept_samples = _thinned(samples, limits.samples, "stack samples", notes)
    kept_samples = kept_samples.assign(**_span_labels(kept_samples, indexed))
    counters, points = _counters(tables, limits.counter_points, notes)
    clock = clock or {}
    torch, torch_kept = torch_events(
        torch_windows or [],
        shift_ns=int(clock.get("unix_ns") or 0) - int(clock.get("perf_ns") or 0),
        limit=limits.torch_events,
        notes=notes,
    )
    used = set(kept_samples["stack_id"].tolist())
    return Timeline(
        processes=_processes(threads, spans, root_pid, command),
        threads=threads,
        spans=_with_lanes(kept_spans),
        samples=kept_samples.reset_index(drop=True),
        stacks=_stacks(tables["stacks"], used),
        frames=tables["frames"][["frame_id", "function", "filename", "first_line"]],
        counters=counters,
        kept={
            "spans": (len(kept_spans), len(spans)),
            "samples": (len(kept_samples), len(samples)),
            "counter points": points,
            **({"torch events": torch_kept} if torch_windows else {}),
        },
        notes=notes,
        torch=torch,
    )


def _threads(threads: pd.DataFrame, root_pid: int) -> pd.DataFrame:
    out = threads.drop_duplicates("thread_id")[["thread_id", "pid", "name"]].copy()
    out["pid"] = out["pid"].fillna(root_pid).astype("int64")
    out["name"] = out["name"].fillna("").astype(str)
    return out.reset_index(drop=True)


def _with_pid(frame: pd.DataFrame, pid_of: dict[int, int], root_pid: int) -> pd.DataFrame:
    out = frame.copy()
    out["pid"] = out["thread_id"].map(pid_of).fillna(root_pid).astype("int64")
    return out


def _attributed(samples: pd.DataFrame) -> pd.DataFrame:
    shares = attribute(samples.reset_index(drop=True))
    out = samples.reset_index(drop=True)
    return out.assign(
        on_cpu_ns=shares["cpu_ns"].to_numpy(dtype="float64"),
        waited_ns=shares["wait_ns"].to_numpy(dtype="float64"),
        waited_on=shares["reason"].fillna("").astype(str).to_numpy(),
    )


def _span_labels(samples: pd.DataFrame, indexed: pd.DataFrame) -> dict[str, np.ndarray]:
    """Per sample, the innermost span open on its thread at its instant (``stage``: its
    name, unless it is the request itself) and the request it belongs to (``route``):
    ``spantree.innermost_span``, as the breakdown and the endpoints attribute samples."""
    n = len(samples)
    stage, route = np.full(n, "", dtype=object), np.full(n, "", dtype=object)
    if indexed.empty or not n:
        return {"stage": stage, "route": route}
    pos = innermost_span(indexed, samples["thread_id"].to_numpy(), samples["ts_ns"].to_numpy())
    names = indexed["name"].astype(str).to_numpy(dtype=object)
    is_request = (indexed["category"] == "request").to_numpy(dtype=bool, na_value=False)
    parent = indexed["parent_pos"].to_numpy()
    found = pos >= 0
    at = np.maximum(pos, 0)
    inner = found & ~is_request[at]
    stage[inner] = names[at[inner]]
    for _ in range(64):  # up to the request, where there is one (depth is small)
        climbing = found & ~is_request[at] & (parent[at] >= 0)
        if not climbing.any():
            break
        at = np.where(climbing, parent[at], at)
    in_request = found & is_request[at]
    route[in_request] = names[at[in_request]]
    return {"stage": stage, "route": route}


def _processes(
    threads: pd.DataFrame, spans: pd.DataFrame, root_pid: int, command: str
) -> pd.DataFrame:
    pids = [root_pid] + sorted(
        {int(p) for p in (*threads["pid"], *spans["pid"]) if int(p) != root_pid}
    )
    names = [command or f"process {root_pid}"] + [f"worker {p}" for p in pids[1:]]
    return pd.DataFrame({"pid": pids, "name": names})


def _roots(indexed: pd.DataFrame, spans: pd.DataFrame) -> np.ndarray:
    """Each of ``spans``' tree root's id, in its row order (``indexed``: ``spans``
    through ``spantree.index_spans`` with their row numbers as ``_row``)."""
    roots = np.empty(len(spans), dtype=spans["span_id"].dtype)
    ids = indexed["span_id"].to_numpy()
    roots[indexed["_row"].to_numpy()] = ids[indexed["root_pos"].to_numpy()]
    return roots


def _bounded_spans(spans: pd.DataFrame, limit: int | None, notes: list[str]) -> pd.DataFrame:
    if limit is None or len(spans) <= limit:
        return spans
    roots = spans["root_id"].to_numpy()
    trees = pd.DataFrame({"root": roots, "n": 1}).groupby("root")["n"].sum()
    by_id = spans.set_index("span_id")
    head = by_id.loc[trees.index]
    head = head.assign(dur=head["end_ns"] - head["start_ns"], n=trees)
    tail = head.sort_values(["dur", "start_ns"], ascending=[False, True], kind="stable")
    tail = tail.groupby("name").head(TAIL_TREES_PER_NAME)
    tail = tail[tail["n"].cumsum() <= limit]
    rest = head.drop(tail.index).sort_values("start_ns")
    room = limit - int(tail["n"].sum())
    chosen = set(tail.index.tolist()) | _spread(rest["n"], room)
    kept = spans[np.isin(roots, list(chosen))]
    notes.append(
        f"spans: kept {len(kept):,} of {len(spans):,}, as whole trees: the "
        f"{TAIL_TREES_PER_NAME} slowest of each name, then trees spread evenly over the "
        "run (--full keeps all)"
    )
    return kept


def _spread(sizes: pd.Series, room: int) -> set[int]:
    """Trees (index, in time order) chosen evenly -- every k-th, each tree the same
    chance -- so that about ``room`` spans are kept in all, spread over the run."""
    total = int(sizes.sum())
    if total <= room:
        return set(sizes.index.tolist())
    if room <= 0:
        return set()
    rate = room / total  # the share of trees kept, so the share of spans expected
    i = np.arange(len(sizes))
    picked = np.floor((i + 1) * rate) > np.floor(i * rate)
    chosen = sizes.index[picked]
    over = np.cumsum(sizes[picked].to_numpy()) <= room  # larger trees than average
    return set(chosen[over].tolist())


def _thinned(frame: pd.DataFrame, limit: int | None, what: str, notes: list[str]) -> pd.DataFrame:
    if limit is None or len(frame) <= limit:
        return frame
    rows = _even_rows(len(frame), limit)
    notes.append(f"{what}: kept {len(rows):,} of {len(frame):,}, evenly in time (--full keeps all)")
    return frame.iloc[rows]


def _even_rows(n: int, limit: int) -> np.ndarray:
    """``limit`` row positions of ``n``, evenly spaced."""
    return np.unique(np.floor(np.arange(limit) * (n / limit)).astype("int64"))


def _with_lanes(spans: pd.DataFrame) -> pd.DataFrame:
    out = spans.sort_values(["start_ns", "end_ns"], ascending=[True, False], kind="stable")
    out = out.reset_index(drop=True)
    starts = out["start_ns"].to_numpy()
    ends = np.maximum(out["end_ns"].to_numpy(), starts)
    is_request = (out["category"] == "request").to_numpy()
    # requests share lanes per process, other spans per thread (pids are > 0: -pid
    # never equals a thread id)
    track = np.where(is_request, -out["pid"].to_numpy(), out["thread_id"].to_numpy())
    lanes = np.zeros(len(out), dtype="int64")
    for rows in pd.Series(track).groupby(track).indices.values():
        place = _request_lanes if is_request[rows[0]] else _nesting_lanes
        lanes[rows] = place(starts[rows].tolist(), ends[rows].tolist())
    return out.assign(track=track, lane=lanes)


def _request_lanes(starts: list[int], ends: list[int]) -> list[int]:
    """Interval partitioning, in start order: the lowest lane free at each start."""
    busy: list[tuple[int, int]] = []  # (end, lane)
    free: list[int] = []
    lanes: list[int] = []
    for start, end in zip(starts, ends, strict=True):
        while busy and busy[0][0] <= start:
            heapq.heappush(free, heapq.heappop(busy)[1])
        lane = heapq.heappop(free) if free else len(busy) + len(free)
        heapq.heappush(busy, (end, lane))
        lanes.append(lane)
    return lanes


def _nesting_lanes(starts: list[int], ends: list[int]) -> list[int]:
    """The first lane where the span nests in what is open (or opens nothing), in
    (start, longest first) order: each lane stays a well-nested stack of slices."""
    open_ends: list[list[int]] = []  # per lane, the ends of the slices still open
    lanes: list[int] = []
    for start, end in zip(starts, ends, strict=True):
        for lane, stack in enumerate(open_ends):
            while stack and stack[-1] <= start:
                stack.pop()
            if not stack or end <= stack[-1]:
                stack.append(end)
                lanes.append(lane)
                break
        else:
            open_ends.append([end])
            lanes.append(len(open_ends) - 1)
    return lanes


def _stacks(stacks: pd.DataFrame, used: set[int]) -> dict[int, tuple[int, ...]]:
    rows = stacks[stacks["stack_id"].isin(used)]
    return {
        int(sid): tuple(int(f) for f in str(ids or "").split(";") if f)
        for sid, ids in zip(rows["stack_id"], rows["frame_ids"], strict=True)
    }


def _counters(
    tables: dict[str, pd.DataFrame], limit: int | None, notes: list[str]
) -> tuple[list[CounterSeries], tuple[int, int]]:
    series: list[CounterSeries] = []
    resources = tables["resources"].sort_values("ts_ns", kind="stable")
    for pid, rows in resources.groupby("pid"):
        ts = rows["ts_ns"].to_numpy()
        cpu = (rows["cpu_user_s"] + rows["cpu_system_s"]).to_numpy()
        dt = np.diff(ts) / 1e9
        ok = dt > 0
        cores = np.diff(cpu)[ok] / dt[ok]
        series.append(CounterSeries("CPU", "cores", int(pid), ts[1:][ok], cores))
        rss = rows["rss_bytes"].to_numpy(dtype="float64")
        series.append(CounterSeries("RSS", "bytes", int(pid), ts, rss))
    system = tables["system"].dropna(subset=["cpu_percent"])
    if not system.empty:
        series.append(
            CounterSeries(
                "host CPU", "percent", None, system["ts_ns"].to_numpy(),
                system["cpu_percent"].to_numpy(dtype="float64"),
            )
        )  # fmt: skip
    for gpu, rows in tables["gpu"].groupby("gpu"):
        ts = rows["ts_ns"].to_numpy()
        for column, label, unit in (
            ("util_percent", "utilisation", "percent"),
            ("mem_used_bytes", "memory used", "bytes"),
        ):
            ok = rows[column].notna().to_numpy()
            values = rows[column].to_numpy(dtype="float64")[ok]
            series.append(CounterSeries(f"GPU {gpu} {label}", unit, None, ts[ok], values))
    return _thinned_series(series, limit, notes)


def _thinned_series(
    series: list[CounterSeries], limit: int | None, notes: list[str]
) -> tuple[list[CounterSeries], tuple[int, int]]:
    recorded = sum(len(s.ts_ns) for s in series)
    out = []
    for s in series:
        if limit is None or len(s.ts_ns) <= limit:
            out.append(s)
            continue
        rows = _even_rows(len(s.ts_ns), limit)
        out.append(CounterSeries(s.name, s.unit, s.pid, s.ts_ns[rows], s.values[rows]))
    kept = sum(len(s.ts_ns) for s in out)
    if kept < recorded:
        notes.append(
            f"counters: kept {kept:,} of {recorded:,} points, evenly in time (--full keeps all)"
        )
    return out, (kept, recorded)
