"""Requests answered in batches that wait out their window with nothing left to come.

A model server batches its requests (Triton's dynamic batcher, TorchServe's
``batch_size`` and ``max_batch_delay``, Ray Serve's ``@serve.batch``, a hand-written
asyncio batcher): a batch opens with its first request and closes when it holds its
maximum or its window has passed. With fewer requests in flight than the maximum, each
batch waits out its window; and where the clients are all in the batch (each waits for
its answer before it sends again), nothing can arrive while it waits. The window is
then most of each request's time, and the process idles through it: no stage's samples
show it, and the event loop reads as spare capacity (tests/threads_corpus's
batch_window_api read "CPU-bound in <library>, run one instance per core: 1.44x", where
closing its batches at the eight requests in flight realised 4.6-7.0x).

``held_batches(requests)`` reads the pattern off the request spans alone. Answers come
in bursts (the requests' ends, split where two are further apart than
``split_of_latency`` of the median request's time); a burst's *hold* runs from its last
request's start to its first answer. The run's batches are held when ``min_bursts`` or
more bursts hold ``min_batch`` requests or more on average, and a closed loop sends
them: ``closed_share`` of the bursts or more hold the usual number of requests, and
started after the last burst's first answer. A service that does not batch has its
requests start during each other's waits; an open loop (arrivals that do not wait for
answers) fills its batches to varying sizes, and there closing a batch early buys
latency, not throughput.

``given_to_the_batcher`` gives the event loop's idle time inside the holds to the
batcher's stage, as a wait on its timer (``sleep``): the requests' time, not capacity.
The batcher is the service's function on the loop's task stacks awaiting a timeout or
another task (``asyncio.wait_for``, a queue, ``asyncio.sleep``) during the holds. Where
no task does, a batcher thread: the service's function that waits inside the holds (on
a lock with a timeout, ``queue.get(timeout=)``, or a timer) on one thread at a time,
beside a function that waits there on ``min_batch`` threads or more at once -- the
batch's requests, each holding a thread of a sync server while it waits for its answer.
Both waits inside the holds are then the batcher's. batch_thread_api (the threads
corpus) read "contention-bound in ``predict``, waiting on locks" at confidence 100%
before: no lock is held, its handlers wait on futures and its batcher on its queue.

What closing each batch once it holds the requests in flight buys (a closed loop: the
same clients, each answered sooner, sends sooner) is bounded twice, and the estimate is
the lower bound. The holds gone: the cycles (one burst's last answer to the next's)
shortened by the holds, as if the batch's own work in them took no time. The event loop
then busy all the time: throughput at most the loop thread's CPU share of the cycles
over one (the bottleneck law, on the thread's own CPU clock), as the fixed variant is:
CPU-bound on its loop. With a batcher thread, every thread of the service shares the one
interpreter: their CPU together over the cycles (batch_thread_api: 2.4x against
2.2-3.2x realised, 3.1x at the median of five pairs).

Both run low, and the estimate with them: the loop's work a request costs less once it
no longer idles between batches (caches and predictors kept warm). batch_window_api
unprofiled, its server's CPU from /proc: 1,165-1,238 us a request windowed, 717-855 us
with its batches closed at eight (two rounds, 2026-12-07), and the realised gain moves
with the host's speed, the estimate much less: estimates 3.5-4.0x against medians of
four plain pairs of 3.8x (one sitting) and 5.5-5.9x (three runs in the next). Two
readings that did worse: the loop's idle time in the holds as the stack samples give it
(their ~13-ms intervals spread the CPU of the work either side of a 33-ms hold over it:
2.6x), and the holds less the share of the loop's own readings in them that found a
task running (2.8-4.3x).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
import pandas as pd

from probe.analyzers.constants import constant
from probe.analyzers.stacks import NOT_THE_SERVICE
from probe.analyzers.tasks import LOOP_ROLE, kept_in_part
from probe.rundir.schema import BLOCKING_REASONS

__all__ = ["BATCH_WINDOW", "BatchWindow", "HeldBatches", "given_to_the_batcher", "held_batches"]

# the batcher's task waits: a timeout over another task, a queue, a timer
_BATCHER_WAITS = ("tasks", "sleep")
# a batcher thread's (``queue.get(timeout=)``: a lock with a timeout, or a timer), and a
# request's thread waiting for its answer (a future's condition)
_THREAD_WAITS = ("lock", "sleep")
# whose CPU bounds the fixed service (``HeldBatches.serving``), in the fix's words
_ON_THE_LOOP = "the event loop's thread"
_ON_EVERY_THREAD = "the service's threads, one interpreter for them all,"


@dataclass(frozen=True)
class BatchWindow:
    split_of_latency: float = constant(
        0.25,
        "a batch's answers go out one after another (batch_window_api under probe: all "
        "eight within 0.9-7.9 ms, its requests 34-38 ms each), the next batch's a window "
        "later: a gap of a quarter of the median request's time keeps a batch together "
        "while its answers take less than that (a service that does not batch has its "
        "answers far apart as often as not, and its requests sent during each other's: "
        "``closed_share`` then fails)",
    )
    min_bursts: int = constant(
        20, "bursts enough that the pattern is the service's, not a few coincidences"
    )
    min_batch: float = constant(2.0, "a batch of one is no batch: at least two on average")
    closed_share: float = constant(
        0.9,
        "the batches sent after the last one's answers began, and those of the usual "
        "size: a closed loop's clients are all in every batch (batch_window_api: 149 of "
        "149 both ways); a tenth left for the start and end of the load, when clients "
        "join and leave",
    )


BATCH_WINDOW = BatchWindow()


@dataclass(frozen=True)
class HeldBatches:
    """The run's batches, held past their last request (module doc)."""

    bursts: int
    mean_batch: float  # requests a burst
    fill_ms: float  # median: a burst's first request's start to its last's
    hold_ms: float  # median: its last request's start to its first answer
    cycle_ms: float  # median: one burst's last answer to the next's
    closed_share: float  # of the batches, those sent after the last one's answers began
    cycles_s: float  # the bursts' cycles, summed: the first request's start to the last answer
    last_answer_ns: int  # where they end
    starts: tuple[int, ...]  # the holds, ns
    ends: tuple[int, ...]
    stage: str = ""  # the batcher's stage, once found (``given_to_the_batcher``)
    # the serving threads' CPU over the cycles (their CPU clocks' readings on the samples
    # in them): the event loop's, or with a batcher thread every thread's; None where
    # none fall in them
    loop_cpu_share: float | None = None
    serving: str = _ON_THE_LOOP  # whose CPU that is, in words

    @property
    def held_s(self) -> float:
        return float(np.sum(np.array(self.ends) - np.array(self.starts))) / 1e9

    @property
    def without_holds(self) -> float:
        """The cycles over themselves less the holds: the first bound (module doc)."""
        left = self.cycles_s - self.held_s
        return self.cycles_s / left if left > 0 else float("inf")

    @property
    def speedup(self) -> float | None:
        """Throughput with each batch closed at the requests in flight (module doc):
        None where the loop's CPU was not read."""
        if not self.loop_cpu_share:
            return None
        return min(self.without_holds, 1.0 / self.loop_cpu_share)


