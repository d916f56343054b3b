"""An event loop's idle time given to the tasks it was waiting for.

An event-loop thread asleep in its selector is idle capacity only when nothing awaits
I/O; with tasks suspended on a downstream call, a sleep or a child process, the loop's
sleep *is* their wait -- the time those requests take (issue 12: an asyncio service's
time was in coroutines no thread's stack showed). ``probe.samplers.tasks`` records, per
tick, what the loop's pending tasks await (``task_samples``); here each idle interval of
a loop thread (its ``event loop`` role, blocked in ``select``) is split among the tasks
awaiting I/O at the task ticks whose intervals it overlaps, each tick its part (task
ticks are sparser than the stack's when many tasks are pending; the stack's sparser
when the sampler is held back), in proportion to the tasks each row stands for:

* a task waiting on other tasks (a ``gather``, an awaited task, an asyncio lock,
  semaphore, event or queue) is not the work: the tasks it waits on are (the batch path's
  rule for a thread's wait on another thread, ``analyzers.path``);
* a task waiting on an executor is the executor thread's work, sampled on its own;
* a library's own task asleep (uvicorn's main loop waking every 0.1 s, a keep-alive
  timer: a task sleeping with no frame of the service's) is a timer, not the work;
* an interval with no task waiting on I/O stays the loop's idle time.

The rows made keep the loop's thread, so per-thread sums stay exact.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass

import numpy as np
import pandas as pd

from probe.analyzers.constants import constant
from probe.analyzers.stacks import NOT_THE_SERVICE, chains_of
from probe.analyzers.vocabulary import subkind_words
from probe.rundir.schema import BLOCKING_REASONS

__all__ = [
    *("AWAITED_IO", "IN_LINE_COLUMNS", "LOOP_LAG", "LOOP_ROLE", "LoopLag", "loop_lag"),
    *("kept_in_part", "loop_lag_notes", "queued_for_a_limit", "with_task_waits"),
]

# Task wait reasons that are the work's own waits (the rest wait on other work)
AWAITED_IO = ("network", "sleep", "subprocess")
LOOP_ROLE = "event loop"  # ``analyzers.roles``' role of an asyncio loop
# the attributed columns the rows made carry
_ATTRIBUTED = ["thread_id", "stack_id", "wall_ns", "cpu_ns", "wait_ns", "reason", "ts_ns"]


def with_task_waits(
    samples: pd.DataFrame, tasks: pd.DataFrame, library_stacks: Collection[int] = ()
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(``samples`` without the idle event-loop rows given to tasks, the rows made for
    them). ``samples``: attributed rows (thread_id, stack_id, wall_ns, cpu_ns, wait_ns,
    reason, ts_ns, idle_role). An idle loop row's interval is cut at the task ticks it
    overlaps (``_pieces_by_tick``); each piece held by a tick where tasks awaited I/O is
    replaced by one row per task stack and reason of that tick, sharing its time, and
    what no such tick holds stays idle (the row, scaled to it). The rows made carry the
    attributed columns only (the caller labels them by stack); both frames are as given
    when nothing is replaced.
    ``library_stacks``: the task stacks with no frame of the service's (their sleeps are
    timers)."""
    none = pd.DataFrame(columns=_ATTRIBUTED)
    if tasks.empty or samples.empty or "idle_role" not in samples:
        return samples, none
    idle = samples[(samples["idle_role"] == LOOP_ROLE) & (samples["wait_ns"] > 0)]
    library = tasks["stack_id"].isin(list(library_stacks))
    timers = (tasks["wait_reason"] == "sleep") & library
    ticks = _io_ticks(tasks[~timers], library[~timers])
    if idle.empty or ticks.empty:
        return samples, none
    pieces = [
        _pieces_by_tick(rows, ticks[ticks["thread_id"] == tid].drop_duplicates("ts_ns"))
        for tid, rows in idle.groupby("thread_id")
    ]
    made = pd.concat(pieces, ignore_index=True) if pieces else pd.DataFrame()
    if made.empty:
        return samples, none
    # what of each idle row no tick with I/O holds stays the loop's idle time
    kept = kept_in_part(samples, (1.0 - made.groupby("row")["fraction"].sum()).clip(lower=0.0))
    made = made.merge(ticks.rename(columns={"ts_ns": "tick_ns"}), on=["thread_id", "tick_ns"])
    for column in ("wall_ns", "cpu_ns", "wait_ns"):
        made[column] = made[column] * made["fraction"] * made["share"]
    made = made.rename(columns={"wait_reason": "reason"})[_ATTRIBUTED]
    return kept, made.reset_index(drop=True)


