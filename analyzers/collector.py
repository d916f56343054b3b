"""The garbage collector's share of a run, from its own timings (``gc_pauses``,
``probe.samplers.gc_pauses``): how much of the run its collections held the process,
young and full apart, and in which stages the full ones were set off.

A collection stops every Python thread of its process, so its time is wall time of the
process's path, whatever the threads were doing; the stack samples cannot show it: a
tick during one reads the frame whose allocation set it off (``probe.samplers.peek``
reads frames at the tick's instant, without the GIL), as if that code ran, and the
ticks due after it wait for the collection to end. The process whose collections took
longest stands for the run: a forked server's workers collect apart, and the busiest is
the one a request is likeliest to meet.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from probe.rundir.schema import FULL_GENERATION

__all__ = ["CollectorTime", "collector_time", "full_collections", "over_words"]


@dataclass(frozen=True)
class CollectorTime:
    """One process's collections over the run."""

    pid: int
    wall_s: float  # the run's wall time, the shares' denominator
    young_s: float  # generations 0 and 1, all their collections
    young_collections: int
    full_s: float  # generation 2
    full_collections: int
    longest_full_s: float
    # the full collections' seconds by the stage (``user_function``) of the first sample
    # their thread took from each one's start: the code whose allocation set it off
    full_by_stage: dict[str, float] = field(default_factory=dict)
    # the full collections' seconds inside each stage's sampled time: the part of its
    # samples' intervals (of the collecting thread) that collections took. The stage's
    # own time is the rest: a tick during a collection and the tick after its end split
    # its time between them, the second anywhere
    full_in_stage: dict[str, float] = field(default_factory=dict)
    serving: bool = False  # the shares are of a served app's requests' window, not the run
    # the full collections that began once the work had (a served app's first request, a
    # job's first sample in the stage setting most of them off): the ones a freeze made
    # when start-up ends can shorten. None: all of them (no start of the work was seen)
    full_since_work_s: float | None = None
    # of the live heap those collections walked (pymalloc's blocks at each one's start),
    # the part every one of them walked: the heap's floor over the work, which a freeze
    # once start-up ends takes out of every later walk; the rest (each query's objects, a
    # cache the requests fill) stays in them. None where no collection's heap was read
    start_up_heap: float | None = None

    @property
    def seconds(self) -> float:
        return self.young_s + self.full_s

    @property
    def share(self) -> float:
        return min(1.0, self.seconds / self.wall_s)

    @property
    def full_share(self) -> float:
        return min(1.0, self.full_s / self.wall_s)

    @property
    def full_since_work_share(self) -> float:
        full = self.full_s if self.full_since_work_s is None else self.full_since_work_s
        return min(1.0, full / self.wall_s)

    @property
    def over(self) -> str:
        """What the shares are of: ``serving`` (a served app's requests' window) or ``run``."""
        return "serving" if self.serving else "run"

    def to_dict(self) -> dict[str, object]:
        return {
            "pid": self.pid,
            "share": round(self.share, 4),
            "full_share": round(self.full_share, 4),
            "full_since_work_share": round(self.full_since_work_share, 4),
            "young_s": round(self.young_s, 4),
            "young_collections": self.young_collections,
            "full_s": round(self.full_s, 4),
            "full_collections": self.full_collections,
            "mean_full_ms": round(1e3 * self.full_s / max(self.full_collections, 1), 2),
            "longest_full_ms": round(1e3 * self.longest_full_s, 2),
            "full_by_stage": {k: round(v, 4) for k, v in self.full_by_stage.items()},
            "over": self.over,
            "start_up_heap": None if self.start_up_heap is None else round(self.start_up_heap, 3),
        }


def over_words(over: str) -> str:
    """``CollectorTime.over`` (also the finding's ``evidence["over"]``) as the verdict says it."""
    return "serving time" if over == "serving" else "run"


