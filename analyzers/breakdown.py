"""Where the time went, per stage (from spans) or per function (from stack samples).

``breakdown(run)`` -> ``Breakdown``: a ``stages`` DataFrame, one row per stage, and the
request figures (count, latency percentiles, serving window, throughput).

Times come from the spans, which are exact; the stack samples that fall inside a stage's
spans say how that time splits: on-CPU running Python, on-CPU in native code, or waiting,
by reason. A sample belongs to the innermost span open on its thread at its instant, so
a stage's split describes its own time, not its children's.

Columns of ``stages``:

=================  ===================================================================
``name``           the stage (span name) or, without spans, the service function
``category``       ``stage``/``span``/``request``, or ``function``
``count``          spans (NaN for functions)
``total_s``        sum of span durations (for functions: sampled time)
``self_s``         total minus the time covered by child spans (overlaps counted once)
``p50/p95/p99_ms`` span duration percentiles
``wall_share``     time some span of the stage was open, over the run's wall time
``path_s``         time the stage covers on requests' paths (its spans' union per
                   request, overlapping spans counted once), summed over requests
``path_share``     ``path_s`` over the summed request durations: Amdahl's *p*
``sampled_s``      thread-time sampled inside the stage's own time
``cpu_share``      of that, on-CPU (measured CPU time, ``attribution.attribute``)
``python_share``   of the on-CPU time, interpreting Python bytecode
``native_share``   of the on-CPU time, inside native calls
``tensor_share``   of the on-CPU time, in numeric-library operations
``awaited_share``  of its waits, the share awaited in coroutines (an event loop's tasks,
                   ``analyzers.tasks``): the overlap to propose is asyncio's
``wait_<reason>``  of the sampled time, waiting for network, disk, sleep, lock,
                   subprocess, gpu_sync; runnable but not running (gil, unknown)
``threads``        distinct threads the stage ran on
``concurrency``    mean spans of the stage open at once while any is (total / union)
``gpu_util``       mean GPU utilisation (%) at the stage's samples (NaN: no GPU data)
``host_cpu_percent`` mean host CPU utilisation (%) at the stage's samples
``top_call``       the call most waited in, ``top_line`` the hottest on-CPU line
``top_packages``   the packages whose code ran most of the on-CPU time, by the sampled
                   leaf frames' files (``h11 35%, asyncio 30%, starlette 9%``): what
                   ``<library>`` is, where no frame of the service's own code ran
``queued``         without spans, on a batch job's path: threads waiting on a lock in
                   the stage while it ran, on average (``analyzers.path``; 0 otherwise)
=================  ===================================================================
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from probe.analyzers.attribution import attribute, split_run_queue_waits
from probe.analyzers.batch_window import HeldBatches, given_to_the_batcher
from probe.analyzers.constants import constant
from probe.analyzers.path import PATH, critical_path
from probe.analyzers.roles import PARKED_MAIN_ROLES
from probe.analyzers.spantree import (
    covered_ns,
    index_spans,
    innermost_span,
    latency_ns,
    request_mask,
)
from probe.analyzers.stacks import LIBRARY, UNKNOWN, label_stacks, package_of
from probe.analyzers.streams import stream_reads
from probe.analyzers.tasks import (
    IN_LINE_COLUMNS,
    loop_lag,
    loop_lag_notes,
    queued_for_a_limit,
    with_task_waits,
)
from probe.analyzers.transfer import copy_cores, transfer_notes, transfer_table
from probe.rundir.reader import Run
from probe.rundir.schema import BLOCKING_REASONS, WAIT_REASONS

__all__ = [
    "DEFAULT_HZ",
    "Breakdown",
    "RequestFigures",
    "breakdown",
    "host_busy_percent",
    "idle_notes",
    "run_start_ns",
    "served_only",
    "served_spans",
    "shares_words",
]


# ``probe run``'s default --hz, for runs whose meta.json predates ``settings.hz``
DEFAULT_HZ = 100.0


@dataclass(frozen=True)
class RequestFigures:
    count: int
    window_s: float  # first request start to last request end
    throughput_per_s: float | None
    p50_ms: float | None
    p95_ms: float | None
    p99_ms: float | None
    total_s: float  # summed request durations (the critical paths, end to end)
    concurrency: float  # mean requests in flight
    start_ns: int | None = None  # the serving window: first request's start ...
    end_ns: int | None = None  # ... to the last one's end


@dataclass(frozen=True)
class Breakdown:
    source: str  # "spans", "samples" or "none"
    wall_s: float
    stages: pd.DataFrame
    requests: RequestFigures
    sampled_s: float
    cpu_s: float  # on-CPU thread time of the whole run (sampled threads)
    python_cpu_s: float  # of which interpreting Python
    tensor_cpu_s: float  # of which in numeric-library kernels (which release the GIL)
    notes: list[str] = field(default_factory=list)
    # The spans as ``spantree.index_spans`` gives them, with an ``is_request`` column:
    # indexed once here for everything downstream (a million spans take a while).
    spans: pd.DataFrame = field(default_factory=pd.DataFrame)
    # Idle capacity, per role (``analyzers.roles``): ``threads``, ``idle_s`` (time blocked
    # waiting for a next task) and ``idle_share`` (of those threads' sampled time). Its
    # samples are in no stage: a pool with more workers than work is headroom, not a wait.
    idle: pd.DataFrame = field(default_factory=pd.DataFrame)
    sample_hz: float = DEFAULT_HZ  # the stack sampler's rate in this run (samples a second)
    # The stacks blocked entering a briefly held lock (``analyzers.roles``), as the
    # attribution here read them: for the call tree's, without labelling the stacks again.
    brief_lock_stacks: frozenset[int] = frozenset()
    # Per event-loop thread: how many of its tasks were ready and waiting for it, and what
    # it ran meanwhile (``analyzers.tasks.loop_lag``): a coroutine's CPU is the others' lag.
    loops: pd.DataFrame = field(default_factory=pd.DataFrame)
    # Without spans: the function table follows the main thread's path in time (a batch
    # job, ``analyzers.path``), rather than summing every thread's samples.
    path_followed: bool = False
    # The attributed samples of the work (idle capacity left out), for analyses that
    # group them another way than by stage (``analyzers.endpoints``).
    work_samples: pd.DataFrame = field(default_factory=pd.DataFrame)
    # CPU spent copying data between processes (multiprocessing's pickling and pipes), in
    # cores over the run (``analyzers.transfer``)
    copy_cores: float = 0.0
    # Per stage whose asyncio tasks awaited TCP connections: what the kernel counted on
    # them, and whether the stage reads a stream its far end paces (``analyzers.streams``)
    streams: pd.DataFrame = field(default_factory=pd.DataFrame)
    # Requests answered in batches that waited out their window with nothing left to
    # come (``analyzers.batch_window``): the loop's idle time in them is the batcher's
    batches: HeldBatches | None = None


def _empty_requests() -> RequestFigures:
    return RequestFigures(
        count=0,
        window_s=0.0,
        throughput_per_s=None,
        p50_ms=None,
        p95_ms=None,
        p99_ms=None,
        total_s=0.0,
        concurrency=0.0,
    )


def _attributed_samples(
    run: Run,
) -> tuple[pd.DataFrame, frozenset[int], pd.DataFrame, pd.DataFrame, HeldBatches | None]:
    """(attributed sample rows with their timestamps and stack labels, the stacks blocked
    entering a briefly held lock, the tasks queued for a limit per function:
    ``tasks.queued_for_a_limit``, the stages' awaited connections:
    ``streams.stream_reads``, the batches held past their last request:
    ``batch_window``)."""
    samples = split_run_queue_waits(run.tables["samples"])
    labels = label_stacks(
        run.tables["stacks"],
        run.tables["frames"],
        run.meta.get("python", {}).get("library_paths", ()),
    )
    brief = frozenset(int(sid) for sid in labels.loc[labels["brief_lock"], "stack_id"])
    att = attribute(samples, brief)
    att["ts_ns"] = samples["ts_ns"].to_numpy() if not samples.empty else []
    for made in ("woken", "on_run_queue"):  # split_run_queue_waits' rows
        att[made] = samples[made].to_numpy() if made in samples else False
    # the row's own CPU reading, before its thread's CPU was shared out (analyzers.path)
    att["interval_cpu_ns"] = samples["cpu_ns"].to_numpy() if not samples.empty else []
    joined = att.merge(labels, on="stack_id", how="left")
    tasks = run.tables.get("task_samples", pd.DataFrame())
    library = labels.loc[labels["user_function"] == LIBRARY, "stack_id"]
    kept, made = with_task_waits(joined, tasks, library)
    spans = run.tables["spans"]
    requests = spans[spans["category"] == "request"] if not spans.empty else spans
    kept, for_the_batcher, batches = given_to_the_batcher(kept, requests, tasks, labels)
    if not for_the_batcher.empty:  # (an empty frame's object columns would cast)
        parts = [made, for_the_batcher] if not made.empty else [for_the_batcher]
        made = pd.concat(parts, ignore_index=True)
    limits = queued_for_a_limit(tasks, labels, run.tables["stacks"], run.tables["frames"])
    streams = stream_reads(run.tables.get("awaited_sockets"), tasks, labels)
    if not made.empty:  # the rows made for the loop's tasks, labelled by their stacks
        made = made.merge(labels, on="stack_id", how="left").assign(awaited=True)
        joined = pd.concat([kept, made], ignore_index=True)
    bools = (
        *("native", "tensor", "serving", "notify_wait", "brief_lock", "between_tasks"),
        *("woken", "on_run_queue", "comprehension"),
    )
    for column in (*bools, "awaited"):
        joined[column] = joined[column].fillna(False).astype(bool) if column in joined else False
    texts = ("leaf_call", "idle_role", "transfer", "limit", "imported")
    for column in ("user_function", "location", "function", *texts):
        joined[column] = joined[column].fillna("" if column in texts else UNKNOWN)
    return _charged_to_their_tasks(joined), brief, limits, streams, batches


def _charged_to_their_tasks(samples: pd.DataFrame) -> pd.DataFrame:
    """A pool worker's time outside its tasks, in the pool's own code (taking the next,
    the bookkeeping after one, a convoy on the pool's semaphore), is what running the
    tasks on the pool costs: charged to the task the worker last ran (the next one before
    its first). Left as ``<library>``, a pool's convoy was a stage of its own, the
    run's bottleneck half the time (tests/threads_corpus's tokenize_pool)."""
    between = samples["between_tasks"]
    if not between.any():
        return samples
    order = samples.sort_values(["thread_id", "ts_ns"], kind="stable").index
    task = samples["user_function"].where(~between).loc[order]
    by_thread = task.groupby(samples["thread_id"].loc[order])
    ran = by_thread.ffill().fillna(by_thread.bfill())
    return samples.assign(user_function=ran.reindex(samples.index).fillna(LIBRARY))


def _idle_capacity(samples: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(the samples of the work, the idle capacity per role): a blocked sample in a loop
    waiting for its next task is idle."""
    idle = (samples["idle_role"] != "") & samples["reason"].isin(BLOCKING_REASONS)
    if not idle.any():
        return samples, pd.DataFrame()
    parked = samples[idle]
    time = samples["cpu_ns"] + samples["wait_ns"]
    rows = []
    for role, rows_of_role in parked.groupby("idle_role"):
        threads = rows_of_role["thread_id"].unique()
        idle_ns = float(rows_of_role["wait_ns"].sum())
        their_ns = float(time[samples["thread_id"].isin(threads)].sum())
        rows.append((role, len(threads), idle_ns / 1e9, idle_ns / their_ns if their_ns else 0.0))
    table = pd.DataFrame(rows, columns=["role", "threads", "idle_s", "idle_share"])
    return samples[~idle], table.set_index("role").sort_values("idle_s", ascending=False)