def kept_in_part(samples: pd.DataFrame, left: pd.Series) -> pd.DataFrame:
    """``samples`` with each row ``left`` indexes kept to that fraction of its time
    (``wall_ns``, ``cpu_ns``, ``wait_ns``), and dropped where none is left: the rest of
    an idle row whose other part was given to what the loop waited for."""
    kept = samples.drop(index=left.index[left <= 1e-9])
    rest = left[left > 1e-9]
    for column in ("wall_ns", "cpu_ns", "wait_ns") if not rest.empty else ():
        kept[column] = kept[column].astype("float64")
        kept.loc[rest.index, column] = kept.loc[rest.index, column] * rest
    return kept


def _pieces_by_tick(rows: pd.DataFrame, theirs: pd.DataFrame) -> pd.DataFrame:
    """Each of a loop thread's idle ``rows`` (its interval: ``wall_ns`` up to ``ts_ns``)
    cut at the task ticks ``theirs`` (each holds the instants ``begun_ns``..``ts_ns``)
    it overlaps: per piece the row's index (``row``), its ``tick_ns``, the ``fraction``
    of the row it is, its end (``ts_ns``), and the row's whole ``wall_ns``, ``cpu_ns``
    and ``wait_ns`` (the caller takes each piece's ``fraction`` of them). A row longer
    than a tick -- a stack sampler that took fewer ticks on a busy host (consume_feed in
    a CI run: a 386-ms interval, given whole to the consumers of the last tick it
    reached, made them 10% of the run where the feed's reader held every tick it covered
    but that one) -- is each tick's in part."""
    if theirs.empty or rows.empty:
        return pd.DataFrame()
    ends = theirs["ts_ns"].to_numpy(dtype="int64")
    starts = theirs["begun_ns"].to_numpy(dtype="int64")
    row_ends = rows["ts_ns"].to_numpy(dtype="int64")
    row_starts = row_ends - rows["wall_ns"].to_numpy(dtype="int64")
    first = np.searchsorted(ends, row_starts, side="right")  # the first tick ending after
    last = np.minimum(np.searchsorted(ends, row_ends, side="left") + 1, len(ends))
    counts = np.maximum(last - first, 0)
    row = np.repeat(np.arange(len(rows)), counts)
    k = np.arange(counts.sum()) - np.repeat(np.cumsum(counts) - counts, counts)
    k = k + np.repeat(first, counts)
    piece_start = np.maximum(row_starts[row], starts[k])
    piece_end = np.minimum(row_ends[row], ends[k])
    span = np.maximum(row_ends - row_starts, 1)[row]
    fraction = (piece_end - piece_start) / span
    keep = fraction > 0
    return pd.DataFrame(
        {
            "row": rows.index.to_numpy()[row][keep],
            "thread_id": rows["thread_id"].to_numpy()[row][keep],
            "tick_ns": ends[k][keep],
            "fraction": fraction[keep],
            "ts_ns": piece_end[keep],
            "wall_ns": rows["wall_ns"].to_numpy(dtype="float64")[row][keep],
            "cpu_ns": rows["cpu_ns"].to_numpy(dtype="float64")[row][keep],
            "wait_ns": rows["wait_ns"].to_numpy(dtype="float64")[row][keep],
        }
    )


