"""Where each thread's time went, per stack: on-CPU, and waiting by reason.

A sample row says what its thread was doing at one instant (its stack, and whether it was
blocked in a known call), and how much CPU it used over the interval before (exact). A
thread that alternates between work and a short wait faster than the sampling interval
spends an interval's CPU in one place and is caught in another: charging each row's CPU
to its own stack would bill the work to the wait (on a service doing 0.45 ms of work then
a 0.6 ms sleep per request, most of its CPU landed on the sleep). So:

* a row blocked in a known call (network, disk, sleep, lock, subprocess, gpu_sync) is
  waiting time for that reason;
* the thread's CPU -- the exact sum of its rows -- is shared among its other rows, the
  ones caught running, in proportion to their wall time;
* what the running rows do not cover with CPU is runnable-but-not-running time: ``gil``
  or ``unknown`` as the sampler judged each interval (``""`` rows take the thread's
  dominant one).

Per thread, on-CPU time stays exact and the waits fill the rest of its wall time. When
the samples caught the thread blocked more often than its CPU allows (the sampler takes
the GIL at once when the thread blocks, but waits up to a switch interval while it runs
Python, so short bursts of work are under-sampled), its blocking waits are scaled down
to the wall time its CPU leaves; if no row caught it running, its CPU stays on the rows
it has. Without that bias, the share of rows caught in each state is an unbiased
estimate of the share of time in it.
"""

from __future__ import annotations

import pandas as pd

__all__ = ["BLOCKING_REASONS", "attribute"]

BLOCKING_REASONS = frozenset({"network", "disk", "sleep", "lock", "subprocess", "gpu_sync"})


def attribute(samples: pd.DataFrame) -> pd.DataFrame:
    """Sample rows -> ``thread_id, stack_id, wall_ns, cpu_ns, wait_ns, reason``.

    ``cpu_ns`` is the on-CPU time charged to the row's stack, ``wait_ns`` time waited for
    ``reason`` (both float ns: shares of a total are not whole nanoseconds). Per thread,
    ``cpu_ns`` sums to its measured CPU and ``cpu_ns + wait_ns`` to its sampled wall time.
    """
    columns = ["thread_id", "stack_id", "wall_ns", "cpu_ns", "wait_ns", "reason"]
    if samples.empty:
        return pd.DataFrame(
            {c: pd.Series(dtype="int64" if c != "reason" else "string") for c in columns}
        )
    thread = samples["thread_id"]
    wall = samples["wall_ns"].astype("float64")
    reason = samples["wait_reason"].fillna("").astype(str)
    blocking = reason.isin(BLOCKING_REASONS)
    running_wall = wall.where(~blocking, 0.0)

    def per_thread(values: pd.Series) -> pd.Series:
        return values.groupby(thread).transform("sum")

    thread_wall = per_thread(wall)
    thread_cpu = per_thread(samples["cpu_ns"].astype("float64")).clip(upper=thread_wall)
    thread_running = per_thread(running_wall)
    thread_blocked = thread_wall - thread_running
    caught_running = thread_running > 0
    # CPU onto the rows caught running (or, if none was, onto the rows there are).
    share = (running_wall / thread_running.where(caught_running)).where(
        caught_running, wall / thread_wall.where(thread_wall > 0)
    )
    cpu = thread_cpu * share.fillna(0.0)
    # Blocking rows wait all their wall time, unless the CPU leaves less than that.
    room = (thread_wall - thread_cpu).clip(lower=0.0)
    blocked_scale = (room / thread_blocked.where(thread_blocked > 0)).clip(upper=1.0)
    blocked_wait = wall * blocked_scale.fillna(0.0)
    unused = (wall - cpu).clip(lower=0.0)
    wait = blocked_wait.where(blocking, unused).where(caught_running, unused)

    runnable = reason.where(reason.isin(["gil", "unknown"]), "")
    gil_wall = wall.where(runnable == "gil", 0.0).groupby(thread).transform("sum")
    unknown_wall = wall.where(runnable == "unknown", 0.0).groupby(thread).transform("sum")
    dominant = pd.Series("unknown", index=samples.index).where(gil_wall <= unknown_wall, "gil")
    out_reason = reason.where(blocking, runnable.where(runnable != "", dominant))

    return pd.DataFrame(
        {
            "thread_id": thread,
            "stack_id": samples["stack_id"],
            "wall_ns": samples["wall_ns"],
            "cpu_ns": cpu,
            "wait_ns": wait,
            "reason": out_reason.astype("string"),
        }
    )