@dataclass(frozen=True)
class Headroom:
    note_share: float = constant(
        0.05,
        "idle capacity worth a line: the TF profiler's 'moderate' 5% band, as for findings "
        "(a pool's last worker parked for 0.5% of its time, as its batch ended, is not "
        "spare capacity: tests/threads_corpus's tokenize_pool)",
    )


HEADROOM = Headroom()


def idle_notes(idle: pd.DataFrame, settings: Headroom = HEADROOM) -> list[str]:
    """One line per idle role idle for a meaningful share of its time, as the verdict
    and the report say it."""
    if idle.empty:
        return []
    lines = []
    # a main thread parked while others work is no capacity a request could use
    spare = idle[(idle["idle_share"] >= settings.note_share) & ~idle.index.isin(PARKED_MAIN_ROLES)]
    for role, r in spare.iterrows():
        one = int(r.threads) == 1
        lines.append(
            f"{int(r.threads)} {role}{'' if one else 's'} idle {r.idle_share:.0%} of "
            f"{'its' if one else 'their'} sampled time, waiting for the next task: spare "
            "capacity, not a bottleneck"
        )
    return lines


def _wait_shares(
    samples: pd.DataFrame, total: Callable[[np.ndarray], np.ndarray], sampled: np.ndarray
) -> dict[str, Any]:
    """Per key (``total`` sums by it): each wait reason's share of the sampled time, of
    the waits the share awaited in coroutines (an event loop's tasks), and of
    ``wait_unknown`` the share the kernel counted on a run queue (schedstat rows made by
    ``split_run_queue_waits``)."""
    wait = samples["wait_ns"].to_numpy(dtype="float64")
    reason = samples["reason"].to_numpy(dtype=object)

    def share(mask: Any, of: np.ndarray) -> np.ndarray:
        return np.nan_to_num(total(np.where(mask, wait, 0.0)) / of)

    kernel = samples["on_run_queue"] if "on_run_queue" in samples else False
    return {
        "awaited_share": share(samples["awaited"], total(wait)) if "awaited" in samples else 0.0,
        **{f"wait_{r}": share(reason == r, sampled) for r in WAIT_REASONS},
        "run_queue_share": share(kernel & (reason == "unknown"), sampled),
    }


