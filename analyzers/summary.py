"""The interim run summary: where the time of the process's threads went.

``summarize(run)`` -> ``RunSummary``: wall time, CPU time per thread, the share of sampled
thread-time on-CPU vs waiting by reason (with the call most waited in), the top sampled
functions by on-CPU time (both through ``attribution.attribute``), peak RSS, and the
stages recorded by spans. Pure: the loaded
run in, a frozen dataclass out.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from analyzers.attribution import attribute

__all__ = ["FunctionTime", "RunSummary", "ThreadTime", "WaitShare", "summarize"]


@dataclass(frozen=True)
class ThreadTime:
    thread_id: int
    name: str
    sampled_s: float
    cpu_s: float

    @property
    def on_cpu_share(self) -> float:
        return self.cpu_s / self.sampled_s if self.sampled_s > 0 else 0.0


@dataclass(frozen=True)
class WaitShare:
    state: str  # "on-cpu" or a wait reason
    seconds: float
    share: float
    top_call: str = ""  # e.g. "sock.recv_into (socket.py:readinto)"


@dataclass(frozen=True)
class FunctionTime:
    function: str
    location: str
    cpu_s: float
    cpu_share: float
    wait_s: float


@dataclass(frozen=True)
class StageTime:
    name: str
    category: str
    count: int
    total_s: float
    mean_ms: float
    p95_ms: float


@dataclass(frozen=True)
class RunSummary:
    run_dir: str
    command: list[str]
    wall_s: float
    exit_status: int | None
    ended_by: str
    process_cpu_s: float
    native_cpu_s: float
    peak_rss_bytes: int
    threads: list[ThreadTime]
    states: list[WaitShare]
    top_functions: list[FunctionTime]
    stages: list[StageTime]
    gpu: str
    notes: list[str] = field(default_factory=list)

    @property
    def sampled_s(self) -> float:
        return sum(s.seconds for s in self.states)


def _threads(samples: pd.DataFrame, threads: pd.DataFrame) -> list[ThreadTime]:
    if samples.empty:
        return []
    per = samples.groupby("thread_id")[["wall_ns", "cpu_ns"]].sum()
    names = threads.drop_duplicates("thread_id").set_index("thread_id")["name"]
    out = [
        ThreadTime(
            int(tid), str(names.get(tid, f"thread-{tid}")), row.wall_ns / 1e9, row.cpu_ns / 1e9
        )
        for tid, row in per.iterrows()
    ]
    return sorted(out, key=lambda t: -t.cpu_s)


def _frame_labels(stacks: pd.DataFrame, frames: pd.DataFrame) -> pd.DataFrame:
    """stack_id -> leaf function name and location."""
    if stacks.empty:
        return pd.DataFrame(
            {"stack_id": pd.Series(dtype="int64"), "function": [], "location": [], "leaf_call": []}
        )
    f = frames.set_index("frame_id")
    leaf_ids = stacks["frame_ids"].fillna("").str.rsplit(";", n=1).str[-1]
    leaf = pd.to_numeric(leaf_ids, errors="coerce")
    function = leaf.map(f["function"]).fillna("<unknown>")
    filename = leaf.map(f["filename"]).fillna("")
    location = filename.str.rsplit("/", n=1).str[-1] + ":" + stacks["leaf_line"].astype(str)
    return pd.DataFrame(
        {
            "stack_id": stacks["stack_id"],
            "function": function.astype(str),
            "location": location.astype(str),
            "leaf_call": stacks["leaf_call"].fillna("").astype(str),
        }
    )


def _states(attributed: pd.DataFrame, labels: pd.DataFrame) -> list[WaitShare]:
    if attributed.empty:
        return []
    total = float(attributed["wall_ns"].sum())
    cpu = float(attributed["cpu_ns"].sum())
    out = [WaitShare("on-cpu", cpu / 1e9, cpu / total if total else 0.0)]
    waiting = attributed[attributed["wait_ns"] > 0].merge(labels, on="stack_id", how="left")
    if waiting.empty:
        return out
    by_reason = waiting.groupby("reason")["wait_ns"].sum().sort_values(ascending=False)
    for reason, ns in by_reason.items():
        part = waiting[waiting["reason"] == reason]
        call, function, location = (
            part.groupby(["leaf_call", "function", "location"])["wait_ns"].sum().idxmax()
        )
        where = f"{function} ({location})"
        out.append(
            WaitShare(
                str(reason),
                ns / 1e9,
                ns / total if total else 0.0,
                f"{call} in {where}" if call else where,
            )
        )
    return out


def _top_functions(attributed: pd.DataFrame, labels: pd.DataFrame, top: int) -> list[FunctionTime]:
    """Leaf functions by on-CPU time; the location is the function's hottest line."""
    if attributed.empty:
        return []
    joined = attributed.merge(labels, on="stack_id", how="left")
    joined = joined.assign(file=joined["location"].str.rsplit(":", n=1).str[0])
    per_line = joined.groupby(["function", "file", "location"])[["cpu_ns", "wait_ns"]].sum()
    per_fn = per_line.groupby(level=["function", "file"]).sum()
    hottest = per_line["cpu_ns"].groupby(level=["function", "file"]).idxmax()
    per_fn = per_fn[per_fn["cpu_ns"] > 0].sort_values("cpu_ns", ascending=False).head(top)
    total_cpu = float(attributed["cpu_ns"].sum()) or 1.0
    return [
        FunctionTime(
            str(fn),
            str(hottest[(fn, file)][2]),
            row.cpu_ns / 1e9,
            row.cpu_ns / total_cpu,
            row.wait_ns / 1e9,
        )
        for (fn, file), row in per_fn.iterrows()
    ]