# a stage's line for a limit: in line per one in the call, those in the call, the limit
IN_LINE_COLUMNS = ["in_line", "in_the_call", "queued_in"]


def queued_for_a_limit(
    tasks: pd.DataFrame, labels: pd.DataFrame, stacks: pd.DataFrame, frames: pd.DataFrame
) -> pd.DataFrame:
    """Per function of the service where tasks awaited I/O (their ``user_function``),
    indexed by it: the tasks queued for a limit (``label_stacks``' ``limit``) in it or in a function
    it was called from, while those tasks awaited I/O -- a pool or a semaphore letting
    only so many calls out at once, the rest of the requests in line behind them.
    ``in_line``: those in line per task in the call (over the ticks with one in it,
    weighted by the tick's interval); ``in_the_call``: the tasks in the call at those
    ticks (mean); ``queued_in``: the limit (``asyncio.Queue``...).

    A wait counts only in the middle of a task's work -- where the waiting function is
    not its task's outermost coroutine: a worker looping on a queue's ``get`` waits there
    for its next item (idle, starved by its producer), and a batch job's coroutines
    gathered behind a semaphore (``async with limit:`` first thing) wait to start -- the
    job's chosen pace, whose I/O the job's own finding reads. ``labels``:
    ``label_stacks``' rows of the run's ``stacks`` and ``frames``. Empty when no task
    queued so."""
    if tasks.empty or labels.empty:
        return pd.DataFrame(columns=IN_LINE_COLUMNS)
    awaited = labels[labels["stack_id"].isin(tasks["stack_id"].unique())]
    if not (awaited["limit"] != "").any():
        return pd.DataFrame(columns=IN_LINE_COLUMNS)
    chains = chains_of(stacks, frames, awaited["stack_id"])
    awaited = awaited.assign(
        chain=[c if isinstance(c, tuple) else () for c in awaited["stack_id"].map(chains)]
    )
    rows = tasks.merge(awaited[["stack_id", "user_function", "limit", "chain"]], on="stack_id")
    rows = rows[~rows["user_function"].isin(_NOT_THE_SERVICE)]
    limit, chain = rows["limit"], rows["chain"]
    mid_work = chain.str[0].fillna("") != rows["user_function"]
    waiting = rows[(limit != "") & mid_work]
    holding = rows[rows["wait_reason"].isin(AWAITED_IO)]
    if waiting.empty or holding.empty:
        return pd.DataFrame(columns=IN_LINE_COLUMNS)
    return _per_stage_line(waiting, holding)


def _per_stage_line(waiting: pd.DataFrame, holding: pd.DataFrame) -> pd.DataFrame:
    """``queued_for_a_limit``'s table from the rows in line and those in a call: per tick
    and stage in a call, the tasks in line in any function on its calls' chains; over
    every tick with one of the stage's tasks in the call."""
    tick = ["thread_id", "ts_ns"]
    lines = (
        waiting.groupby([*tick, "user_function"])
        .agg(queued=("tasks", "sum"), limit=("limit", "first"))
        .reset_index()
        .rename(columns={"user_function": "caller"})
    )
    callers = (
        holding[[*tick, "user_function", "chain"]]
        .explode("chain")
        .rename(columns={"chain": "caller"})
        .drop_duplicates()
        .merge(lines, on=[*tick, "caller"])
    )
    stage = [*tick, "user_function"]
    per_tick = holding.groupby(stage).agg(held=("tasks", "sum"), wall=("wall_ns", "max"))
    queued = callers.groupby(stage)["queued"].sum()
    per_tick["queued"] = queued.reindex(per_tick.index).fillna(0.0)
    per_tick = per_tick.reset_index()
    weight = per_tick["wall"].astype(float)
    sums = (
        pd.DataFrame(
            {
                "queued": per_tick["queued"] * weight,
                "held": per_tick["held"] * weight,
                "wall": weight,
                "user_function": per_tick["user_function"],
            }
        )
        .groupby("user_function")[["queued", "held", "wall"]]
        .sum()
    )
    sums = sums[(sums["queued"] > 0) & (sums["held"] > 0)]
    limits = callers.groupby("user_function")["limit"].agg(lambda v: str(v.mode().iloc[0]))
    return pd.DataFrame(
        {
            "in_line": sums["queued"] / sums["held"],
            "in_the_call": sums["held"] / sums["wall"],
            "queued_in": limits.reindex(sums.index),
        },
        columns=IN_LINE_COLUMNS,
    )