def _sample_split(samples: pd.DataFrame, key: str) -> pd.DataFrame:
    """Per ``key``: sampled time, on-CPU shares and wait shares, top call and line."""
    codes, keys = pd.factorize(samples[key].to_numpy())
    n = len(keys)

    def total(values: np.ndarray) -> np.ndarray:
        return np.bincount(codes, weights=values, minlength=n)

    cpu = samples["cpu_ns"].to_numpy(dtype="float64")
    sampled = total(cpu + samples["wait_ns"].to_numpy(dtype="float64"))
    on_cpu = total(cpu)
    with np.errstate(divide="ignore", invalid="ignore"):
        cpu_share = np.nan_to_num(on_cpu / sampled)
        native = np.nan_to_num(total(np.where(samples["native"], cpu, 0.0)) / on_cpu)
        tensor = np.nan_to_num(total(np.where(samples["tensor"], cpu, 0.0)) / on_cpu)
        out = pd.DataFrame(
            {
                "sampled_s": sampled / 1e9,
                "cpu_share": cpu_share,
                "native_share": native,
                "tensor_share": tensor,
                "python_share": np.where(cpu_share > 0, 1.0 - native, 0.0),
                **_wait_shares(samples, total, sampled),
            },
            index=pd.Index(keys, name=key),
        )
    waited = samples[(samples["wait_ns"] > 0) & samples["reason"].isin(BLOCKING_REASONS)]
    if not waited.empty:
        label = (
            waited["leaf_call"].where(waited["leaf_call"] != "", waited["function"])
            + " ("
            + waited["location"]
            + ")"
        )
        top = waited.assign(label=label).groupby([key, "label"])["wait_ns"].sum()
        out["top_call"] = top.groupby(level=0).idxmax().map(lambda k: k[1])
    else:
        out["top_call"] = ""
    busy = samples[samples["cpu_ns"] > 0]
    if not busy.empty:
        hot = busy.groupby([key, "location"])["cpu_ns"].sum()
        out["top_line"] = hot.groupby(level=0).idxmax().map(lambda k: k[1])
        out["top_packages"] = _top_packages(busy, key)
    else:
        out["top_line"] = out["top_packages"] = ""
    return out.fillna({"top_call": "", "top_line": "", "top_packages": ""})