def held_batches(requests: pd.DataFrame, s: BatchWindow = BATCH_WINDOW) -> HeldBatches | None:
    """The pattern (module doc) in request spans (``start_ns``, ``end_ns``); None
    where the answers do not come in held batches."""
    if len(requests) < s.min_bursts * s.min_batch:
        return None
    spans = requests.sort_values("end_ns", kind="stable")
    start = spans["start_ns"].to_numpy(dtype="int64")
    end = spans["end_ns"].to_numpy(dtype="int64")
    split = s.split_of_latency * float(np.median(end - start))
    burst = np.concatenate([[0], np.cumsum(np.diff(end) > split)])
    g = pd.DataFrame({"burst": burst, "start": start, "end": end}).groupby("burst")
    b = g.agg(
        n=("end", "size"),
        first_start=("start", "min"),
        last_start=("start", "max"),
        first_end=("end", "min"),
        last_end=("end", "max"),
    )
    if len(b) < s.min_bursts or float(b["n"].mean()) < s.min_batch:
        return None
    # a closed loop: each batch's requests are sent after the last batch's answers
    # began (a client sends once answered), and every batch holds every client
    after = b["first_start"].iloc[1:].to_numpy() >= b["first_end"].iloc[:-1].to_numpy()
    closed = float(after.mean())
    whole = float((b["n"] == b["n"].mode().iloc[0]).mean())
    if min(closed, whole) < s.closed_share:
        return None
    # the holds in order and apart (a burst sent before the last one's answer, one in
    # ten at most, may overlap it: left out)
    after_last = b["last_start"] >= b["first_end"].cummax().shift(fill_value=0)
    holds = b[(b["first_end"] > b["last_start"]) & after_last]
    return HeldBatches(
        bursts=len(b),
        mean_batch=float(b["n"].mean()),
        fill_ms=float((b["last_start"] - b["first_start"]).median()) / 1e6,
        hold_ms=float((holds["first_end"] - holds["last_start"]).median()) / 1e6,
        cycle_ms=float(b["last_end"].diff().median()) / 1e6,
        closed_share=closed,
        cycles_s=float(b["last_end"].iloc[-1] - b["first_start"].iloc[0]) / 1e9,
        last_answer_ns=int(b["last_end"].iloc[-1]),
        starts=tuple(int(v) for v in holds["last_start"]),
        ends=tuple(int(v) for v in holds["first_end"]),
    )