def _io_ticks(tasks: pd.DataFrame, library: pd.Series) -> pd.DataFrame:
    """The task rows awaiting I/O, with their tick's start (``begun_ns``: its instant
    less its interval) and their ``share`` of the tasks awaiting I/O at that tick, in time
    order; ticks where no task awaited I/O are left out.

    Where the loop's main task -- ``asyncio.run``'s, the job's own chain of awaits --
    awaits I/O itself in the service's code, that tick's time is its alone: the job ends
    when that chain does, and tasks working beside it are off its path (consume_feed: a
    producer reading a paced feed, eight consumers idle on their queue most of the time
    and in their upstream's call the rest; shared by count, the consumers' calls took
    66% of the run and a 2.6x fix where making them instant bought nothing). Where it
    awaits other tasks (a ``gather``), the time is theirs, shared. ``library``: the
    rows whose stack has no frame of the service's (a server's own main loop)."""
    begun = tasks["ts_ns"] - tasks.groupby(["thread_id", "ts_ns"])["wall_ns"].transform("max")
    io = tasks.assign(begun_ns=begun)
    io = io[io["wait_reason"].isin(AWAITED_IO) & (io["tasks"] > 0)]
    if "main_task" in io:
        main = io["main_task"].fillna(False).astype(bool) & ~library.reindex(
            io.index, fill_value=False
        )
        on_the_path = main.groupby([io["thread_id"], io["ts_ns"]]).transform("any")
        io = io[~on_the_path | main]
    total = io.groupby(["thread_id", "ts_ns"])["tasks"].transform("sum")
    io = io.assign(share=io["tasks"] / total).sort_values("ts_ns", kind="stable")
    return io[["thread_id", "ts_ns", "begun_ns", "stack_id", "wait_reason", "share"]]


@dataclass(frozen=True)
class LoopLag:
    lagged_share: float = constant(
        0.5,
        "readings of an event loop with callbacks ready to run and waiting for it: at "
        "most instants then, some task's resumption waits behind what the loop runs",
    )


LOOP_LAG = LoopLag()
_LOOP_COLUMNS = [
    *("readings", "lagged_share", "ready_mean", "busy_share", "gil_share", "busiest"),
    *("blocked_share", "blocked_in", "blocked_on"),
]
_NOT_THE_SERVICE = ("", *NOT_THE_SERVICE)