def _top_packages(busy: pd.DataFrame, key: str, most: int = 3) -> pd.Series:
    """Per ``key``: its ``most`` packages by on-CPU time, with their shares of it."""
    files = busy["filename"].fillna("").astype(str)
    names = {f: package_of(f) for f in files.unique()}
    cpu = busy.groupby([busy[key], files.map(names).rename("package")])["cpu_ns"].sum()
    return cpu.groupby(level=0).apply(lambda of: shares_words(of.droplevel(0), most))


def shares_words(time: pd.Series, most: int = 3) -> str:
    """The ``most`` largest entries of ``time`` (indexed by name) with their shares of its
    sum, largest first (``h11 35%, asyncio 30%``); "" where it sums to nothing."""
    total = float(time.sum())
    if total <= 0:
        return ""
    top = (time / total).sort_values(ascending=False).head(most)
    return ", ".join(f"{name} {share:.0%}" for name, share in top.items())


def _reading_at(table: pd.DataFrame, column: str, ts_ns: np.ndarray) -> np.ndarray:
    """The reading of ``column`` (mean over devices) whose interval holds each instant:
    the first at or after it, since a reading covers the time since the one before (the
    host's CPU counters' difference, NVML's utilisation over its last sample period);
    past the last reading, the last. NaN without any.

    Resource readings come from the sidecar's perf_counter: CLOCK_MONOTONIC, the same
    clock as the target's on Linux, so timestamps compare directly. The reading before
    an instant instead lagged by one interval, and a sidecar a busy host held back left
    every sample before its first, late reading without one (tokenize_pool beside a busy
    loop: its only reading after the target's end, in 21 runs of 30, 2026-11-28).
    """
    if table.empty or len(ts_ns) == 0:
        return np.full(len(ts_ns), np.nan)
    per_tick = table.groupby("ts_ns")[column].mean().sort_index()
    idx = np.searchsorted(per_tick.index.to_numpy(), ts_ns, side="left")
    values = per_tick.to_numpy(dtype="float64")
    return values[np.minimum(idx, len(values) - 1)]