def _held_ns(held: HeldBatches, at: np.ndarray) -> np.ndarray:
    """The holds' time before each instant of ``at``: the holds are disjoint and in
    order, so a row's time inside them is this at its end less this at its start."""
    lengths = np.array(held.ends, dtype="float64") - np.array(held.starts, dtype="float64")
    before = np.concatenate([[0.0], np.cumsum(lengths)])
    x = np.column_stack([held.starts, held.ends]).ravel().astype("float64")
    y = np.column_stack([before[:-1], before[1:]]).ravel()
    return np.interp(at.astype("float64"), x, y)


def _batcher(tasks: pd.DataFrame, labels: pd.DataFrame, held: HeldBatches) -> int | None:
    """The task stack of the service's function that waited on a timeout, a queue or a
    timer most often during the holds (the module doc); None where none did."""
    if tasks.empty:
        return None
    inside = _inside(held, tasks["ts_ns"].to_numpy(dtype="int64"))
    waiting = tasks[inside & tasks["wait_reason"].isin(_BATCHER_WAITS).to_numpy()]
    named = waiting.merge(labels[["stack_id", "user_function"]], on="stack_id")
    named = named[~named["user_function"].isin(NOT_THE_SERVICE)]
    if named.empty:
        return None
    top = named.groupby("user_function")["tasks"].sum().idxmax()
    mine = named[named["user_function"] == top]
    return int(mine.groupby("stack_id")["tasks"].sum().idxmax())


def _thread_waits(samples: pd.DataFrame) -> pd.Series:
    """Which rows are a thread of the service waiting on another thread or a timer, not a
    pool's or a loop's idle."""
    return samples["reason"].isin(_THREAD_WAITS) & (samples["idle_role"].fillna("") == "")


def _waits_in_holds(samples: pd.DataFrame, held: HeldBatches) -> pd.DataFrame:
    """The service's threads' waits on another thread or a timer (not a pool's or a
    loop's idle) ending inside the holds, each with the hold it ends in (``hold``)."""
    at = samples["ts_ns"].to_numpy(dtype="int64")
    rows = samples[_inside(held, at) & _thread_waits(samples).to_numpy()]
    rows = rows[~rows["user_function"].isin(NOT_THE_SERVICE)]
    hold = np.searchsorted(np.array(held.starts), rows["ts_ns"].to_numpy(), side="right") - 1
    return rows.assign(hold=hold)


def _batcher_thread(
    samples: pd.DataFrame, held: HeldBatches, s: BatchWindow
) -> tuple[int | None, set[str]]:
    """(the stack of the batcher thread's wait: the service's function waiting in the
    holds on one thread at a time, the most; the functions whose waits there are the
    batch's requests': ``min_batch`` threads or more at once, a thread a request); None
    and none where either is missing. A sync handler's request holds a thread while it
    waits for its answer, so a batch's requests wait on as many threads as it holds."""
    waits = _waits_in_holds(samples, held)
    if waits.empty:
        return None, set()
    per_hold = waits.groupby(["user_function", "hold"])["thread_id"].nunique()
    at_once = per_hold.groupby(level="user_function").median()
    lone = waits[waits["user_function"].isin(at_once.index[at_once == 1])]
    asking = set(at_once.index[at_once >= s.min_batch])
    if lone.empty or not asking:
        return None, set()
    top = lone.groupby("user_function")["wall_ns"].sum().idxmax()
    mine = lone[lone["user_function"] == top]
    return int(mine.groupby("stack_id")["wall_ns"].sum().idxmax()), asking


