"""A batch job's critical path across its threads, from stack samples alone.

Without spans, summing every thread's samples is not the job's path: a helper thread
waiting in ``accept`` and the main thread waiting in ``Future.result`` both add time
nobody's request spends (issue 12: a helper server's loop named as the stage; pools'
waits read as contention). For a batch job the main thread's wall time *is* the run's,
so the path is the main thread, with each of its waits on another thread (``lock``: a
join, ``Future.result``, a queue, an event, a condition) replaced by what the other
threads were doing meanwhile:

* time is cut into bins of the sampler's tick; in each bin the main thread's lock wait is
  shared among the other threads' samples active in it (running, runnable, or blocked on
  I/O), in proportion to their time in the bin;
* another thread's own lock waits are left out when anything else ran in the bin (a
  consumer starved on an empty queue waits on the producer, it is not the work), and
  kept when nothing else did (then the wait is the path);
* a lock wait of the main thread during which no other thread ran stays on the path as
  it is: a wait on something outside the process's threads.

Waits are followed one level: a thread that the main thread waits on, itself waiting on
a third, has its wait shared at that level only through the rule above.

Servers are not batch jobs: when the main thread spends most of its time in a serving
loop (asyncio's ``run_forever``, ``serve_forever``, gunicorn's arbiter), the work is the
requests' (``probe.request`` spans), and this returns nothing.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from probe.analyzers.constants import constant

__all__ = ["PATH", "PathSettings", "critical_path"]


@dataclass(frozen=True)
class PathSettings:
    serving_majority: float = constant(
        0.5, "the main thread in a serving loop most of its sampled time: a server, not a batch"
    )


PATH = PathSettings()


def _pieces(samples: pd.DataFrame, tick_ns: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Each row's [start, end) cut at bin edges: (row index, bin from the first, share of
    the row)."""
    end = samples["ts_ns"].to_numpy(dtype="int64")
    start = end - samples["wall_ns"].to_numpy(dtype="int64")
    b0 = start // tick_ns
    b1 = np.maximum(end - 1, start) // tick_ns
    n = (b1 - b0 + 1).astype("int64")
    rows = np.repeat(np.arange(len(start)), n)
    offsets = np.arange(int(n.sum())) - np.repeat(np.cumsum(n) - n, n)
    bins = b0[rows] + offsets
    lo = np.maximum(start[rows], bins * tick_ns)
    hi = np.minimum(end[rows], (bins + 1) * tick_ns)
    span = np.maximum(end - start, 1)[rows]
    return rows, bins - bins.min(), np.clip(hi - lo, 0, None) / span


def _batch_main(
    samples: pd.DataFrame, main_thread: int | None, time: np.ndarray
) -> np.ndarray | None:
    """Which rows are the main thread's, when it is a batch job's (not a server's)."""
    if main_thread is None or samples.empty:
        return None
    is_main = (samples["thread_id"] == main_thread).to_numpy()
    main_time = time[is_main].sum()
    serving = samples["serving"].to_numpy(dtype=bool)
    if main_time <= 0 or time[is_main & serving].sum() > PATH.serving_majority * main_time:
        return None
    return is_main


def _column(samples: pd.DataFrame, name: str) -> np.ndarray:
    """A boolean column of the rows, all False where the rows have none."""
    if name not in samples:
        return np.zeros(len(samples), dtype=bool)
    return samples[name].fillna(False).to_numpy(dtype=bool)


def _waiters(
    samples: pd.DataFrame,
    pieces: tuple[np.ndarray, np.ndarray, np.ndarray],
    time: np.ndarray,
    lock: np.ndarray,
    is_main: np.ndarray,
    tick_ns: int,
) -> np.ndarray:
    """Per row, its share of the mean number of threads queued on a mutex in its function
    while another thread works in that function: the row's mutex wait in the bins where
    its function ran, over the time those bins cover (Little's law). Summed per function,
    a convoy's queue length. The main thread's waits are followed, not queued. A wait to
    be notified (``Condition.wait``: a consumer
    starved on an empty queue) is no queue behind anyone: ingest_pipeline's four
    consumers read as "67 threads serialised by a lock" when their waits were divided by
    their little time on the path."""
    rows, bins, share = pieces
    functions, _ = pd.factorize(samples["user_function"].to_numpy())
    nf = int(functions.max()) + 1
    key = bins * nf + functions[rows]
    worked = np.zeros((int(bins.max()) + 1) * nf, dtype=bool)
    worked[key[~(lock | _column(samples, "woken"))[rows]]] = True  # (bin, function): it ran
    # behind a briefly held lock is no queue behind the work either (its holder is not
    # running the work: it waits for the GIL)
    queued = ~is_main & lock & ~samples["notify_wait"].to_numpy(dtype=bool)
    queued &= ~samples["brief_lock"].to_numpy(dtype=bool)
    wait_ns = np.bincount(
        rows, weights=time[rows] * share * (queued[rows] & worked[key]), minlength=len(time)
    )
    worked_ns = worked.reshape(-1, nf).sum(axis=0) * float(tick_ns)
    return wait_ns / np.maximum(worked_ns[functions], 1.0)