def host_busy_percent(
    system: pd.DataFrame, cpu_count: int, start_ns: int | None = None
) -> pd.DataFrame:
    """The host's readings (``ts_ns``, ``cpu_percent``) with probe's helper processes'
    own CPU (``probe_cpu_s``: the sidecar's and the finisher's, per interval) taken out:
    the busy share the service met from other processes and itself. The finisher imports
    the analysis stack at SCHED_IDLE while the target runs, on a core the target leaves
    idle (tokenize_pool, GIL-bound at one core of two: the finisher 0.68-0.72 of a core
    for 1.3 s, the host read 88-94% busy against ~50% without probe), and yields that
    core to any thread that wants it: counted as busy, the rules took a GIL-bound pool
    beside an idle core for threads waiting for a core.

    ``interval_s``: the time each reading covers, the first one's from ``start_ns`` (the
    run's start, where the sidecar's first interval begins: ``probe run`` reads the
    host's counters as it starts it), its helpers' CPU all theirs so far."""
    if system.empty or "probe_cpu_s" not in system:
        return system
    s = system.sort_values("ts_ns")
    ts = s["ts_ns"].astype("int64")
    helper_s = s["probe_cpu_s"].astype("float64")
    elapsed_s, spent_s = ts.diff() / 1e9, helper_s.diff()
    if start_ns is not None and ts.iloc[0] > start_ns:
        elapsed_s.iloc[0] = (ts.iloc[0] - start_ns) / 1e9
        spent_s.iloc[0] = helper_s.iloc[0]
    helper = (spent_s / elapsed_s).where(elapsed_s > 0).fillna(0.0).clip(lower=0.0)
    busy = s["cpu_percent"].astype("float64") - 100.0 * helper / max(1, cpu_count)
    return s.assign(cpu_percent=busy.clip(lower=0.0), interval_s=elapsed_s)


def run_start_ns(run: Run) -> int | None:
    """The run's start on the target's perf clock (meta.json's ``clock``); None where
    the run does not say."""
    start = (run.meta.get("clock") or {}).get("perf_ns")
    return int(start) if start else None


def _with_resources(run: Run, samples: pd.DataFrame, key: str, split: pd.DataFrame) -> None:
    """Resource figures within each stage: means of the readings at its samples (the
    host's busy share without probe's helpers: ``host_busy_percent``)."""
    ts = samples["ts_ns"].to_numpy()
    cpu_count = int((run.meta.get("host") or {}).get("cpu_count") or 1)
    host = host_busy_percent(run.tables["system"], cpu_count, run_start_ns(run))
    for column, table, reading in (
        ("gpu_util", run.tables["gpu"], "util_percent"),
        ("host_cpu_percent", host, "cpu_percent"),
    ):
        values = pd.Series(_reading_at(table, reading, ts), index=samples.index)
        split[column] = values.groupby(samples[key]).mean()


def _percentiles(durations: pd.Series) -> tuple[float | None, float | None, float | None]:
    if durations.empty:
        return None, None, None
    q = durations.quantile([0.5, 0.95, 0.99]) / 1e6
    return float(q.iloc[0]), float(q.iloc[1]), float(q.iloc[2])


def _requests(indexed: pd.DataFrame, is_request: np.ndarray) -> RequestFigures:
    req = indexed[is_request]
    if req.empty:
        return _empty_requests()
    start_ns, end_ns = int(req["start_ns"].min()), int(req["end_ns"].max())
    window = (end_ns - start_ns) / 1e9
    total = float(req["dur_ns"].sum()) / 1e9
    p50, p95, p99 = _percentiles(latency_ns(req))
    return RequestFigures(
        count=len(req),
        window_s=window,
        throughput_per_s=len(req) / window if window > 0 else None,
        p50_ms=p50,
        p95_ms=p95,
        p99_ms=p99,
        total_s=total,
        concurrency=total / window if window > 0 else 1.0,
        start_ns=start_ns,
        end_ns=end_ns,
    )


