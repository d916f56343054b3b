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
  dominant one);
* a row blocked entering a lock that its holder keeps for a few bytecodes only (a
  standard-library primitive's: ``analyzers.roles.enters_a_brief_lock``) waits, like
  any blocked row, but for what its holder waits for: the GIL or a CPU, the thread's
  dominant runnable reason.

Per thread, on-CPU time stays exact and the waits fill the rest of its wall time. When
the samples caught the thread blocked more often than its CPU allows (the sampler takes
the GIL at once when the thread blocks, but waits up to a switch interval while it runs
Python, so short bursts of work are under-sampled), its blocking waits are scaled down
to the wall time its CPU leaves; if no row caught it running, its CPU stays on the rows
it has. Without that bias, the share of rows caught in each state is an unbiased
estimate of the share of time in it.

A row's time on a run queue (``queued_ns``: the kernel's count of the thread's wait for a
CPU in its interval) is not its stack's wait, whatever call the stack ends in: a worker
that left ``queue.get`` with its job and waited for a core is not waiting on the queue
(``split_run_queue_waits``); nor is a row caught waiting for the GIL waiting for it while
it sits on a run queue. Nor did a row run while it waited for a CPU: a running row takes
its thread's CPU in proportion to its wall time less that wait.
"""

from __future__ import annotations

from collections.abc import Callable, Collection

import numpy as np
import pandas as pd

from probe.rundir.schema import BLOCKING_REASONS, RUNNABLE_REASONS

__all__ = ["attribute", "split_run_queue_waits"]


def split_run_queue_waits(samples: pd.DataFrame) -> pd.DataFrame:
    """The samples with each blocking or GIL-waiting row whose interval held a wait for a
    CPU made two: that wait as a runnable row (``unknown``, the OS scheduler's; no CPU, no
    tick of its own, at the interval's start) and the rest of the interval as the row was.
    ``woken`` marks the rows made from a wait on another thread (``lock``): woken by it,
    waiting for a CPU (``analyzers.path`` ranks them after the threads doing work);
    ``on_run_queue`` every row made (the kernel's count, not a sampled instant:
    ``rules.runnable_beside_idle_cores`` leaves it a wait for a CPU).

    Truth for the split: ``render_queue.py``'s worker beside three CPU-bound processes on
    2 cores, 0.92 s on a CPU, 0.97 s on a run queue and 0.06 s blocked by its schedstat,
    was caught in ``queue.get`` in 54% of its samples and read as lock contention; its
    off-CPU time was the cores', not the queue's. The same for the GIL: tokenize_pool's
    four workers beside a busy loop on 2 cores, each 0.26 s on a CPU, 0.52 s on a run
    queue and ~0.4 s asleep in a futex by /proc (2026-11-27), read 0.46-0.62 of their
    time waiting for the GIL in 3 runs of 5, the run queue's time counted as the GIL's.
    (Beside an idle core the split-off time goes back to the stage's waits:
    ``rules.runnable_beside_idle_cores``.) Runs without the column are returned as they
    are."""
    if samples.empty or "queued_ns" not in samples:
        return samples
    reason = samples["wait_reason"].fillna("").astype(str)
    wall = samples["wall_ns"].astype("int64")
    queued = samples["queued_ns"].fillna(0).astype("int64").clip(lower=0, upper=wall)
    split = reason.isin([*BLOCKING_REASONS, "gil"]).to_numpy() & (queued > 0).to_numpy()
    if not split.any():
        return samples
    rows = samples[split]
    waits = rows.assign(
        ts_ns=rows["ts_ns"] - rows["wall_ns"] + queued[split],
        woken=rows["wait_reason"] == "lock",
        on_run_queue=True,
        wall_ns=queued[split],
        cpu_ns=0,
        wait_reason="unknown",
        samples=0,
        kernel_state="R",
        queued_ns=queued[split],
    )
    blocked = samples.assign(woken=False, on_run_queue=False)
    blocked.loc[split, "wall_ns"] = wall[split] - queued[split]
    blocked.loc[split, "queued_ns"] = 0
    dtypes = {**samples.dtypes.to_dict(), "woken": "bool", "on_run_queue": "bool"}
    out = pd.concat([blocked, waits.astype(dtypes)], ignore_index=True)
    return out.sort_values("ts_ns", kind="stable", ignore_index=True)


def attribute(samples: pd.DataFrame, brief_lock_stacks: Collection[int] = ()) -> pd.DataFrame:
    """Sample rows -> ``thread_id, stack_id, wall_ns, cpu_ns, wait_ns, reason``.

    ``cpu_ns`` is the on-CPU time charged to the row's stack, ``wait_ns`` time waited for
    ``reason`` (both float ns: shares of a total are not whole nanoseconds). Per thread,
    ``cpu_ns`` sums to its measured CPU and ``cpu_ns + wait_ns`` to its sampled wall time.
    ``brief_lock_stacks``: the stacks blocked entering a briefly held lock (see above).
    """
    columns = ["thread_id", "stack_id", "wall_ns", "cpu_ns", "wait_ns", "reason"]
    if samples.empty:
        return pd.DataFrame(
            {c: pd.Series(dtype="int64" if c != "reason" else "string") for c in columns}
        )
    # numpy over per-thread sums (np.bincount on factorised thread ids): the same
    # arithmetic as groupby-transform at a fraction of pandas' per-operation cost.
    thread = samples["thread_id"]
    codes, _ = pd.factorize(thread.to_numpy())
    wall = samples["wall_ns"].to_numpy(dtype="float64")
    reason = samples["wait_reason"].fillna("").astype(str).to_numpy(dtype=object)
    blocking = np.isin(reason, list(BLOCKING_REASONS))
    running_wall = np.where(blocking, 0.0, wall)

    def per_thread(values: np.ndarray) -> np.ndarray:
        return np.bincount(codes, weights=values)[codes]

    thread_wall = per_thread(wall)
    thread_cpu = np.minimum(per_thread(samples["cpu_ns"].to_numpy(dtype="float64")), thread_wall)
    thread_running = per_thread(running_wall)
    thread_blocked = thread_wall - thread_running
    caught_running = thread_running > 0
    share = _cpu_shares(samples, running_wall, thread_running, thread_wall, per_thread)
    with np.errstate(divide="ignore", invalid="ignore"):
        cpu = thread_cpu * np.nan_to_num(share)
        # Blocking rows wait all their wall time, unless the CPU leaves less than that.
        room = np.clip(thread_wall - thread_cpu, 0.0, None)
        blocked_scale = np.minimum(room / np.where(thread_blocked > 0, thread_blocked, np.nan), 1.0)
    blocked_wait = wall * np.nan_to_num(blocked_scale)
    unused = np.clip(wall - cpu, 0.0, None)
    wait = np.where(caught_running & blocking, blocked_wait, unused)

    behind = samples["stack_id"].isin(list(brief_lock_stacks)).to_numpy() & blocking
    out_reason = _reasons(reason, blocking, behind, wall, per_thread)
    return pd.DataFrame(
        {
            "thread_id": thread,
            "stack_id": samples["stack_id"],
            "wall_ns": samples["wall_ns"],
            "cpu_ns": cpu,
            "wait_ns": wait,
            "reason": pd.array(out_reason, dtype="string"),
        }
    )


def _cpu_shares(
    samples: pd.DataFrame,
    running_wall: np.ndarray,
    thread_running: np.ndarray,
    thread_wall: np.ndarray,
    per_thread: Callable[[np.ndarray], np.ndarray],
) -> np.ndarray:
    """Each row's share of its thread's CPU: the rows caught running, in proportion to
    their wall time less their wait for a CPU (or, if that leaves nothing, to their wall
    time; if none was caught running, every row's)."""
    queued = (
        samples["queued_ns"].fillna(0).to_numpy(dtype="float64")
        if "queued_ns" in samples
        else np.zeros(len(running_wall))
    )
    wall = samples["wall_ns"].to_numpy(dtype="float64")
    could_run = np.clip(running_wall - queued, 0.0, None)
    thread_could_run = per_thread(could_run)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(
            thread_could_run > 0,
            could_run / np.where(thread_could_run > 0, thread_could_run, 1.0),
            np.where(
                thread_running > 0,
                running_wall / np.where(thread_running > 0, thread_running, 1.0),
                wall / np.where(thread_wall > 0, thread_wall, np.nan),
            ),
        )


def _reasons(
    reason: np.ndarray,
    blocking: np.ndarray,
    behind: np.ndarray,
    wall: np.ndarray,
    per_thread: Callable[[np.ndarray], np.ndarray],
) -> np.ndarray:
    """Each row's reason: a blocking row's own (a row ``behind`` a briefly held lock: its
    thread's dominant runnable one), a runnable row's sampled one, ``""`` rows the
    dominant."""
    runnable = np.where(np.isin(reason, list(RUNNABLE_REASONS)), reason, "")
    gil_wall = per_thread(np.where(runnable == "gil", wall, 0.0))
    unknown_wall = per_thread(np.where(runnable == "unknown", wall, 0.0))
    dominant = np.where(gil_wall <= unknown_wall, "unknown", "gil")
    own = np.where(blocking & ~behind, reason, np.where(runnable != "", runnable, dominant))
    return np.asarray(own)