def collector_time(
    pauses: pd.DataFrame,
    work_samples: pd.DataFrame,
    wall_s: float,
    window: tuple[int | None, int | None] = (None, None),
) -> CollectorTime | None:
    """The collections of the process they held longest; None where none was timed (a
    run before the table, a collector the target turned off) or the run has no length.
    ``work_samples``: the breakdown's attributed samples (``ts_ns``, ``thread_id``,
    ``user_function``). ``window``: a served app's requests' first start and last end
    (ns): the collections that ended within it, over its length -- start-up's are not
    the service's steady state, and no fix made after start-up takes them away."""
    lo, hi = window
    serving = False
    if lo is not None and hi is not None and hi > lo:
        serving = True
        pauses = pauses[(pauses["ts_ns"] >= lo) & (pauses["ts_ns"] <= hi)]
        wall_s = (hi - lo) / 1e9
    if pauses.empty or wall_s <= 0:
        return None
    pid_of = pauses["pid"].fillna(-1).astype("int64")
    pid = int(pauses["pause_ns"].groupby(pid_of).sum().idxmax())
    own = pauses[pid_of == pid]
    young = own[own["generation"] < FULL_GENERATION]
    full = own[own["generation"] >= FULL_GENERATION]
    set_off = _set_off_in(full, work_samples)
    began = lo if serving else _first_sample_of(next(iter(set_off), None), work_samples)
    since_work = full if began is None else full[full["ts_ns"] - full["pause_ns"] >= began]
    return CollectorTime(
        pid=pid,
        wall_s=wall_s,
        young_s=float(young["pause_ns"].sum()) / 1e9,
        young_collections=int(young["collections"].sum()),
        full_s=float(full["pause_ns"].sum()) / 1e9,
        full_collections=int(full["collections"].sum()),
        longest_full_s=float(full["longest_ns"].max()) / 1e9 if not full.empty else 0.0,
        full_by_stage=set_off,
        full_in_stage=_inside_samples(full, work_samples),
        serving=serving,
        full_since_work_s=float(since_work["pause_ns"].sum()) / 1e9,
        start_up_heap=_walked_by_every_one(since_work),
    )


def _first_sample_of(stage: str | None, samples: pd.DataFrame) -> int | None:
    if stage is None or samples.empty:
        return None
    times = samples.loc[samples["user_function"] == stage, "ts_ns"]
    return int(times.min()) if not times.empty else None


def _walked_by_every_one(full: pd.DataFrame) -> float | None:
    """The heap's floor at ``full``'s starts over its mean there (pymalloc's blocks, a
    proxy for the objects a collection walks: small ones, tracked or not). What a
    collection walks beyond the floor (the objects of the work under way, a cache it
    fills) a freeze does not reach. rerank_catalog's catalog, loaded before its first
    query, is 0.97 of every walk; session_scores' cache, filled by its requests, next to
    none (its first collections walk little). A heap read before each collection would
    not do: 50-150 ms apart, one taken mid-load or mid-query moved the part by half."""
    blocks = full["heap_blocks"].dropna().astype("float64")
    if len(blocks) < _FLOOR_READINGS or float(blocks.mean()) <= 0:
        return None
    return float(blocks.min()) / float(blocks.mean())


# The fewest readings whose floor says what stayed under every walk (chosen, not
# measured): one reading is its own floor -- the part would read 1.0, a freeze taking
# the whole walk -- and two are a pair; with fewer, the documented 4/5 stands instead
# (``Model.frozen_walk``)
_FLOOR_READINGS = 3