def _stage_table(
    run: Run, spans: pd.DataFrame, samples: pd.DataFrame, wall_s: float
) -> tuple[pd.DataFrame, RequestFigures]:
    is_request = spans["is_request"].to_numpy()
    requests = _requests(spans, is_request)
    start = spans["start_ns"].to_numpy()
    end = spans["end_ns"].to_numpy()
    name = spans["name"].astype(str).to_numpy()
    dur = spans["dur_ns"]

    # Self time: a span's duration minus the union of its children's intervals.
    parent = spans["parent_pos"].to_numpy()
    child = parent >= 0
    children = covered_ns(parent[child], start[child], np.minimum(end[child], end[parent[child]]))
    self_ns = dur.to_numpy().astype("float64")
    self_ns[children.index.to_numpy(dtype=np.int64)] -= children.to_numpy()

    g = spans.assign(self_ns=np.clip(self_ns, 0, None)).groupby("name", sort=False)
    table = pd.DataFrame(
        {
            "category": g["category"].agg(lambda c: c.mode().iat[0]),
            "count": g.size().astype("float64"),
            "total_s": g["dur_ns"].sum() / 1e9,
            "self_s": g["self_ns"].sum() / 1e9,
            "p50_ms": g["dur_ns"].quantile(0.5) / 1e6,
            "p95_ms": g["dur_ns"].quantile(0.95) / 1e6,
            "p99_ms": g["dur_ns"].quantile(0.99) / 1e6,
            "threads": g["thread_id"].nunique(),
        }
    )
    union_all = covered_ns(name, start, end)
    table["wall_share"] = (union_all / 1e9 / wall_s).clip(upper=1.0) if wall_s > 0 else 0.0
    table["concurrency"] = (table["total_s"] * 1e9 / union_all).fillna(1.0)

    # Critical path: each span's union within its request, summed over requests.
    root = spans["root_pos"].to_numpy()
    in_request = is_request[root]
    if requests.count:
        # one integer per (request, stage) pair: factorizing the pairs as a MultiIndex
        # of tuples took 0.64 s of 700,000 spans (2026-12-02)
        stage_codes, stages = pd.factorize(name[in_request])
        pairs = root[in_request].astype(np.int64) * len(stages) + stage_codes
        codes, uniques = pd.factorize(pairs)
        per = covered_ns(codes, start[in_request], end[in_request])
        stage_of = pd.Index(stages[uniques[per.index.to_numpy()] % len(stages)])
        path = per.groupby(stage_of).sum() / 1e9
        table["path_s"] = path.reindex(table.index).fillna(0.0)
        table["path_share"] = table["path_s"] / requests.total_s
    else:
        table["path_s"] = 0.0
        table["path_share"] = table["wall_share"]

    if not samples.empty:
        pos = innermost_span(spans, samples["thread_id"].to_numpy(), samples["ts_ns"].to_numpy())
        inside = pos >= 0
        samples = samples[inside].assign(stage=name[pos[inside]])
        split = _sample_split(samples, "stage")
        _with_resources(run, samples, "stage", split)
        table = table.join(split, how="left")
    return table, requests


def _samples_note(*, served: bool, followed: bool) -> str:
    """Where a stage table from stack samples comes from, and what would sharpen it."""
    return (
        (
            "the served app's requests are counted from probe's request spans; "
            if served
            else "no spans recorded: "
        )
        + "stages are the service's functions, from stack samples"
        + (
            " on the main thread's path (its waits on other threads followed to them)"
            if followed
            else ", every thread's summed"
        )
        + " (add @probe.stage for per-stage figures"
        + (")" if served else " and probe.request for per-request ones)")
    )


def served_only(indexed: pd.DataFrame) -> bool:
    """Are all the spans the ones probe's serving middleware made (``probe.serving``:
    attribute ``served``)? Those count requests and time them exactly, but say nothing
    of where a request's time went: an async request's span on the event loop overlaps
    the others open there, and the loop's samples inside it are no more its work than
    theirs (tests/threads_corpus's predict_api read as native CPU in ``POST /predict``,
    83%, where its truth is the GIL in the handler)."""
    return bool(served_spans(indexed["attrs"]).all())


def served_spans(attrs: pd.Series) -> pd.Series:
    """Per span (its JSON ``attrs``): did probe's serving middleware make it (attribute
    ``served`` true)? Only the attributes naming it are parsed, and not those that begin
    with it as the middleware writes them (its handler spans' are that alone: 3,226 of a
    served run's 4,152 spans, each parsed before)."""
    text = attrs.astype("string").fillna("")
    written = (text == _SERVED_ALONE) | text.str.startswith(_SERVED_FIRST)
    named = text.str.contains('"served"', regex=False) & ~written
    served = written.to_numpy(dtype=bool, na_value=False).copy()
    at = named.to_numpy(dtype=bool, na_value=False)
    served[at] = [json.loads(a).get("served") is True for a in text[at]]
    return pd.Series(served, index=attrs.index)


# how the journals write the middleware's attributes (``served`` its first key); a key
# can appear once in a JSON object written from a dict, so these need no parse
_SERVED_ALONE = '{"served": true}'
_SERVED_FIRST = '{"served": true, "'


