"""The diagnosis of a run: breakdown -> findings -> estimates -> recommendations, and leaks.

``diagnose(run)`` -> ``Diagnosis``; ``Diagnosis.to_dict()`` is ``diagnosis.json``
(schema ``probe.diagnosis/1``, see DESIGN.md). Pure: the loaded run in, a frozen
dataclass out; the same run directory always gives the same diagnosis.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from probe.analyzers.batching import BatchAdvice, spans_advice
from probe.analyzers.breakdown import (
    Breakdown,
    breakdown,
    host_busy_percent,
    run_start_ns,
    served_spans,
    shares_words,
)
from probe.analyzers.capacity import Capacity, Demands, capacity
from probe.analyzers.collector import collector_time, full_collections, over_words
from probe.analyzers.empty_run import NOTHING_TO_JUDGE, SCHEMA
from probe.analyzers.endpoints import EndpointFigures, endpoints
from probe.analyzers.intra_op import intra_op_note, intra_op_oversubscription, native_threads
from probe.analyzers.leaks import (
    NO_LEAK,
    LeakVerdict,
    covering_the_run,
    growing_sites,
    growing_types,
    judge_recorded,
    pile_notes,
    piling_up,
)
from probe.analyzers.recommendations import Recommendation, demands, minor, proposed, ranked
from probe.analyzers.rules import (
    THRESHOLDS,
    Finding,
    RunFacts,
    allowed_cores,
    classify,
    cold_start,
    gil_waits_on_one_core,
    interpreter_waits_by_demand,
    read_together,
    runnable_beside_idle_cores,
)
from probe.analyzers.run_queue import (
    others_held_cores,
    others_queued_share,
    run_queue_note,
    run_queue_wait,
    throttled_share,
    throttling_note,
)
from probe.analyzers.stacks import IMPORTS, NOT_THE_SERVICE
from probe.analyzers.streams import stream_note
from probe.analyzers.vocabulary import (
    confidence_words,
    kind_words,
    speedup_range_words,
    subkind_words,
)
from probe.rundir.reader import Run

if TYPE_CHECKING:
    from probe.analyzers.torch_windows import TorchWindowsDiagnosis

__all__ = ["SCHEMA", "Diagnosis", "diagnose", "run_facts"]


@dataclass(frozen=True)
class Diagnosis:
    run: dict[str, Any]
    primary: dict[str, Any]
    findings: list[Finding]
    recommendations: list[Recommendation]
    leak: LeakVerdict
    breakdown: Breakdown
    notes: list[str] = field(default_factory=list)
    torch: TorchWindowsDiagnosis | None = None  # the torch.profiler windows', if any
    endpoints: EndpointFigures | None = None  # a served HTTP app's, if any
    capacity: Capacity | None = None  # a served HTTP app's (analyzers.capacity), if any
    # dynamic batching, where a stage's spans carry a ``batch`` size (analyzers.batching)
    batching: BatchAdvice | None = None
    # fixes proposed but worth under 1.25x alone (recommendations.minor): they compound
    # with the others, and ``probe diff --applied`` can name them
    minor_recommendations: list[Recommendation] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        stages = self.breakdown.stages
        return {
            "schema": SCHEMA,
            "run": self.run,
            "primary": self.primary,
            "findings": [f.to_dict() for f in self.findings],
            "recommendations": [r.to_dict() for r in self.recommendations],
            "minor_recommendations": [r.to_dict() for r in self.minor_recommendations],
            "leak": self.leak.to_dict(),
            "stages": _stages_records(stages),
            "notes": self.notes,
            **({"torch": self.torch.to_dict()} if self.torch is not None else {}),
            **({"endpoints": _endpoints_block(self.endpoints)} if self.endpoints else {}),
            **({"capacity": self.capacity.to_dict()} if self.capacity is not None else {}),
            **({"batching": self.batching.to_dict()} if self.batching is not None else {}),
        }


def _endpoints_block(figures: EndpointFigures) -> dict[str, Any]:
    return {
        "window_s": round(figures.window_s, 6),
        "limiting": figures.limiting,
        "slowest": figures.slowest,
        "server_s": round(figures.server_s, 6),
        "routes": _stages_records(figures.table),
        **({"workers": _workers_records(figures.workers)} if figures.workers is not None else {}),
    }


def _rounded(value: Any) -> float | None:
    return round(float(value), 6) if pd.notna(value) else None


def _workers_records(workers: pd.DataFrame) -> list[dict[str, Any]]:
    return [
        {
            "pid": int(pid),
            "requests": int(row["requests"]),
            "errors": int(row["errors"]),
            "p50_ms": _rounded(row["p50_ms"]),
            "p99_ms": _rounded(row["p99_ms"]),
            "cpu_s": round(float(row["cpu_s"]), 6),
            "routes": dict(row["routes"]),
        }
        for pid, row in workers.iterrows()
    ]


def _stages_records(stages: pd.DataFrame) -> list[dict[str, Any]]:
    out = []
    for name, row in stages.iterrows():
        record: dict[str, Any] = {"name": str(name)}
        for column, value in row.items():
            if isinstance(value, float | np.floating):
                record[str(column)] = round(float(value), 6) if math.isfinite(value) else None
            elif isinstance(value, np.integer):
                record[str(column)] = int(value)
            else:
                record[str(column)] = value
        out.append(record)
    return out


def _process_cores(
    resources: pd.DataFrame,
    lo: int | None,
    hi: int | None,
    *,
    modes: tuple[str, ...] = ("user", "system"),
) -> float:
    """Mean cores the process tree used between ``lo`` and ``hi`` (the whole run if None),
    in the CPU ``modes`` given."""
    if resources.empty:
        return 0.0
    r = _within(resources, lo, hi)
    cpu = sum(r[f"cpu_{mode}_s"] for mode in modes)
    span_s = float(r["ts_ns"].max() - r["ts_ns"].min()) / 1e9
    if span_s <= 0:
        return 0.0
    ordered = r.assign(cpu=cpu).sort_values("ts_ns").groupby("pid")["cpu"]
    used = float((ordered.last() - ordered.first()).clip(lower=0).sum())
    return used / span_s


def _within(resources: pd.DataFrame, lo: int | None, hi: int | None) -> pd.DataFrame:
    """The readings between ``lo`` and ``hi`` where those hold two ticks or more, else all
    of them (the whole run when ``lo`` or ``hi`` is None)."""
    if lo is None or hi is None:
        return resources
    inside = resources[(resources["ts_ns"] >= lo) & (resources["ts_ns"] <= hi)]
    return inside if inside["ts_ns"].nunique() >= 2 else resources


def _children_cpu(resources: pd.DataFrame, lo: int | None, hi: int | None) -> float | None:
    """CPU seconds of the children the target waited for between ``lo`` and ``hi`` (the
    whole run if None): its last reading's count less its first. None where the run does
    not have it (before 2026-12-07, or off Linux) or read it fewer than twice."""
    if resources.empty or "children_cpu_s" not in resources:
        return None
    root = resources[resources["is_root"].astype(bool)].dropna(subset=["children_cpu_s"])
    r = _within(root, lo, hi)
    if len(r) < 2:
        return None
    ordered = r.sort_values("ts_ns")["children_cpu_s"]
    return max(0.0, float(ordered.iloc[-1] - ordered.iloc[0]))


def _children_seen(resources: pd.DataFrame) -> dict[str, int]:
    """The tree's other processes, by how long they were read: under a quarter of the
    run (a child per call) or longer (a pool's workers, a helper kept running)."""
    others = resources[~resources["is_root"].astype(bool)]
    if others.empty:
        return {"short_lived_children": 0, "long_lived_children": 0}
    span = float(resources["ts_ns"].max() - resources["ts_ns"].min())
    lived = others.groupby("pid")["ts_ns"].agg(lambda ts: float(ts.max() - ts.min()))
    short = int((lived < 0.25 * span).sum())
    return {"short_lived_children": short, "long_lived_children": len(lived) - short}


def _sampled_cores(samples: pd.DataFrame) -> float:
    """Mean cores the sampled threads used (their CPU clocks, exact) over the samples'
    span: the process's own, where the sidecar did not read it twice. Niced, it may not
    run at all beside a target keeping its one CPU busy (tokenize_pool under ``taskset
    -c 0``: one reading, at the end, and "CPU 0.00 of 1 core")."""
    if samples.empty:
        return 0.0
    start = int((samples["ts_ns"] - samples["wall_ns"]).min())
    span_s = (int(samples["ts_ns"].max()) - start) / 1e9
    return float(samples["cpu_ns"].sum()) / 1e9 / span_s if span_s > 0 else 0.0


def _user_share(resources: pd.DataFrame, lo: int | None, hi: int | None) -> float:
    """The share of the process tree's CPU in user mode over the window (1.0 unknown)."""
    total = _process_cores(resources, lo, hi)
    user = _process_cores(resources, lo, hi, modes=("user",))
    return min(1.0, user / total) if total > 0 else 1.0


def _host_cores(
    system: pd.DataFrame,
    cpu_count: int,
    lo: int | None,
    hi: int | None,
    start_ns: int | None = None,
) -> float:
    """Mean cores busy on the host between ``lo`` and ``hi``, less probe's helper
    processes' own (``host_busy_percent``): they stop with the run, the others stay.
    Each reading weighs the time it covers: a sidecar a busy host held back reads its
    first, long interval late, then every tenth of a second."""
    s = host_busy_percent(system, cpu_count, start_ns)
    if s.empty:
        return 0.0
    s = s.dropna(subset=["cpu_percent"])
    if lo is not None and hi is not None:
        inside = (s["ts_ns"] >= lo) & (s["ts_ns"] <= hi)
        if inside.any():
            s = s[inside]
    if s.empty:
        return 0.0
    busy = s["cpu_percent"].astype("float64")
    weight = s.get("interval_s", pd.Series(0.0, index=s.index)).fillna(0.0).clip(lower=0.0)
    mean = float((busy * weight).sum() / weight.sum()) if weight.sum() > 0 else busy.mean()
    return max(0.0, mean / 100.0 * cpu_count)


def _starved_share(run: Run) -> tuple[float, float]:
    gpu = run.tables["gpu"]
    resources = run.tables["resources"]
    if gpu.empty or resources.empty:
        return 0.0, float("nan")
    util = gpu.groupby("ts_ns")["util_percent"].mean().sort_index()
    tree = resources.groupby("ts_ns")[["cpu_user_s", "cpu_system_s"]].sum().sort_index()
    cpu_s = tree["cpu_user_s"] + tree["cpu_system_s"]
    cores = cpu_s.diff() / (pd.Series(cpu_s.index, index=cpu_s.index).diff() / 1e9)
    idx = np.searchsorted(cores.index.to_numpy(), util.index.to_numpy(), side="right") - 1
    at = np.where(idx >= 1, cores.to_numpy()[np.maximum(idx, 0)], np.nan)
    t = THRESHOLDS
    starved = (util.to_numpy() < t.starved_gpu_util) & (at * 100.0 > t.starved_cpu_util)
    return float(np.nanmean(starved)) if len(starved) else 0.0, float(util.mean())


def _first_request(indexed: pd.DataFrame) -> tuple[float | None, dict[str, float]]:
    """The first request's latency, and the stages that took far longer in it.

    A stage is cold in the first request when its time there is at least
    ``cold_start_ratio`` times its median elsewhere (or it ran only there); the seconds
    given are the excess, which moving the work to start-up takes off the path.
    ``indexed``: ``Breakdown.spans``.
    """
    found = _in_first_request(indexed)
    if found is None:
        return None, {}
    first, in_first = found
    is_req = indexed["is_request"].to_numpy()
    names = indexed["name"].astype(str)
    there = indexed[in_first].groupby(names[in_first])["dur_ns"].sum()
    elsewhere = indexed[~in_first & ~is_req].groupby(names[~in_first & ~is_req])["dur_ns"]
    median = elsewhere.median()
    stages = {}
    for name, ns in there.items():
        usual = float(median.get(name, 0.0))
        if ns >= THRESHOLDS.cold_start_ratio * usual:
            stages[str(name)] = (float(ns) - usual) / 1e9
    return float(indexed.loc[first, "dur_ns"]) / 1e6, stages


def _in_first_request(indexed: pd.DataFrame) -> tuple[int, np.ndarray] | None:
    """The first request's row of ``Breakdown.spans`` (rows are labelled by position, as
    ``root_pos`` is), and which rows are spans inside it (the request itself not); None
    when there is no request."""
    if indexed.empty:
        return None
    is_req = indexed["is_request"].to_numpy()
    if not is_req.any():
        return None
    first = int(indexed[is_req].sort_values("start_ns").index[0])
    return first, (indexed["root_pos"].to_numpy() == first) & ~is_req


def _first_request_cpu(
    indexed: pd.DataFrame, resources: pd.DataFrame, stages: dict[str, float], probe_cores: float
) -> dict[str, float]:
    """The CPU the process tree used (``/proc``, probe's own threads' mean left out) over
    each cold stage's spans in the first request, scaled to the stage's excess there:
    the part of its time it ran rather than waited. Work other threads did meanwhile
    counts too (a cold start seldom has company)."""
    found = None if not stages or resources.empty else _in_first_request(indexed)
    if found is None:
        return {}
    spans = indexed[found[1]]
    out = {}
    for name, excess_s in stages.items():
        mine = spans[spans["name"].astype(str) == name]
        wall_s = float(mine["dur_ns"].sum()) / 1e9
        if wall_s <= 0:
            continue
        used = sum(
            _cpu_between(resources, int(start), int(start + dur)) - probe_cores * dur / 1e9
            for start, dur in zip(mine["start_ns"], mine["dur_ns"], strict=True)
        )
        out[name] = max(0.0, used) * excess_s / wall_s
    return out


def _cpu_between(resources: pd.DataFrame, lo: int, hi: int) -> float:
    """CPU seconds the process tree used between ``lo`` and ``hi``: each process's
    cumulative user and system time, interpolated between its readings."""
    used = 0.0
    for _, rows in resources.sort_values("ts_ns").groupby("pid"):
        cpu = (rows["cpu_user_s"] + rows["cpu_system_s"]).to_numpy(dtype=float)
        ts = rows["ts_ns"].to_numpy(dtype=float)
        used += float(np.interp(hi, ts, cpu) - np.interp(lo, ts, cpu))
    return used


def _collector_figure(meta: dict[str, Any], name: str) -> Any:
    """One of the figures the collector wrote into meta.json at the run's end (None in a
    run that lacks it: killed, or older)."""
    return (meta.get("collector") or {}).get(name)


def _full_collection(meta: dict[str, Any]) -> dict[str, Any] | None:
    """The session's full collection at the run's end, its time in seconds (``at_s``) on
    the clock of the run's tables."""
    full = _collector_figure(meta, "full_collection_at_end")
    if not full or full.get("at_ns") is None:
        return full
    return {**full, "at_s": int(full["at_ns"]) / 1e9}


def _probe_cores(meta: dict[str, Any]) -> float:
    """Cores probe's own in-process threads used (sampler, collector): not the service's."""
    own = _collector_figure(meta, "collector_cpu_s") or {}
    duration = float(meta.get("duration_s") or 0.0)
    return sum(float(v) for v in own.values()) / duration if duration > 0 else 0.0


def ticks_taken(meta: dict[str, Any], hz: float, span_s: float) -> float | None:
    """The share of the ticks due between the first and the last sample (``span_s``
    apart, one due every mean interval: the pacer's, else 1/``hz``) that the stack
    sampler took, at most 1. A sampler in the target's process takes a tick only once it
    holds the GIL; where it waits for it, the ticks it missed leave the rows either side
    to stand for them. (Over the run's whole duration a 0.1-s script read 0.75-0.79:
    the session's start and end, before the first tick and after the last.) None where
    the run does not say (no tick count, no samples)."""
    ticks = _collector_figure(meta, "stack_ticks")
    pacing = _collector_figure(meta, "stack_pacing") or {}
    interval = float(pacing.get("mean_interval_s") or (1.0 / hz if hz > 0 else 0.0))
    if ticks is None or span_s <= 0 or interval <= 0:
        return None
    return min(1.0, float(ticks) / (span_s / interval + 1.0))


def _samples_span_s(samples: pd.DataFrame) -> float:
    """Seconds from the first sample row's instant to the last's (0 without two)."""
    if samples.empty:
        return 0.0
    return float(samples["ts_ns"].max() - samples["ts_ns"].min()) / 1e9


def run_facts(run: Run, bd: Breakdown) -> RunFacts:
    meta = run.meta
    gpus = meta.get("gpus") or {}
    has_gpu = bool(gpus.get("available")) and not run.tables["gpu"].empty
    host = meta.get("host") or {}
    cpu_count = int(host.get("cpu_count") or 1)
    allowed = host.get("cores_allowed")
    lo, hi = bd.requests.start_ns, bd.requests.end_ns
    starved, util = _starved_share(run) if has_gpu else (0.0, float("nan"))
    first_ms, first_stages = _first_request(bd.spans)
    probe_cores = _probe_cores(meta)
    process_cores = max(0.0, _process_cores(run.tables["resources"], lo, hi) - probe_cores)
    if run.tables["resources"]["ts_ns"].nunique() < 2:
        process_cores = _sampled_cores(run.tables["samples"])
    host_cores_busy = _host_cores(run.tables["system"], cpu_count, lo, hi, run_start_ns(run))
    waits = run_queue_wait(run.tables["samples"])
    return RunFacts(
        has_gpu=has_gpu,
        cpu_count=cpu_count,
        cores_allowed=float(allowed) if allowed else None,
        cpu_limit=str(host.get("cpu_limit") or ""),
        process_cores=process_cores,
        user_share=_user_share(run.tables["resources"], lo, hi),
        host_cores_busy=host_cores_busy,
        others_queued=others_queued_share(
            waits, host_cores_busy=host_cores_busy, process_cores=process_cores
        ),
        run_queue=waits,
        gpu_util_mean=util,
        starved_time_share=starved,
        first_request_ms=first_ms,
        first_request_stages=first_stages,
        first_request_stage_cpu=_first_request_cpu(
            bd.spans, run.tables["resources"], first_stages, probe_cores
        ),
        sample_hz=bd.sample_hz,
        ticks_taken=ticks_taken(meta, bd.sample_hz, _samples_span_s(run.tables["samples"])),
        kernel_unavailable=str(
            (_collector_figure(meta, "kernel_states") or {}).get("unavailable") or ""
        ),
        copy_cores=bd.copy_cores,
        children_cpu_s=_children_cpu(run.tables["resources"], lo, hi),
        **_children_seen(run.tables["resources"]),
        collector=collector_time(
            run.tables.get("gc_pauses", pd.DataFrame()),
            bd.work_samples,
            bd.wall_s,
            (lo, hi) if bd.requests.count else (None, None),
        ),
        native_cpu_share=_native_cpu_share(run),
    )


def _native_cpu_share(run: Run) -> float:
    """Of the target process's CPU less probe's, its native threads' share (the threads
    neither Python's nor probe's); 0 where the run does not name probe's threads."""
    own = (run.meta.get("collector") or {}).get("own_tids")
    threads = run.tables.get("threads")
    if own is None or threads is None or threads.empty:
        return 0.0
    python = {int(t) for t in threads["thread_id"]}
    pid = int(run.meta.get("pid") or 0)
    return native_threads(run.tables.get("os_threads"), pid, python, set(own))[1]


def _leak(run: Run, bd: Breakdown) -> LeakVerdict:
    """RSS trend of the target process, over the serving window when there are requests
    (start-up and shutdown -- a final snapshot, teardown -- are not the service's
    behaviour), judged per request when the requests are known."""
    lo, hi = bd.requests.start_ns, bd.requests.end_ns
    resources = run.tables["resources"]
    root = resources[resources["is_root"]] if not resources.empty else resources
    if lo is not None and hi is not None and len(root):
        serving = root[(root["ts_ns"] >= lo) & (root["ts_ns"] <= hi)]
        run_ns = float(root["ts_ns"].max() - root["ts_ns"].min())
        # only when serving is most of the run: else a background leak would be missed
        if len(serving) >= 8 and (hi - lo) >= 0.25 * run_ns:
            root = serving
    if root.empty:
        return judge_recorded(np.array([]), np.array([]))
    limit = (run.meta.get("host") or {}).get("memory_limit_bytes") or None
    spans = bd.spans
    ends = (
        spans.loc[spans["is_request"], "end_ns"].to_numpy() / 1e9
        if len(spans) and "is_request" in spans
        else None
    )
    t_s = root["ts_ns"].to_numpy() / 1e9
    heap = run.tables["heap"]
    blocks = (
        (heap["ts_ns"].to_numpy() / 1e9, heap["allocated_blocks"].to_numpy())
        if len(heap) and "allocated_blocks" in heap
        else None
    )
    in_use = (
        heap["malloc_in_use_bytes"].to_numpy(dtype="float64", na_value=np.nan)
        if blocks is not None and heap["malloc_in_use_bytes"].notna().any()
        else None
    )
    verdict = judge_recorded(
        t_s,
        root["rss_bytes"].to_numpy(),
        request_end_s=ends,
        limit_bytes=limit,
        heap=blocks,
        malloc_in_use=in_use,
        full_collection=_full_collection(run.meta),
        cpu=_cpu_used(root),
        started_s=_imports_end_s(bd.work_samples),
    )
    verdict = covering_the_run(verdict, t_s, float(run.meta.get("duration_s") or 0.0))
    # what grows, whenever the floor rose: evidence for a leak and for an open question
    rose = verdict.state != NO_LEAK
    sites = growing_sites(run.tables["memory_sites"]) if rose else []
    types = growing_types(run.tables["gc_types"]) if rose else []
    t0 = float(root["ts_ns"].min()) / 1e9
    onset = None if verdict.onset_s is None else verdict.onset_s - t0
    piles = _piling_up(run, root, t_s, ends)
    return replace(verdict, onset_s=onset, top_sites=sites, growing_types=types, piling_up=piles)


def _imports_end_s(samples: pd.DataFrame) -> float | None:
    """When start-up's imports ended, on the samples' clock (s): the last sample caught
    importing (``stacks.IMPORTS``) while imports still held at least half the time
    sampled since the run's first sample -- the start-up stretch, not a module a request
    imports lazily later on. None where nothing was caught importing."""
    if samples.empty or "user_function" not in samples:
        return None
    ordered = samples.sort_values("ts_ns", kind="stable")
    importing = (ordered["user_function"] == IMPORTS).to_numpy()
    time = (ordered["cpu_ns"] + ordered["wait_ns"]).to_numpy(dtype="float64")
    share = np.cumsum(time * importing) / np.maximum(np.cumsum(time), 1.0)
    held = np.flatnonzero(importing & (share >= 0.5))
    return float(ordered["ts_ns"].iloc[held[-1]]) / 1e9 if len(held) else None


def _cpu_used(root: pd.DataFrame) -> tuple[np.ndarray, np.ndarray] | None:
    """The target's CPU seconds so far at each of its readings (user and system), the
    leak's work axis where no requests are counted; None where unread."""
    if not {"cpu_user_s", "cpu_system_s"} <= set(root.columns):
        return None
    used = root["cpu_user_s"].astype("float64") + root["cpu_system_s"].astype("float64")
    return root["ts_ns"].to_numpy() / 1e9, used.to_numpy(dtype="float64", na_value=np.nan)


def _piling_up(
    run: Run, root: pd.DataFrame, t_s: np.ndarray, ends: np.ndarray | None
) -> list[dict[str, Any]]:
    """The process's threads and descriptors, and its event loops' pending tasks, that
    climbed steadily over the memory series' span ``t_s`` (the serving window, when
    there are requests). Not after a warm-up share, as the memory's test: read once a
    second, a short run's descriptors would be too few, and a pool filling up at the
    start is told apart by its pace (``PileSettings.sustain``)."""
    series = {
        what: (t_s, root[column].to_numpy(dtype="float64", na_value=np.nan))
        for column, what in (("num_threads", "threads"), ("num_fds", "file descriptors"))
        if column in root
    }
    tasks = run.tables.get("task_samples")
    if tasks is not None and len(tasks):
        pending = tasks.groupby("ts_ns")["tasks"].sum()
        series["asyncio tasks"] = (pending.index.to_numpy() / 1e9, pending.to_numpy())
    return piling_up(series, ends, judged_from=float(t_s.min()))


def _summary(findings: list[Finding], recs: list[Recommendation], bd: Breakdown) -> str:
    if not findings:
        return NOTHING_TO_JUDGE
    primary = findings[0]
    where = f"`{primary.stage}`"
    packages = primary.evidence.get("top_packages")
    library = primary.stage in NOT_THE_SERVICE
    path = "request time" if bd.requests.count and bd.source == "spans" else "sampled time"
    held = _held_together(findings, bool(bd.requests.count), path)
    if primary.share < THRESHOLDS.bottleneck_share and not held:
        return _no_dominant_words(primary, path)
    if primary.share < THRESHOLDS.bottleneck_share:
        text = held
    elif primary.rule == "collector_pauses":
        text = _collector_words(primary)
    elif primary.stage == IMPORTS:
        loading = imported_words(bd.work_samples) or packages
        text = (
            f"Start-up-bound: importing modules takes {primary.share:.0%} of {path} "
            f"({where}{f': {loading}' if loading else ''}), paid once per process, before "
            "the work"
        )
    elif library:  # no frame of the service's own code: say whose code it is
        text = (
            f"{kind_words(primary.kind)} in library code, no frame of the service's own "
            f"({where}, {primary.share:.0%} of {path}, {subkind_words(primary.subkind)}"
            + (f"; its CPU in {packages})" if packages else ")")
        )
    else:
        text = (
            f"{kind_words(primary.kind)} in {where} ({primary.share:.0%} of "
            f"{path}, {_what_it_waits_on(primary)})"
        )
    best = next((r for r in recs if r.id != "fix_leak"), None)
    if primary.stage == IMPORTS:
        text += (
            ": more work per process (or one long-lived process) spreads it; imports "
            "deferred to where they are used shorten it (`python -X importtime` lists them)"
        )
    elif best is not None:
        ceiling = f"ceiling {best.ceiling:.1f}×" if math.isfinite(best.ceiling) else "no ceiling"
        stated = speedup_range_words(best.evidence.get("speedup_range"))
        bounds = "; ".join(words for words in (stated, ceiling) if words)
        about = f"about {best.estimated_speedup:.1f}× faster ({bounds})"
        text += f". Best fix: {best.title[0].lower()}{best.title[1:]}, {about}"
    elif library:
        text += ": time in the server's or the libraries' own code, none of the service's to change"
    return text + "." + _doubts_text(primary)


def _no_dominant_words(primary: Finding, path: str) -> str:
    """The verdict where no stage, nor the GIL across stages, holds most of the path."""
    if primary.rule == "collector_pauses":
        largest = _collector_words(primary)
        return f"No dominant bottleneck: the largest part is {largest}." + _doubts_text(primary)
    return (
        f"No dominant bottleneck: the largest stage, `{primary.stage}`, takes "
        f"{primary.share:.0%} of {path} ({primary.kind}/{primary.subkind}, "
        f"{subkind_words(primary.subkind)})." + _doubts_text(primary)
    )


_TOGETHER_WORDS = {
    "gil": "GIL-bound: the stages whose threads the GIL holds back take",
    "interpreter": "CPU-bound in one interpreter: the stages on a CPU or waiting for the GIL take",
}


def _held_together(findings: list[Finding], served: bool, path: str) -> str:
    """The verdict where stages lead the path together, no one of them alone: those the
    GIL holds back (``rules.gil_bound_findings``), or a served process's stages all on a
    CPU or waiting for the GIL (``rules.interpreter_bound_findings``, the reading that
    tells it to run instances; ``rules.read_together``); "" for neither."""
    held, reading = read_together(findings, served)
    if not held:
        return ""
    lead = _TOGETHER_WORDS[reading]
    where = ", ".join(f"`{f.stage}` {f.share:.0%}" for f in held)
    together = sum(f.share for f in held)
    return f"{lead} {together:.0%} of {path} together ({where}), no one of them most"


def imported_words(samples: pd.DataFrame, most: int = 3) -> str:
    """What start-up's imports loaded, by their share of the time caught importing
    (``torch 76%, pandas 22%``); "" where nothing was."""
    if samples.empty or "imported" not in samples:
        return ""
    importing = samples[(samples["user_function"] == IMPORTS) & (samples["imported"] != "")]
    time = (importing["cpu_ns"] + importing["wait_ns"]).groupby(importing["imported"]).sum()
    return shares_words(time, most)


def _imports_notes(findings: list[Finding], bd: Breakdown) -> list[str]:
    """Start-up's imports where they hold a finding's share of the path without leading
    it: their time is in the stage table, once per process."""
    found = next((f for f in findings[1:] if f.stage == IMPORTS), None)
    if found is None:
        return []
    loading = imported_words(bd.work_samples)
    return [
        f"importing modules took {found.share:.0%} of the sampled time"
        + (f" ({loading})" if loading else "")
        + ": start-up, paid once per process; the estimates above count it as unchanged"
    ]


# A finding's share this far from its stage's in the stage table is said: closer, the
# two read as the same figure rounded (the table prints one decimal, the verdict none)
_SHARES_APART = 0.05


def _charged_shares_notes(findings: list[Finding], bd: Breakdown) -> list[str]:
    """Why the verdict's shares differ from the stage table's where the threads' waits
    for the interpreter were charged by CPU demand (``rules.interpreter_waits_by_demand``):
    both are on one screen, and embed_api read "embed 46%" in the verdict beside "55.9%" in
    the table, unexplained."""
    charged = interpreter_waits_by_demand(bd.stages, path_followed=bd.path_followed)
    if charged is bd.stages:
        return []
    pairs = [
        (f.stage, f.share, float(bd.stages.at[f.stage, "path_share"]))
        for f in findings[:3]
        if f.stage in bd.stages.index
    ]
    if not any(abs(share - table) >= _SHARES_APART for _, share, table in pairs):
        return []
    apart = ", ".join(f"`{stage}` {share:.0%} against {table:.0%}" for stage, share, table in pairs)
    return [
        "the verdict's shares count the threads' waits for the interpreter (the GIL, or a "
        "core) by each stage's CPU time; the table counts each wait where its thread "
        f"waited: {apart}. Threads waiting in a function say how many wait there, not "
        "how much of the interpreter it holds"
    ]


def _intra_op_notes(run: Run, bd: Breakdown, facts: RunFacts) -> list[str]:
    """torch's intra-op threads where several threads call torch at once and fill the
    cores without them (``analyzers.intra_op``)."""
    collector = run.meta.get("collector") or {}
    found = intra_op_oversubscription(
        bd.work_samples,
        run.tables.get("threads"),
        run.tables.get("os_threads"),
        int(run.meta.get("pid") or 0),
        collector.get("own_tids"),
        allowed_cores(facts),
    )
    return intra_op_note(found)


def _collector_notes(facts: RunFacts) -> list[str]:
    """The collector's time, where it holds a finding's share of the run (its finding
    says it where it leads; the note says it wherever the stages' shares hide it: its
    time is inside theirs, in whatever code allocated when a collection came due)."""
    c = facts.collector
    if c is None or c.share < THRESHOLDS.finding_share:
        return []
    over = over_words(c.over)
    full = (
        f", {c.full_collections} full ones {c.full_s:.2f} s (longest "
        f"{1e3 * c.longest_full_s:.0f} ms)"
        if c.full_collections
        else ""
    )
    return [
        f"the garbage collector held the process {c.share:.0%} of the {over}: "
        f"{c.young_collections:,} young collections {c.young_s:.2f} s{full}; the stages' "
        "shares include it, in the code whose allocations set each off"
    ]


def _collector_words(primary: Finding) -> str:
    """The verdict's words for the collector's finding (``rules._collector_pauses``)."""
    e = primary.evidence
    full = (
        f"{e['full_collections']} full collections of {e['mean_full_ms']:.0f} ms each, "
        f"set off mostly in `{primary.stage}`"
        if e.get("full_collections")
        else f"{e['young_collections']:,} young collections"
    )
    over = over_words(str(e.get("over")))
    held = f"its collections held the process {primary.share:.0%} of the {over} ({full})"
    if primary.share < THRESHOLDS.bottleneck_share:
        return f"the garbage collector: {held}"
    return f"CPU-bound in the garbage collector: {held}"


def _what_it_waits_on(primary: Finding) -> str:
    """The subkind's words; for requests in line for a limit, which limit."""
    if primary.rule != "queued_for_a_limit":
        return subkind_words(primary.subkind)
    return f"in line for the permits its {primary.evidence['queued_in']} lends"


def _doubts_text(primary: Finding) -> str:
    """What leaves the verdict open, and what would settle it ("" when nothing does)."""
    doubts = primary.evidence.get("doubts") or []
    if not doubts:
        return ""
    if primary.rule == "collector_pauses":  # timed: only its rival's samples settle better
        longer = primary.evidence.get("within_sampling_error")
        to_settle = " To settle it: a longer run." if longer else ""
        return (
            f" Confidence {confidence_words(primary.confidence)}: {'; '.join(doubts)}.{to_settle}"
        )
    # a longer run on a host busy with other work measures the same mix again
    alone = bool(primary.evidence.get("without_other_load"))
    # a stage that both computes and waits measures the same split however long it runs
    mixed = bool(primary.evidence.get("mixed_with"))
    # the collector's time is timed, not sampled: no longer run settles which buys more
    others = len(doubts) - mixed - bool(primary.evidence.get("collector_rival"))
    settle = "a run on cores of its own (an idle host, or a `taskset` away from the other load)"
    if others > alone:
        settle = f"a longer run{', on cores of its own' if alone else ''}"
    elif others == 0:
        settle = ""
    if primary.evidence.get("ticks_taken") is not None:  # the sampler waited for the GIL
        settle += (
            ", `--switch-interval 0.0001` (the default: the GIL comes to the sampler within "
            "0.1 ms of its tick)"
        )
    if primary.evidence.get("runner_up"):
        settle += ", or `@probe.stage` on the two stages for their exact times"
    elif primary.evidence.get("ticks_taken") is not None:
        settle += ", or `@probe.stage` for exact stage times"
    if mixed and primary.stage not in NOT_THE_SERVICE:  # library code: no call of its to mark
        split = (
            "`@probe.stage` on the stage's waiting call and on its computation apart (each "
            "part then reads as one kind)"
        )
        settle = f"{settle}, or {split}" if settle else split
    to_settle = f" To settle it: {settle}." if settle else ""
    return f" Confidence {confidence_words(primary.confidence)}: {'; '.join(doubts)}.{to_settle}"


def _run_block(
    run: Run, bd: Breakdown, facts: RunFacts, cold: dict[str, Any] | None
) -> dict[str, Any]:
    req = bd.requests
    return {
        "wall_s": round(bd.wall_s, 4),
        "requests": req.count,
        "throughput_per_s": None
        if req.throughput_per_s is None
        else round(req.throughput_per_s, 3),
        "serving_window_s": round(req.window_s, 4),
        "latency_ms": {"p50": req.p50_ms, "p95": req.p95_ms, "p99": req.p99_ms},
        "concurrency": round(req.concurrency, 3),
        "source": bd.source,
        "sampled_s": round(bd.sampled_s, 3),
        "on_cpu_s": round(bd.cpu_s, 3),
        "process_cores": round(facts.process_cores, 3),
        "cpu_count": facts.cpu_count,
        # fewer where an affinity mask or a cgroup CPU quota limits the process
        "cores_allowed": round(allowed_cores(facts), 3),
        "cpu_limit": facts.cpu_limit,
        # of the CPU quota's periods the process ran in, the share it was throttled in
        "cpu_throttled_share": round(throttled_share(run.meta.get("cpu_throttling")), 4),
        # the threads' time on the kernel's run queue (schedstat), and whether other
        # processes held the cores meanwhile (the machine's wait, not the service's)
        "waited_for_cpu": _waited_for_cpu(facts),
        "gpu": facts.has_gpu,
        "ended_by": (run.meta.get("exit") or {}).get("ended_by"),
        "exit_status": (run.meta.get("exit") or {}).get("status"),
        # The bottleneck law: seconds of each resource a request needs, and the most
        # requests per second they allow (empty without requests).
        "bottleneck": demands(bd, facts, cold),
        # threads parked waiting for their next task (analyzers.roles): headroom
        "idle": [
            {
                "role": str(role),
                "threads": int(r["threads"]),
                "idle_s": round(float(r["idle_s"]), 3),
                "idle_share": round(float(r["idle_share"]), 3),
            }
            for role, r in bd.idle.iterrows()
        ],
        # event loops (analyzers.tasks.loop_lag): callbacks ready and waiting for the loop
        "event_loops": [
            {
                "thread_id": int(tid),
                "readings": int(r["readings"]),
                "lagged_share": round(float(r["lagged_share"]), 3),
                "ready_mean": round(float(r["ready_mean"]), 2),
                "busy_share": round(float(r["busy_share"]), 3),
                "busiest": str(r["busiest"]),
                "blocked_share": round(float(r["blocked_share"]), 3),
                "blocked_in": str(r["blocked_in"]),
            }
            for tid, r in bd.loops.iterrows()
        ],
    }


def _waited_for_cpu(facts: RunFacts) -> dict[str, Any] | None:
    wait = facts.run_queue
    if wait is None:
        return None
    return {
        "queued_s": round(wait.queued_s, 3),
        "ran_s": round(wait.ran_s, 3),
        "share": round(wait.share, 4),
        "others_held_cores": others_held_cores(
            wait, host_cores_busy=facts.host_cores_busy, process_cores=facts.process_cores
        ),
    }


def _primary_block(primary: Finding | None) -> dict[str, Any]:
    if primary is None:
        return {"kind": "none", "subkind": "none", "stage": "", "share": 0.0, "confidence": 0.0}
    return {
        "kind": primary.kind,
        "subkind": primary.subkind,
        "stage": primary.stage,
        "share": round(primary.share, 4),
        "confidence": primary.confidence,
    }


def _runnable_beside_idle_cores(bd: Breakdown, facts: RunFacts) -> Breakdown:
    """``runnable_beside_idle_cores`` on the stage table, with the cores the process may
    use and did not as its headroom; on one core, the GIL's waits are the core's
    (``gil_waits_on_one_core``)."""
    headroom = allowed_cores(facts) - facts.process_cores
    stages = runnable_beside_idle_cores(bd.stages, facts.cpu_count, headroom=headroom)
    return replace(bd, stages=gil_waits_on_one_core(stages, allowed_cores(facts)))


def _cores_notes(run: Run, facts: RunFacts) -> list[str]:
    """What the run's cores were not the service's own: other processes' load (waits
    on a run queue) and the cgroup's CPU quota (throttling)."""
    return run_queue_note(
        facts.run_queue,
        cpu_count=facts.cpu_count,
        host_cores_busy=facts.host_cores_busy,
        process_cores=facts.process_cores,
    ) + throttling_note(
        run.meta.get("cpu_throttling"),
        quota_cores=facts.cores_allowed if facts.cpu_limit == "cgroup quota" else None,
        process_cores=facts.process_cores,
        cpu_count=facts.cpu_count,
    )


def diagnose(run: Run, *, sla_s: float | None = None) -> Diagnosis:
    """Diagnose a loaded run (``probe.rundir.load``). ``sla_s``: the latency a served
    app's p99 must stay within (default: the run's ``probe run --sla``, if any)."""
    bd = breakdown(run)
    facts = run_facts(run, bd)
    bd = _runnable_beside_idle_cores(bd, facts)
    findings = classify(bd, facts)
    cold = cold_start(bd, facts)
    leak = _leak(run, bd)
    every = proposed(findings, bd, facts, cold=cold, leak=leak.to_dict())
    torch = _torch(run)
    if torch is not None:
        every = _with_the_windows(every, torch)
    recs = ranked(every)
    served = endpoints(
        bd.spans,
        bd.work_samples,
        run.tables["stacks"],
        run.tables["frames"],
        run.tables.get("threads"),
        tuple(int(w["pid"]) for w in run.workers),
    )
    if sla_s is None:
        sla_s = (run.meta.get("settings") or {}).get("sla_s")
    queued = next((f for f in findings if f.rule == "queued_for_a_limit"), None)
    limits = _capacity(run, bd, facts, cold, served, sla_s, queued)
    primary = findings[0] if findings else None
    primary_block = _primary_block(primary)
    primary_block["summary"] = _summary(findings, recs, bd)
    notes = list(run.notes) + list(run.meta.get("notes", [])) + list(bd.notes)
    notes += _cores_notes(run, facts) + (_collector_notes(facts) if findings else [])
    notes += _imports_notes(findings, bd) + _intra_op_notes(run, bd, facts)
    notes += _charged_shares_notes(findings, bd)
    notes += [
        n for f in findings if f.subkind == "network" for n in stream_note(bd.streams, f.stage)
    ]
    if cold:
        notes.append(
            f"slow first request: {cold['first_request_ms']:.0f} ms, {cold['ratio']:.0f}x the "
            f"median; `{cold['stage']}` ran only inside it ({cold['seconds']:.2f} s)"
        )
    return Diagnosis(
        run=_run_block(run, bd, facts, cold),
        primary=primary_block,
        findings=findings,
        recommendations=recs,
        minor_recommendations=minor(every),
        leak=leak,
        breakdown=bd,
        notes=notes
        + pile_notes(leak.to_dict(), (run.meta.get("limits") or {}).get("open_files"))
        + _torch_notes(run, torch)
        + _endpoint_notes(served)
        + _unwrapped(run),
        torch=torch,
        endpoints=served,
        capacity=limits,
        batching=spans_advice(bd.spans, sla_s),
    )


def _capacity(
    run: Run,
    bd: Breakdown,
    facts: RunFacts,
    cold: dict[str, Any] | None,
    served: EndpointFigures | None,
    sla_s: float | None,
    queued: Finding | None = None,
) -> Capacity | None:
    """A served app's capacity (``analyzers.capacity``) from its requests' demands, the
    server's configured limits (meta.json's ``collector.http_spans.limits``), the limit
    its requests queued for (``queued``: a finding of ``rules``' ``queued_for_a_limit``)
    and, when the load driver ran, what its clients saw."""
    per_request = demands(bd, facts, cold)
    spans = bd.spans
    if served is None or not per_request or spans.empty:
        return None
    requests = spans[spans["is_request"].astype(bool)]
    requests = requests[requests["start_ns"] >= (bd.requests.start_ns or 0)]
    limits = ((run.meta.get("collector") or {}).get("http_spans") or {}).get("limits") or {}
    workers = served.workers
    slots = limits.get("requests_at_once")
    table = served.table.assign(
        mean_ms=requests.groupby("name")["dur_ns"].mean().reindex(served.table.index) / 1e6
    )
    clients = None
    load = run.load_requests
    if load is not None and not load.empty:
        measured = load[~load["warmup"].astype(bool) & (load["status"] > 0)]
        clients = (measured["done_ns"] - measured["intended_ns"]).to_numpy(dtype="float64") / 1e9
    return capacity(
        requests=bd.requests.count,
        window_s=bd.requests.window_s,
        latencies_s=(requests["dur_ns"]).to_numpy(dtype="float64") / 1e9,
        demands=Demands(
            cpu_s=float(per_request["cpu_s_per_request"]),
            gil_s=float(per_request["gil_s_per_request"]),
            free_cores=float(per_request["cores_available"]),
            processes=int(limits.get("workers") or (len(workers) if workers is not None else 1)),
            slots=None if slots is None else int(slots),
            limit=_limit_held(queued, bd.requests.throughput_per_s),
        ),
        endpoints=table,
        client_latencies_s=clients,
        sla_s=sla_s,
    )


def _limit_held(queued: Finding | None, throughput: float | None) -> tuple[str, int, float] | None:
    """(the limit, its permits, seconds a request holds one) from a finding of requests
    queued for it: as many permits as tasks held them (all were out: others queued),
    each held for those tasks over the throughput (Little's law)."""
    if queued is None or not throughput:
        return None
    holding = float(queued.evidence["in_the_call"])
    return str(queued.evidence["queued_in"]), max(1, round(holding)), holding / throughput


def _unwrapped(run: Run) -> list[str]:
    """A server probe does not wrap (probe.serving): how to get request spans anyway."""
    http = (run.meta.get("collector") or {}).get("http_spans") or {}
    names = list(http.get("unrecognised") or [])
    failed = dict(http.get("failures") or {})
    notes = [f"request spans: patching {m} failed ({why})" for m, why in failed.items()]
    notes += [str(n) for n in http.get("notes") or []]
    if names and not http.get("servers"):
        notes.append(
            f"served by {', '.join(names)}, which probe does not wrap yet: no per-request "
            "figures; wrap the handler in `with probe.request():` (or serve it with uvicorn, "
            "gunicorn, hypercorn, waitress, Werkzeug or Django's server under probe run)"
        )
    return notes


def _endpoint_notes(served: EndpointFigures | None) -> list[str]:
    if served is None:
        return []
    notes = list(served.notes)
    t = served.table
    if served.limiting is not None:
        row = t.loc[served.limiting]
        shared = t["cpu_s"] + t["gil_s"]
        share = float(shared[served.limiting] / shared.sum())
        notes.append(
            f"endpoint limiting throughput: {served.limiting}, {share:.0%} of the handlers' "
            f"CPU and GIL time ({row['cpu_ms_per_request']:.2f} ms of CPU a request)"
        )
    if served.slowest is not None and served.slowest != served.limiting:
        notes.append(
            f"slowest endpoint: {served.slowest} (p99 {t.loc[served.slowest, 'p99_ms']:.1f} ms)"
        )
    return notes


def _torch(run: Run) -> TorchWindowsDiagnosis | None:
    if not run.torch_windows:
        return None
    # here, not at the top: trace_diagnosis reads this module's SCHEMA
    from probe.analyzers.torch_windows import torch_windows_diagnosis
    from probe.analyzers.trace_diagnosis import diagnose_trace

    figures = (run.meta.get("collector") or {}).get("torch") or {}
    served = _server_span_names(run.tables.get("spans"))
    clock = run.meta.get("clock") or {}
    collections = _traced_collections(run, clock)
    windows = [
        (
            entry,
            diagnose_trace(
                trace,
                server_spans=served,
                # on the window's clock: Kineto's ts count from its baseTimeNanoseconds
                pauses=collections.assign(
                    ts_ns=collections["ts_ns"] - int(trace.meta.get("baseTimeNanoseconds") or 0)
                ),
            ),
            len(trace.tables["ops"]),
        )
        for entry, trace in run.torch_windows
    ]
    forward_at_s = figures.get("forward_at_s")
    after = int(clock.get("unix_ns") or 0) + int((forward_at_s or 0.0) * 1e9)
    return torch_windows_diagnosis(
        windows,
        forward_at_s=forward_at_s,
        wall_s=float(run.meta.get("duration_s") or 0.0),
        collected_s=float(collections.loc[collections["ts_ns"] >= after, "dur_ns"].sum()) / 1e9,
    )


def _traced_collections(run: Run, clock: dict[str, Any]) -> pd.DataFrame:
    """The run's full collections in the processes its windows traced (a collection
    stops its own process only), on Kineto's Unix clock."""
    collections = full_collections(
        run.tables.get("gc_pauses", pd.DataFrame()),
        shift_ns=int(clock.get("unix_ns") or 0) - int(clock.get("perf_ns") or 0),
    )
    pids = {int(p) for _, t in run.torch_windows for p in t.tables["ops"]["pid"].dropna()}
    return collections[collections["pid"].isna() | collections["pid"].isin(pids)]


def _with_the_windows(
    every: list[Recommendation], torch: TorchWindowsDiagnosis
) -> list[Recommendation]:
    """The run's fixes and its windows'. Where the window that speaks for the run saw GPU
    work, a fix both catalogs hold (FP16, kernel fusion) is the window's alone: measured
    on its kernels (their precision, the element-wise share), where the run's is assumed
    from the GPU's utilisation (FP16 at a constant 2x on any GPU-bound stage, whatever
    the GEMMs already run in: issue 15's "never recommend FP16 where the GEMMs are
    already BF16/FP16"). A window that proposes no such fix has found none to make."""
    from probe.analyzers.trace_fixes import TRACE_FIXES

    if not torch.diagnosis.run.get("gpu"):
        return every + torch.recommendations
    measured = {fix.id for fix in TRACE_FIXES}
    return [r for r in every if r.id not in measured] + torch.recommendations


def _server_span_names(spans: pd.DataFrame | None) -> frozenset[str]:
    """The names of the spans probe made for a served app: its requests and the handler
    calls it wrapped (``probe.serving``: ``{"served": true}`` in their attributes)."""
    if spans is None or spans.empty:
        return frozenset()
    served = served_spans(spans["attrs"]) | (spans["category"] == "request")
    return frozenset(spans.loc[served, "name"].astype(str))


def _torch_notes(run: Run, torch: TorchWindowsDiagnosis | None) -> list[str]:
    figures = (run.meta.get("collector") or {}).get("torch")
    if not figures:
        return []
    if torch is None:
        why = figures.get("unavailable") or "none could be read"
        return [f"PyTorch was imported, but no torch.profiler window was taken: {why}"]
    files = ", ".join(w["file"] for w in torch.windows)
    summary = torch.diagnosis.primary.get("summary", "")
    return [f"torch.profiler: {len(torch.windows)} window(s) in {files}; {torch.chosen}: {summary}"]