def _given(
    samples: pd.DataFrame,
    held: HeldBatches,
    tasks: pd.DataFrame,
    labels: pd.DataFrame,
    s: BatchWindow,
) -> tuple[int, pd.DataFrame, set[int], str] | None:
    """(the batcher's stack, the rows whose time inside the holds is its, the threads
    the service runs on once the holds are gone, and those in words); None where no
    batcher is seen.

    A batcher task: the event loop's idle time, the loop the service runs on. A batcher
    thread: its own timed wait and the requests' waits for their answers, and every
    thread of the service, sharing one interpreter."""
    stack = _batcher(tasks, labels, held)
    if stack is not None:
        idle = samples["idle_role"] == LOOP_ROLE
        given = samples[idle & samples["reason"].isin(BLOCKING_REASONS)]
        return stack, given, set(given["thread_id"]), _ON_THE_LOOP
    stack, asking = _batcher_thread(samples, held, s)
    if stack is None:
        return None
    ours = samples["user_function"].isin(asking) | (samples["stack_id"] == stack)
    return (
        stack,
        samples[_thread_waits(samples) & ours],
        set(samples["thread_id"]),
        _ON_EVERY_THREAD,
    )


def given_to_the_batcher(
    samples: pd.DataFrame,
    requests: pd.DataFrame,
    tasks: pd.DataFrame,
    labels: pd.DataFrame,
    s: BatchWindow = BATCH_WINDOW,
) -> tuple[pd.DataFrame, pd.DataFrame, HeldBatches | None]:
    """(``samples`` less the time inside the holds that is the batcher's (``_given``),
    the rows made for the batcher's stack from it: ``wall_ns``/``cpu_ns``/``wait_ns``
    their part, reason ``sleep``, the batches); the samples as given, no rows and None
    where the answers come in no held batches or no batcher is seen."""
    none = samples.iloc[:0][["thread_id", "stack_id", "wall_ns", "cpu_ns", "wait_ns", "ts_ns"]]
    held = held_batches(requests, s) if "idle_role" in samples else None
    found = _given(samples, held, tasks, labels, s) if held is not None else None
    if held is None or found is None:
        return samples, none.assign(reason=""), None
    stack, given, serving, named = found
    end = given["ts_ns"].to_numpy(dtype="int64")
    wall = given["wall_ns"].to_numpy(dtype="float64")
    inside = _held_ns(held, end) - _held_ns(held, end - wall.astype("int64"))
    part = pd.Series(np.clip(inside / np.maximum(wall, 1.0), 0.0, 1.0), index=given.index)
    part = part[part > 0]
    made = samples.loc[part.index, ["thread_id", "wall_ns", "cpu_ns", "wait_ns", "ts_ns"]]
    for column in ("wall_ns", "cpu_ns", "wait_ns"):
        made[column] = made[column].astype("float64") * part
    made = made.assign(stack_id=stack, reason="sleep")
    batches = replace(
        held,
        stage=str(labels.loc[labels["stack_id"] == stack, "user_function"].iloc[0]),
        loop_cpu_share=_serving_cpu_share(samples, held, serving),
        serving=named,
    )
    return kept_in_part(samples, 1.0 - part), made.reset_index(drop=True), batches


def _serving_cpu_share(samples: pd.DataFrame, held: HeldBatches, serving: set[int]) -> float | None:
    """The serving threads' CPU over the cycles: each sample's own CPU reading
    (``interval_cpu_ns`` where the attribution shared a thread's CPU out, else
    ``cpu_ns``) on those ending inside them."""
    cpu = "interval_cpu_ns" if "interval_cpu_ns" in samples else "cpu_ns"
    end = held.last_answer_ns
    begin = end - held.cycles_s * 1e9
    mine = samples[samples["thread_id"].isin(serving)]
    mine = mine[(mine["ts_ns"] > begin) & (mine["ts_ns"] <= end)]
    used = float(mine[cpu].sum())
    return used / (end - begin) if used > 0 and end > begin else None


def _inside(held: HeldBatches, at: np.ndarray) -> np.ndarray:
    """Which instants of ``at`` fall inside a hold."""
    k = np.searchsorted(np.array(held.starts), at, side="right") - 1
    return (k >= 0) & (at <= np.array(held.ends)[np.maximum(k, 0)])