def _main_thread(run: Run, attributed: pd.DataFrame) -> int | None:
    """The profiled process's main thread, when it runs a batch job's path: None when it
    supervises worker processes from a loop that waits on them, or parks while a server's
    threads serve (grpcio's ``wait_for_termination``), most of its time
    (``analyzers.roles``: idle, so its samples left the work's). Left a batch's, a gRPC
    server's main thread was its start-up and shutdown alone once its parked time left:
    rank_grpc read as "main, waiting on a subprocess", its handlers 11%."""
    threads = run.tables["threads"]
    if threads.empty or "name" not in threads:
        return None
    main = threads["name"] == "MainThread"
    if "pid" in threads and threads["pid"].notna().any():
        main &= threads["pid"] == int(run.meta.get("pid") or threads["pid"].iloc[0])
    ids = threads.loc[main, "thread_id"]
    if not len(ids):
        return None
    tid = int(ids.iloc[0])
    mine = attributed[attributed["thread_id"] == tid]
    time = mine["cpu_ns"] + mine["wait_ns"]
    supervising = float(time[mine["idle_role"].isin(PARKED_MAIN_ROLES)].sum())
    return None if supervising > PATH.serving_majority * float(time.sum()) else tid


def _on_the_path(
    samples: pd.DataFrame, run: Run, hz: float, main: int | None
) -> tuple[pd.DataFrame, pd.Series | None]:
    """The samples as they count on a batch job's critical path (``analyzers.path``), and
    per function the mean number of threads queued on a mutex in it while it ran; else (no batch
    path) the threads that ran the service's own code, summed, and None."""
    factors = critical_path(samples, main, round(1e9 / hz))
    if factors is None:
        users = samples.loc[samples["user_function"] != LIBRARY, "thread_id"].unique()
        return samples[samples["thread_id"].isin(users)], None
    queued = factors["waiters"].groupby(samples["user_function"]).sum()
    scaled = samples.assign(
        cpu_ns=samples["cpu_ns"] * factors["cpu"], wait_ns=samples["wait_ns"] * factors["wait"]
    )
    return scaled[(scaled["cpu_ns"] + scaled["wait_ns"]) > 0], queued


def threads_in_line(samples: pd.DataFrame) -> pd.DataFrame:
    """Per function of the service (``user_function``), indexed by it, its threads in line
    for a limit (``roles.waits_for_a_limit``: a pool's queue, a semaphore) against those
    in its I/O calls, where it has both: ``in_line``, the time waiting at the limit over
    the time in the calls (threads in line per thread in a call); ``in_the_call``, the
    threads in a call on average over the function's sampled span; ``queued_in``, the
    limit. ``tasks.queued_for_a_limit`` is the same for asyncio tasks. A thread waiting
    in a queue's ``get`` in a function with no I/O of its own waits for another thread's
    work (a batcher's answer), not for a permit: it has no row."""
    if samples.empty or "limit" not in samples or not (samples["limit"] != "").any():
        return pd.DataFrame(columns=IN_LINE_COLUMNS)
    service = samples[~samples["user_function"].isin((LIBRARY, UNKNOWN))]
    waits = service["wait_ns"].astype(float)
    at_limit = waits.where((service["limit"] != "") & (service["reason"] == "lock"), 0.0)
    in_call = waits.where(service["reason"].isin(_CALL_WAITS), 0.0)
    by = service["user_function"]
    table = pd.DataFrame(
        {
            "at_limit": at_limit.groupby(by).sum(),
            "in_call": in_call.groupby(by).sum(),
            "span": service.groupby(by)["ts_ns"].agg(lambda ts: float(ts.max() - ts.min())),
            "queued_in": service["limit"].where(at_limit > 0).groupby(by).agg(_most_common),
        }
    )
    table = table[(table["at_limit"] > 0) & (table["in_call"] > 0) & (table["span"] > 0)]
    return pd.DataFrame(
        {
            "in_line": table["at_limit"] / table["in_call"],
            "in_the_call": table["in_call"] / table["span"],
            "queued_in": table["queued_in"],
        }
    )


_CALL_WAITS = ("network", "disk", "subprocess")


def _most_common(values: pd.Series) -> str:
    values = values.dropna()
    return str(values.mode().iloc[0]) if len(values) else ""


def _function_table(
    samples: pd.DataFrame, run: Run, queued: pd.Series | None = None
) -> pd.DataFrame:
    """Without spans: the service's own functions, each charged its callees' time (and,
    on a batch path, the threads queued on a mutex in each: ``queued``)."""
    if samples.empty:
        return pd.DataFrame()
    split = _sample_split(samples, "user_function")
    _with_resources(run, samples, "user_function", split)
    if queued is not None:
        # threads queued on a mutex in the stage while it ran (mean: analyzers.path)
        split["queued"] = queued.reindex(split.index).fillna(0.0)
    total = float(split["sampled_s"].sum())
    split["category"] = "function"
    split["count"] = np.nan
    split["total_s"] = split["sampled_s"]
    split["self_s"] = split["sampled_s"]
    for column in ("p50_ms", "p95_ms", "p99_ms"):
        split[column] = np.nan
    split["threads"] = samples.groupby("user_function")["thread_id"].nunique()
    split["wall_share"] = split["sampled_s"] / total if total > 0 else 0.0
    split["path_s"] = split["sampled_s"]
    split["path_share"] = split["wall_share"]
    split["concurrency"] = 1.0
    return split