def _takers(
    per_bin: list[np.ndarray], of_piece: list[np.ndarray], bins: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """(per bin, the other threads' time that takes the main thread's wait; per piece,
    whether it is part of it), from the classes of rows in order: doing something
    (running, runnable, on I/O), woken and waiting for a CPU, waiting on a lock (a mutex,
    or behind a briefly held lock's holder), waiting to be notified (or the first of
    them). The first class present in a bin takes it:
    where nothing else ran, the waits on a lock are what there is, and a wait to be
    notified only where there is none either (a consumer starved on an empty queue is not
    the work even then: its producer, stalled behind a lock, is)."""
    taker = np.full(len(per_bin[0]), len(per_bin))
    for k in reversed(range(len(per_bin))):
        taker = np.where(per_bin[k] > 0, k, taker)
    others = np.choose(np.minimum(taker, len(per_bin) - 1), per_bin) * (taker < len(per_bin))
    counted = np.zeros(len(bins))
    for k, piece in enumerate(of_piece):
        counted = np.where(piece & (taker[bins] == k), 1.0, counted)
    return others, counted


def _hand_over(
    given: np.ndarray,
    per_class: list[np.ndarray],
    of_piece: list[np.ndarray],
    pieces: tuple[np.ndarray, np.ndarray, np.ndarray],
) -> tuple[np.ndarray, np.ndarray]:
    """Per piece, (the factor of its time that takes the main thread's wait ``given`` per
    bin, the factor of a main thread's wait it keeps: 1 in the bins where no other
    thread was there to take it), the takers from ``per_class`` as ``_takers`` picks
    them.

    Woken threads come after the threads doing work: ingest_pipeline beside three CPU
    hogs, its four consumers, woken for each record, waited for a core 0.08 s each;
    taking the main thread's join beside the producer, their stage read 27-36% of the
    path (6 runs of 6). A main thread's own wait for a CPU after it was woken is handed
    only to threads working or woken beside it, not to threads that wait too:
    render_queue beside the hogs, its main thread woken from a full queue's ``put``
    while the worker rendered, kept its 0.24 s on a run queue as its own, and its
    stage read 20-33% of the path against its 7% of the process's CPU time (16 runs).
    So is its time runnable in ``Condition.wait`` (notified, waiting for the GIL or a
    core to resume): there, 0.6 s of 2.6 s, and its stage 31% of the path (1 run of 12).
    """
    rows, bins, share = pieces
    others, counted = _takers(per_class, of_piece, bins)
    taken = np.where(others > 0, given / np.where(others > 0, others, 1.0), 0.0)
    return share * taken[bins] * counted, share * (others[bins] == 0)


def _ran_while_caught_waiting(
    samples: pd.DataFrame, other: np.ndarray, time: np.ndarray, waiting: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """(the factors of the rows' own time on the path, per row an extra factor of its
    on-CPU time): of what a row caught waiting on another thread took of the main
    thread's wait, the part its thread ran in the row's interval (``interval_cpu_ns``,
    its CPU clock's reading, over its wall time) goes to that thread's on-CPU time
    (where ``attribution`` put its CPU), the rest stays the row's wait.

    Where a tick's work alternates faster than the tick, both threads are caught waiting
    on each other: render_queue's worker, caught in ``queue.get`` on the queue its main
    thread was refilling, had run 89% of those rows' intervals by its CPU clock (5-ms
    switch interval); taken whole as its wait, ``render_all`` read contention/lock at 8%
    of the path (1 run in 12) where /proc and its own timers put the worker's time off a
    CPU in ``get`` at 6-12% of its wall, concurrent with the main thread's puts, which
    are on the path already."""
    if "interval_cpu_ns" not in samples:
        return other, np.zeros(len(other))
    wall = samples["wall_ns"].to_numpy(dtype="float64")
    read = samples["interval_cpu_ns"].fillna(0).to_numpy(dtype="float64")
    ran = np.where(waiting & (wall > 0), np.clip(read / np.where(wall > 0, wall, 1.0), 0, 1), 0)
    moved = other * time * ran
    codes, _ = pd.factorize(samples["thread_id"].to_numpy())  # as _waiters groups
    cpu = samples["cpu_ns"].to_numpy(dtype="float64")
    thread_cpu = np.bincount(codes, weights=cpu)[codes]
    thread_moved = np.bincount(codes, weights=moved)[codes]
    has_cpu = thread_cpu > 0  # a thread with no CPU of its own keeps the wait
    keep = np.where(has_cpu, 1.0 - ran, 1.0)
    extra = np.where(has_cpu, thread_moved / np.where(has_cpu, thread_cpu, 1.0), 0.0)
    return other * keep, extra


def critical_path(
    samples: pd.DataFrame, main_thread: int | None, tick_ns: int
) -> pd.DataFrame | None:
    """Per sample row, the factors its on-CPU time (``cpu``) and its wait (``wait``) count
    for on the path (0: off it), and ``waiters``: its share of the threads queued on a
    mutex in its function while another thread works there (``_waiters``; a lock held
    across that work serialises them). None when there is no main thread in the samples
    or it is a server's.
    ``samples`` are attributed rows (``attribution.attribute``) with ``ts_ns``,
    ``serving`` (the stack is in a serving loop), ``brief_lock`` (behind a briefly held
    lock: ``analyzers.roles``), ``notify_wait`` (``Condition.wait``:
    ``analyzers.stacks``) and, where known, ``interval_cpu_ns`` (the row's own CPU
    reading: ``_ran_while_caught_waiting``), idle capacity already removed;
    ``tick_ns``: the sampler's tick (1/hz), the bins' width."""
    time = (samples["cpu_ns"] + samples["wait_ns"]).to_numpy(dtype="float64")
    is_main = _batch_main(samples, main_thread, time)
    if is_main is None:
        return None
    rows, bins, share = _pieces(samples, tick_ns)
    nbins = int(bins.max()) + 1
    # waits on another thread: a lock's, or one behind a briefly held lock's holder (a
    # GIL wait by reason, but on the holder as a lock wait is: ``analyzers.roles``)
    on_another = (samples["reason"] == "lock").to_numpy() | samples["brief_lock"].to_numpy(bool)
    lock = on_another & (samples["wait_ns"] > 0).to_numpy()
    waits = samples["wait_ns"].to_numpy(dtype="float64")

    def per_bin(values: np.ndarray, mask: np.ndarray) -> np.ndarray:
        keep = mask[rows]
        return np.bincount(bins[keep], weights=values[rows][keep] * share[keep], minlength=nbins)

    # woken from a wait on another thread, waiting for a CPU (``woken``: made by
    # attribution.split_run_queue_waits; the main thread's also where caught runnable in
    # ``Condition.wait``, notified): ``_hand_over`` says where each goes
    woken = _column(samples, "woken")
    notify_wait = samples["notify_wait"].to_numpy(dtype=bool)
    main_woken = is_main & (woken | (notify_wait & ~lock))
    woken = woken & ~is_main
    notified = ~is_main & lock & notify_wait
    classes = (~is_main & ~lock & ~woken, woken, ~is_main & lock & ~notified, notified)
    per_class = [per_bin(time, c) for c in classes]
    of_piece = [c[rows] for c in classes]
    other_ns = np.zeros(len(time))
    kept_ns = np.zeros(len(time))
    for gives, takers in ((is_main & lock, len(classes)), (main_woken, 2)):
        handed, kept = _hand_over(
            per_bin(waits, gives), per_class[:takers], of_piece[:takers], (rows, bins, share)
        )
        other_ns += np.bincount(rows, weights=time[rows] * handed, minlength=len(time))
        kept_ns += np.bincount(rows, weights=waits[rows] * kept * gives[rows], minlength=len(time))
    other = other_ns / np.where(time > 0, time, 1.0)
    own_wait = np.where(lock | main_woken, kept_ns / np.where(waits > 0, waits, 1.0), 1.0)
    other, on_cpu = _ran_while_caught_waiting(samples, other, time, ~is_main & lock)
    return pd.DataFrame(
        {
            "cpu": np.where(is_main, 1.0, other + on_cpu),
            "wait": np.where(is_main, own_wait, other),
            "waiters": _waiters(samples, (rows, bins, share), time, lock, is_main, tick_ns),
        },
        index=samples.index,
    )
