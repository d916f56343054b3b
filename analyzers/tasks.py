"""An event loop's idle time given to the tasks it was waiting for.

An event-loop thread asleep in its selector is idle capacity only when nothing awaits
I/O; with tasks suspended on a downstream call, a sleep or a child process, the loop's
sleep *is* their wait -- the time those requests take (issue 12: an asyncio service's
time was in coroutines no thread's stack showed). ``probe.samplers.tasks`` records, per
tick, what the loop's pending tasks await (``task_samples``); here each idle interval of
a loop thread (its ``event loop`` role, blocked in ``select``) is split among the task
rows inside it that wait on I/O, in proportion to the tasks each stands for:

* a task waiting on other tasks (a ``gather``, an awaited task, an asyncio lock,
  semaphore, event or queue) is not the work: the tasks it waits on are (the batch path's
  rule for a thread's wait on another thread, ``analyzers.path``);
* a task waiting on an executor is the executor thread's work, sampled on its own;
* an interval with no task waiting on I/O stays the loop's idle time.

The rows made keep the loop's thread, so per-thread sums stay exact.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

__all__ = ["AWAITED_IO", "with_task_waits"]

# Task wait reasons that are the work's own waits (the rest wait on other work)
AWAITED_IO = ("network", "sleep", "subprocess")
_LOOP_ROLE = "event loop"


def with_task_waits(samples: pd.DataFrame, tasks: pd.DataFrame) -> pd.DataFrame:
    """``samples`` (attributed rows: thread_id, stack_id, wall_ns, cpu_ns, wait_ns,
    reason, ts_ns, idle_role) with each idle event-loop row that tasks were awaiting I/O
    in replaced by one row per task stack and reason, sharing its time. The rows made
    carry only the attributed columns; the caller labels them by stack."""
    if tasks.empty or samples.empty or "idle_role" not in samples:
        return samples
    io = tasks[tasks["wait_reason"].isin(AWAITED_IO) & (tasks["tasks"] > 0)]
    loop_idle = samples.index[(samples["idle_role"] == _LOOP_ROLE) & (samples["wait_ns"] > 0)]
    if io.empty or loop_idle.empty:
        return samples
    made, replaced = [], []
    for tid, rows in samples.loc[loop_idle].groupby("thread_id"):
        theirs = io[io["thread_id"] == tid]
        if theirs.empty:
            continue
        which = _containing_row(rows, theirs["ts_ns"].to_numpy(dtype="int64"))
        inside = which >= 0
        if not inside.any():
            continue
        theirs = theirs[inside].assign(row=rows.index.to_numpy()[which[inside]])
        weight = theirs["tasks"] * theirs["wall_ns"]
        theirs = theirs.assign(share=weight / weight.groupby(theirs["row"]).transform("sum"))
        grouped = theirs.groupby(["row", "stack_id", "wait_reason"], as_index=False)["share"]
        for r in grouped.sum().itertuples(index=False):
            loop = samples.loc[r.row]
            made.append(
                {
                    "thread_id": tid,
                    "stack_id": r.stack_id,
                    "wall_ns": loop["wall_ns"] * r.share,
                    "cpu_ns": loop["cpu_ns"] * r.share,
                    "wait_ns": loop["wait_ns"] * r.share,
                    "reason": r.wait_reason,
                    "ts_ns": loop["ts_ns"],
                }
            )
        replaced.extend(theirs["row"].unique())
    if not made:
        return samples
    kept = samples.drop(index=replaced)
    return pd.concat([kept, pd.DataFrame(made)], ignore_index=True)


def _containing_row(rows: pd.DataFrame, ts: np.ndarray) -> np.ndarray:
    """For each instant, the position in ``rows`` (one thread's intervals, which do not
    overlap: (ts_ns - wall_ns, ts_ns]) of the interval holding it, or -1."""
    order = np.argsort(rows["ts_ns"].to_numpy(dtype="int64"), kind="stable")
    ends = rows["ts_ns"].to_numpy(dtype="int64")[order]
    starts = ends - rows["wall_ns"].to_numpy(dtype="float64")[order]
    k = np.searchsorted(ends, ts, side="left")
    ok = k < len(ends)
    k_safe = np.where(ok, k, 0)
    ok &= ts > starts[k_safe]
    return np.where(ok, order[k_safe], -1)