def _stages(spans: pd.DataFrame, top: int = 8) -> list[StageTime]:
    if spans.empty:
        return []
    d = spans.assign(dur_ns=spans["end_ns"] - spans["start_ns"])
    g = d.groupby(["name", "category"])["dur_ns"]
    table = pd.DataFrame(
        {"count": g.size(), "total": g.sum(), "mean": g.mean(), "p95": g.quantile(0.95)}
    ).sort_values("total", ascending=False)
    return [
        StageTime(
            str(name), str(cat), int(r["count"]), r["total"] / 1e9, r["mean"] / 1e6, r["p95"] / 1e6
        )
        for (name, cat), r in table.head(top).iterrows()
    ]


def _process_cpu(resources: pd.DataFrame) -> tuple[float, int]:
    """CPU of the whole tree, and the target's peak RSS.

    Every process of the tree was started by the target or is the target, so each one's
    cumulative counters (from its own start) fall within the run: the last reading of each
    is its CPU, even for a child first seen after it had already run for a while.
    """
    if resources.empty:
        return 0.0, 0
    last = resources.sort_values("ts_ns").groupby("pid").last()
    root = resources[resources["is_root"]]
    peak = int(root["rss_bytes"].max()) if not root.empty else 0
    return float((last["cpu_user_s"] + last["cpu_system_s"]).sum()), peak


def _native_cpu(os_threads: pd.DataFrame, threads: pd.DataFrame, root_pid: int | None) -> float:
    if os_threads.empty or root_pid is None:
        return 0.0
    mine = os_threads[os_threads["pid"] == root_pid]
    last = mine.sort_values("ts_ns").groupby("tid")[["cpu_user_s", "cpu_system_s"]].last()
    python_tids = set(threads["thread_id"].astype(int))
    native = last[~last.index.isin(python_tids)]
    return float((native["cpu_user_s"] + native["cpu_system_s"]).sum())


def _gpu_text(meta: dict[str, Any]) -> str:
    gpus = meta.get("gpus") or {}
    if gpus.get("available"):
        names = ", ".join(d.get("name", "?") for d in gpus.get("devices", []))
        return f"{len(gpus.get('devices', []))} GPU(s): {names}"
    return f"none ({gpus.get('reason', 'not checked')})"


def summarize(run: Any, *, top: int = 5) -> RunSummary:
    """Summarise a loaded run (``probe.rundir.load``)."""
    meta = run.meta
    samples = run.tables["samples"]
    attributed = attribute(samples)
    labels = _frame_labels(run.tables["stacks"], run.tables["frames"])
    process_cpu, peak = _process_cpu(run.tables["resources"])
    exit_info = meta.get("exit") or {}
    return RunSummary(
        run_dir=str(run.path),
        command=list(meta.get("target", {}).get("argv", [])),
        wall_s=float(meta.get("duration_s") or 0.0),
        exit_status=exit_info.get("status"),
        ended_by=str(exit_info.get("ended_by", "unknown")),
        process_cpu_s=process_cpu,
        native_cpu_s=_native_cpu(run.tables["os_threads"], run.tables["threads"], meta.get("pid")),
        peak_rss_bytes=peak,
        threads=_threads(samples, run.tables["threads"]),
        states=_states(attributed, labels),
        top_functions=_top_functions(attributed, labels, top),
        stages=_stages(run.tables["spans"]),
        gpu=_gpu_text(meta),
        notes=list(run.notes) + list(meta.get("notes", [])),
    )
