"""An event loop's idle time given to the tasks it was waiting for.

An event-loop thread asleep in its selector is idle capacity only when nothing awaits
I/O; with tasks suspended on a downstream call, a sleep or a child process, the loop's
sleep *is* their wait -- the time those requests take (issue 12: an asyncio service's
time was in coroutines no thread's stack showed). ``probe.samplers.tasks`` records, per
tick, what the loop's pending tasks await (``task_samples``); here each idle interval of
a loop thread (its ``event loop`` role, blocked in ``select``) is split among the tasks
awaiting I/O at the task tick whose interval holds its end (task ticks are sparser than
the stack's when many tasks are pending), in proportion to the tasks each row stands for:

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
    reason, ts_ns, idle_role) with each idle event-loop row replaced, when tasks were
    awaiting I/O at the task tick whose interval holds its end, by one row per task stack
    and reason of that tick, sharing its time. The rows made carry only the attributed
    columns; the caller labels them by stack."""
    if tasks.empty or samples.empty or "idle_role" not in samples:
        return samples
    loop_idle = samples.index[(samples["idle_role"] == _LOOP_ROLE) & (samples["wait_ns"] > 0)]
    if loop_idle.empty:
        return samples
    made: list[dict[str, object]] = []
    replaced: list[object] = []
    for tid, rows in samples.loc[loop_idle].groupby("thread_id"):
        ticks = _io_ticks(tasks[tasks["thread_id"] == tid])
        if not ticks:
            continue
        ends = np.fromiter(ticks, dtype="int64")
        starts = np.array([ticks[t][0] for t in ticks], dtype="int64")
        row_ends = rows["ts_ns"].to_numpy(dtype="int64")
        k = np.searchsorted(ends, row_ends, side="left")
        inside = k < len(ends)
        inside[inside] &= row_ends[inside] > starts[k[inside]]
        for index, tick in zip(rows.index[inside], ends[k[inside]], strict=True):
            loop = samples.loc[index]
            for sid, reason, share in ticks[int(tick)][1]:
                made.append(
                    {
                        "thread_id": tid,
                        "stack_id": sid,
                        "wall_ns": loop["wall_ns"] * share,
                        "cpu_ns": loop["cpu_ns"] * share,
                        "wait_ns": loop["wait_ns"] * share,
                        "reason": reason,
                        "ts_ns": loop["ts_ns"],
                    }
                )
            replaced.append(index)
    if not made:
        return samples
    return pd.concat([samples.drop(index=replaced), pd.DataFrame(made)], ignore_index=True)


def _io_ticks(tasks: pd.DataFrame) -> dict[int, tuple[int, list[tuple[int, str, float]]]]:
    """One loop's task ticks in time order, those where tasks awaited I/O: tick instant ->
    (the instant its interval began, [(stack, reason, share of the tasks awaiting I/O)])."""
    ticks: dict[int, tuple[int, list[tuple[int, str, float]]]] = {}
    for ts, rows in tasks.sort_values("ts_ns").groupby("ts_ns", sort=True):
        io = rows[rows["wait_reason"].isin(AWAITED_IO) & (rows["tasks"] > 0)]
        if io.empty:
            continue
        weight = io["tasks"].to_numpy(dtype="float64")
        shares = weight / weight.sum()
        begun = int(ts) - int(rows["wall_ns"].max())
        stacks, reasons = io["stack_id"].astype(int), io["wait_reason"].astype(str)
        ticks[int(ts)] = (begun, list(zip(stacks, reasons, shares, strict=True)))
    return ticks