def breakdown(run: Run) -> Breakdown:
    """Per-stage (or per-function) breakdown of a loaded run (``probe.rundir.load``)."""
    attributed, brief, limits, streams, batches = _attributed_samples(run)
    samples, idle = _idle_capacity(attributed)
    hz = float((run.meta.get("settings") or {}).get("hz") or DEFAULT_HZ)
    spans = run.tables["spans"]
    wall_s = float(run.meta.get("duration_s") or 0.0)
    if wall_s <= 0 and not spans.empty:
        wall_s = float(spans["end_ns"].max() - spans["start_ns"].min()) / 1e9
    sampled_s = float((samples["cpu_ns"] + samples["wait_ns"]).sum()) / 1e9
    cpu_s = float(samples["cpu_ns"].sum()) / 1e9
    python_cpu_s = float(samples["cpu_ns"].where(~samples["native"], 0.0).sum()) / 1e9
    tensor_cpu_s = float(samples["cpu_ns"].where(samples["tensor"], 0.0).sum()) / 1e9
    loops = loop_lag(run.tables["loop_samples"], attributed)
    copies = transfer_table(attributed)
    notes = idle_notes(idle) + transfer_notes(copies, wall_s) + loop_lag_notes(loops)
    indexed = pd.DataFrame()
    followed = False
    if not spans.empty:
        indexed = index_spans(spans)
        indexed["is_request"] = request_mask(indexed)
    if not spans.empty and not (served_only(indexed) and not samples.empty):
        table, requests = _stage_table(run, indexed, samples, wall_s)
        source = "spans"
    elif not samples.empty:
        on_path, queued = _on_the_path(samples, run, hz, _main_thread(run, attributed))
        followed = queued is not None
        in_line = limits.combine_first(threads_in_line(samples))
        table = _function_table(on_path, run, queued).join(in_line, how="left")
        requests = _empty_requests() if indexed.empty else _requests(indexed, indexed["is_request"])
        source = "samples"
        notes.append(_samples_note(served=not indexed.empty, followed=followed))
    else:
        table, requests, source = pd.DataFrame(), _empty_requests(), "none"
    table = _complete(table).sort_values("path_s", ascending=False, kind="stable")
    table.index.name = "name"
    return Breakdown(
        source=source,
        wall_s=wall_s,
        stages=table,
        requests=requests,
        sampled_s=sampled_s,
        cpu_s=cpu_s,
        python_cpu_s=python_cpu_s,
        tensor_cpu_s=tensor_cpu_s,
        notes=notes,
        spans=indexed,
        idle=idle,
        sample_hz=hz,
        brief_lock_stacks=brief,
        loops=loops,
        path_followed=followed,
        work_samples=samples,
        copy_cores=copy_cores(copies, wall_s),
        streams=streams,
        batches=batches,
    )


_DEFAULTS: dict[str, Any] = {
    "category": "stage",
    "count": np.nan,
    "total_s": 0.0,
    "self_s": 0.0,
    "p50_ms": np.nan,
    "p95_ms": np.nan,
    "p99_ms": np.nan,
    "wall_share": 0.0,
    "path_s": 0.0,
    "path_share": 0.0,
    "sampled_s": 0.0,
    "cpu_share": 0.0,
    "python_share": 0.0,
    "native_share": 0.0,
    "tensor_share": 0.0,
    "awaited_share": 0.0,
    **{f"wait_{r}": 0.0 for r in WAIT_REASONS},
    "run_queue_share": 0.0,  # of wait_unknown: the kernel's count (_sample_split)
    "threads": 0,
    "concurrency": 1.0,
    "gpu_util": np.nan,
    "host_cpu_percent": np.nan,
    "top_call": "",
    "top_line": "",
    "top_packages": "",
    "queued": 0.0,
    # tasks or threads in line for a pool's or a semaphore's permits, per one in the call
    # (tasks.queued_for_a_limit, threads_in_line)
    "in_line": 0.0,
    "in_the_call": 0.0,
    "queued_in": "",
}


def _complete(table: pd.DataFrame) -> pd.DataFrame:
    """Every column present, in order; stages without samples get zero splits."""
    for column, default in _DEFAULTS.items():
        if column not in table.columns:
            table[column] = default
        elif column not in ("gpu_util", "host_cpu_percent", "p50_ms", "p95_ms", "p99_ms", "count"):
            table[column] = table[column].fillna(default)
    return table[list(_DEFAULTS)]