def loop_lag(loop_samples: pd.DataFrame, samples: pd.DataFrame) -> pd.DataFrame:
    """Per event-loop thread, indexed by thread id: its ``readings`` (one a stack tick);
    ``lagged_share``, those with callbacks ready to run (a task whose await completed,
    an I/O callback) waiting while the loop ran something else; ``ready_mean``, the
    callbacks ready at those readings; ``busy_share``, the loop thread's on-CPU time over
    its sampled time, ``gil_share`` its waits for the GIL over it; ``busiest``, the
    function it ran on a CPU most; ``blocked_share``, its time blocked in a call (a
    sleep, a socket, a lock) outside its selector -- a blocking call in a coroutine --
    over it, ``blocked_in`` the function that blocked most and ``blocked_on`` on what.
    ``samples``: attributed rows (thread_id, cpu_ns, wait_ns, reason, user_function;
    ``idle_role``: the loop's wait in its selector is idle, ``awaited``: a task's await)."""
    if loop_samples.empty:
        return pd.DataFrame(columns=_LOOP_COLUMNS)
    rows = {}
    for tid, theirs in loop_samples.groupby("thread_id"):
        lagged = theirs["ready"] > 0
        mine = samples[samples["thread_id"] == tid]
        spent = float((mine["cpu_ns"] + mine["wait_ns"]).sum())
        cpu = mine.groupby("user_function")["cpu_ns"].sum()
        blocked = _blocked_in_a_call(mine)
        rows[tid] = (
            len(theirs),
            float(lagged.mean()),
            float(theirs.loc[lagged, "ready"].mean()) if lagged.any() else 0.0,
            float(cpu.sum()) / spent if spent > 0 else 0.0,
            float(mine["wait_ns"].where(mine["reason"] == "gil", 0).sum()) / spent
            if spent > 0
            else 0.0,
            str(cpu.idxmax()) if not cpu.empty and cpu.max() > 0 else "",
            float(blocked.sum()) / spent if spent > 0 else 0.0,
            *_most_blocked(mine, blocked),
        )
    return pd.DataFrame.from_dict(rows, orient="index", columns=_LOOP_COLUMNS)


def _blocked_in_a_call(mine: pd.DataFrame) -> pd.Series:
    """The loop thread's waits blocked in a call (BLOCKING_REASONS), not in its selector
    waiting for the next event (``idle_role``) nor a task's await (``awaited``)."""
    blocking = mine["reason"].isin(BLOCKING_REASONS)
    if "idle_role" in mine:
        blocking &= mine["idle_role"] == ""
    if "awaited" in mine:
        blocking &= ~mine["awaited"].astype(bool)
    return mine["wait_ns"].where(blocking, 0.0)


def _most_blocked(mine: pd.DataFrame, blocked: pd.Series) -> tuple[str, str]:
    """(the function blocked most, on what), or ("", "")."""
    if not (blocked > 0).any():
        return "", ""
    by = blocked.groupby([mine["user_function"], mine["reason"]]).sum()
    function, reason = by.idxmax()
    return str(function), str(reason)


def loop_lag_notes(loops: pd.DataFrame, settings: LoopLag = LOOP_LAG) -> list[str]:
    """A line per event loop whose ready callbacks queued behind what it ran: a blocking
    call in a coroutine, a coroutine of the service's on a CPU, or the GIL held by other
    threads."""
    lines = []
    for _, r in loops[loops["lagged_share"] >= settings.lagged_share].iterrows():
        lag = (
            f"at {r.lagged_share:.0%} of the instants read, {r.ready_mean:.1f} callbacks of "
            "an event loop were ready to run and waited for it (loop lag)"
        )
        if r.blocked_share >= max(r.busy_share, r.gil_share):
            lines.append(
                f"{lag}: it was blocked in a call {r.blocked_share:.0%} of its time, mostly "
                f"in {r.blocked_in} ({subkind_words(r.blocked_on)}); a blocking call in a "
                "coroutine holds up every other task: await an async client instead, or "
                "run the call off the loop (await asyncio.to_thread(fn, ...); Starlette: "
                "await run_in_threadpool(fn, ...))"
            )
        elif r.busiest not in _NOT_THE_SERVICE and r.busy_share >= r.gil_share:
            lines.append(
                f"{lag}: it ran on a CPU {r.busy_share:.0%} of its time, mostly in "
                f"{r.busiest}; CPU work in a coroutine holds up every other task: make it "
                "cheaper, or run it off the loop (await loop.run_in_executor(pool, fn, ...))"
            )
        else:
            lines.append(
                f"{lag}: it ran on a CPU {r.busy_share:.0%} of its time (mostly in "
                f"{r.busiest or 'no function sampled'}) and waited for the GIL "
                f"{r.gil_share:.0%}: the threads holding the GIL hold up its tasks too"
            )
    return lines