def _set_off_in(full: pd.DataFrame, samples: pd.DataFrame) -> dict[str, float]:
    """The full collections' seconds by the stage of their thread's first sample at or
    after each one's start: a tick during the collection reads the frame that allocated,
    and one that came just before it, the frame after (the first from its end, the
    time the collections' ``ts_ns`` mark, lands ~one tick later, anywhere: on
    rerank_catalog it spread gather_candidates' collections over five functions, 36%
    left to it, where py-spy had 74% of all samples there). Largest first."""
    needed = {"ts_ns", "thread_id", "user_function"}
    if full.empty or samples.empty or not needed <= set(samples.columns):
        return {}
    made = full.dropna(subset=["thread_id"]).astype({"thread_id": "int64"})
    made = made.assign(start_ns=made["ts_ns"] - made["pause_ns"]).sort_values("start_ns")
    taken = samples[["ts_ns", "thread_id", "user_function"]].astype({"thread_id": "int64"})
    matched = pd.merge_asof(
        made.drop(columns="ts_ns"),
        taken.sort_values("ts_ns"),
        left_on="start_ns",
        right_on="ts_ns",
        by="thread_id",
        direction="forward",
    ).dropna(subset=["user_function"])
    seconds = matched.groupby("user_function")["pause_ns"].sum().sort_values(ascending=False)
    return {str(k): float(v) / 1e9 for k, v in seconds.items()}


def _inside_samples(full: pd.DataFrame, samples: pd.DataFrame) -> dict[str, float]:
    """The full collections' seconds inside each stage's samples of the collecting
    thread: each sample row stands for the interval ``(ts_ns - wall_ns, ts_ns]``, and the
    collections' time within it is the difference of their cumulative time at its two
    ends (a collection's interval is ``[ts_ns - pause_ns, ts_ns]``; one thread's do not
    overlap)."""
    needed = {"ts_ns", "wall_ns", "thread_id", "user_function"}
    if full.empty or samples.empty or not needed <= set(samples.columns):
        return {}
    inside: dict[str, float] = {}
    for tid, made in full.dropna(subset=["thread_id"]).groupby("thread_id"):
        rows = samples[samples["thread_id"] == int(tid)]
        if rows.empty:
            continue
        made = made.sort_values("ts_ns")
        ends = made["ts_ns"].to_numpy(dtype="float64")
        pauses = made["pause_ns"].to_numpy(dtype="float64")
        # the cumulative collection time: flat between collections, rising within each
        edges = np.column_stack([ends - pauses, ends]).ravel()
        total = np.cumsum(pauses)
        held = np.column_stack([total - pauses, total]).ravel()
        b = rows["ts_ns"].to_numpy(dtype="float64")
        a = b - rows["wall_ns"].to_numpy(dtype="float64")
        overlap = np.interp(b, edges, held) - np.interp(a, edges, held)
        per = pd.Series(overlap, index=rows.index).groupby(rows["user_function"]).sum()
        for stage, ns in per.items():
            inside[str(stage)] = inside.get(str(stage), 0.0) + float(ns) / 1e9
    return {k: v for k, v in sorted(inside.items(), key=lambda kv: -kv[1]) if v > 0}


def full_collections(gc_pauses: pd.DataFrame, *, shift_ns: int) -> pd.DataFrame:
    """The full collections as intervals: ``pid``, ``tid`` (the thread that made it, its
    native id, as Kineto's), ``ts_ns`` (its start, the run's clock moved by ``shift_ns``:
    meta.json's ``unix_ns - perf_ns`` puts it on Kineto's Unix time) and ``dur_ns``.
    Runs before 2026-12-05 have no such table: none."""
    columns = ["pid", "tid", "ts_ns", "dur_ns"]
    if gc_pauses.empty or "thread_id" not in gc_pauses:
        return pd.DataFrame(columns=columns)
    full = gc_pauses[(gc_pauses["generation"] == FULL_GENERATION) & gc_pauses["thread_id"].notna()]
    out = pd.DataFrame(
        {"pid": full["pid"] if "pid" in full else pd.Series(pd.NA, index=full.index),
         "tid": full["thread_id"].astype("int64"),
         "ts_ns": full["ts_ns"].astype("int64") - full["pause_ns"].astype("int64") + shift_ns,
         "dur_ns": full["pause_ns"].astype("int64")}
    )  # fmt: skip
    return out.reset_index(drop=True)[columns]
