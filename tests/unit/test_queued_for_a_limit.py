"""Requests in line for a pool's or a semaphore's permits -- ``tasks.queued_for_a_limit``,
``breakdown.threads_in_line``, ``roles.waits_for_a_limit``, ``rules``'
``queued_for_a_limit``, ``recommendations``' raised limit, the capacity's permits
station -- on fake task samples, thread samples and stage rows."""

from __future__ import annotations

import pandas as pd
import pytest

from probe.analyzers.breakdown import threads_in_line
from probe.analyzers.capacity import Demands, capacity
from probe.analyzers.diagnosis import _what_it_waits_on
from probe.analyzers.roles import waits_for_a_limit
from probe.analyzers.rules import THRESHOLDS, Finding, RunFacts, _stage_kind
from probe.analyzers.tasks import queued_for_a_limit

ASYNCIO = "/usr/lib/python3.11/asyncio/"
ASGI = "run_asgi (h11_impl.py)"
LOOKUP = "ConnectionPool.lookup (app.py)"
PREDICT = "predict (app.py)"
CALL = "call_model (app.py)"
CONSUME = "consume (feed.py)"
ENRICH = "enrich (job.py)"
# stack id -> (leaf function, leaf file, the service's function, its frames outermost first)
STACKS = {
    1: ("StreamReader._wait_for_data", ASYNCIO + "streams.py", LOOKUP, (ASGI, PREDICT, LOOKUP)),
    2: ("Queue.get", ASYNCIO + "queues.py", LOOKUP, (ASGI, PREDICT, LOOKUP)),
    3: ("Semaphore.acquire", ASYNCIO + "locks.py", LOOKUP, (ASGI, PREDICT, LOOKUP)),
    4: ("StreamReader._wait_for_data", ASYNCIO + "streams.py", CONSUME, (CONSUME,)),
    5: ("Queue.get", ASYNCIO + "queues.py", CONSUME, (CONSUME,)),  # a worker's next item
    6: ("Event.wait", ASYNCIO + "locks.py", LOOKUP, (ASGI, PREDICT, LOOKUP)),
    # `async with limit:` in the route, the call in a function it calls
    7: ("Semaphore.acquire", ASYNCIO + "locks.py", PREDICT, (ASGI, PREDICT)),
    8: ("StreamReader._wait_for_data", ASYNCIO + "streams.py", CALL, (ASGI, PREDICT, CALL)),
    # a batch job's coroutines gathered behind a semaphore, waiting to start
    9: ("Semaphore.acquire", ASYNCIO + "locks.py", ENRICH, (ENRICH,)),
    10: ("StreamReader._wait_for_data", ASYNCIO + "streams.py", ENRICH, (ENRICH,)),
}


def labels() -> pd.DataFrame:
    """``label_stacks``' rows for STACKS: the leaf's limit read as it reads it."""
    rows = [
        (sid, fn, path, user, waits_for_a_limit([(fn, path)]))
        for sid, (fn, path, user, _) in STACKS.items()
    ]
    columns = ["stack_id", "function", "filename", "user_function", "limit"]
    return pd.DataFrame(rows, columns=columns)


def stacks_and_frames() -> tuple[pd.DataFrame, pd.DataFrame]:
    """The run's stacks and frames tables holding STACKS' chains."""
    names = sorted({name for *_, chain in STACKS.values() for name in chain})
    ids = {name: i for i, name in enumerate(names)}
    frames = pd.DataFrame(
        [(i, name.split(" (")[0], "/srv/" + name.split(" (")[1][:-1]) for name, i in ids.items()],
        columns=["frame_id", "function", "filename"],
    )
    stacks = pd.DataFrame(
        [(sid, ";".join(str(ids[n]) for n in chain)) for sid, (*_, chain) in STACKS.items()],
        columns=["stack_id", "frame_ids"],
    )
    return stacks, frames


def in_line(tasks: pd.DataFrame) -> pd.DataFrame:
    return queued_for_a_limit(tasks, labels(), *stacks_and_frames())


def ticks(rows: list[tuple[int, int, str, float]]) -> pd.DataFrame:
    """(tick, stack, reason, tasks) rows, 10 ms ticks of one loop thread."""
    frame = pd.DataFrame(rows, columns=["ts_ns", "stack_id", "wait_reason", "tasks"])
    return frame.assign(thread_id=7, wall_ns=10_000_000)


def test_requests_waiting_on_a_pool_s_queue_mid_request_queue_behind_those_in_the_call():
    tasks = ticks(
        [
            (1, 1, "network", 2.0), (1, 2, "tasks", 6.0),
            (2, 1, "network", 2.0), (2, 2, "tasks", 5.0),
            (3, 2, "tasks", 8.0),  # nobody in the call: no line behind it
        ]
    )  # fmt: skip
    found = in_line(tasks)
    row = found.loc[LOOKUP]
    assert row["in_line"] == pytest.approx(11 / 4)  # in line per task in the call
    assert row["in_the_call"] == pytest.approx(2.0)
    assert row["queued_in"] == "asyncio.Queue"


def test_a_semaphore_s_waiters_are_in_line_and_an_event_s_are_not():
    tasks = ticks([(1, 1, "network", 2.0), (1, 3, "tasks", 4.0), (1, 6, "tasks", 9.0)])
    row = in_line(tasks).loc[LOOKUP]
    assert (row["in_line"], row["queued_in"]) == (2.0, "asyncio.Semaphore")


def test_worker_tasks_waiting_for_their_next_item_are_idle_not_in_line():
    # eight consumers looping on `await queue.get()`, some fetching: a starved
    # consumer waits for its producer, not for a permit another consumer holds
    tasks = ticks([(1, 4, "network", 2.0), (1, 5, "tasks", 6.0), (2, 5, "tasks", 8.0)])
    assert in_line(tasks).empty


def test_requests_in_line_in_the_route_queue_behind_the_call_the_route_makes():
    tasks = ticks([(1, 8, "network", 2.0), (1, 7, "tasks", 6.0)])
    row = in_line(tasks).loc[CALL]
    assert (row["in_line"], row["queued_in"]) == (3.0, "asyncio.Semaphore")


def test_a_batch_job_s_coroutines_waiting_to_start_behind_its_semaphore_are_not_in_line():
    # the job's chosen pace: its I/O is read as the job's own finding
    tasks = ticks([(1, 10, "network", 8.0), (1, 9, "tasks", 290.0)])
    assert in_line(tasks).empty


def stage(top_wait: str, *, cpu: float, queued: float) -> pd.Series:
    waits = {f"wait_{r}": 0.0 for r in ("network", "disk", "sleep", "lock", "subprocess")}
    waits |= {"wait_gil": 0.0, "wait_gpu_sync": 0.0, "wait_unknown": 0.0}
    waits[f"wait_{top_wait}"] = 1.0 - cpu
    return pd.Series(
        {
            **waits,
            "cpu_share": cpu,
            "python_share": 1.0,
            "native_share": 0.0,
            "tensor_share": 0.0,
            "queued": 0.0,
            "in_line": queued,
            "in_the_call": 2.0,
            "queued_in": "asyncio.Queue",
        }
    )


FACTS = RunFacts(cpu_count=2, process_cores=0.1)


def test_a_stage_waiting_on_the_network_with_requests_in_line_is_contention_for_the_limit():
    kind, subkind, rule, evidence = _stage_kind(
        stage("network", cpu=0.03, queued=3.0), FACTS, THRESHOLDS
    )
    assert (kind, subkind, rule) == ("contention", "lock", "queued_for_a_limit")
    assert evidence["in_line_per_call"] == 3.0 and evidence["in_the_call"] == 2.0
    # fewer than one in line per task in the call: the limit is not what holds them
    kind, *_ = _stage_kind(stage("network", cpu=0.03, queued=0.5), FACTS, THRESHOLDS)
    assert kind == "io"


def test_a_stage_on_a_cpu_is_not_held_back_by_the_permits_it_hands_out():
    # rank_async: a semaphore admits 16 of 480 queries to a loop busy ranking them
    kind, subkind, *_ = _stage_kind(stage("network", cpu=0.9, queued=11.6), FACTS, THRESHOLDS)
    assert (kind, subkind) == ("cpu", "python")


def test_a_pool_s_permits_bound_the_capacity_by_the_time_each_request_holds_one():
    # 2 permits, each request holding one 25 ms: at most 80 a second, whatever the GIL
    latencies = [0.1] * 400
    cap = capacity(
        requests=400,
        window_s=5.0,
        latencies_s=latencies,  # type: ignore[arg-type]
        demands=Demands(
            cpu_s=0.001,
            gil_s=0.0009,
            free_cores=2.0,
            processes=1,
            slots=None,
            limit=("asyncio.Queue", 2, 0.025),
        ),  # fmt: skip
    )
    assert cap is not None
    assert cap.bound_by == "asyncio.Queue permits"
    assert cap.ceiling_per_s == pytest.approx(80.0)


def test_a_thread_waiting_in_a_library_s_pool_queue_or_a_semaphore_waits_for_a_limit():
    urllib3 = [
        ("fetch (app.py)", "/srv/app.py"),
        ("HTTPConnectionPool._get_conn", "/venv/site-packages/urllib3/connectionpool.py"),
        ("Queue.get", "/usr/lib/python3.11/queue.py"),
        ("Condition.wait", "/usr/lib/python3.11/threading.py"),
    ]
    assert waits_for_a_limit(urllib3) == "queue.Queue"
    semaphore = [
        ("score", "/srv/app.py"),
        ("Semaphore.acquire", "/usr/lib/python3.11/threading.py"),
    ]
    assert waits_for_a_limit(semaphore) == "threading.Semaphore"
    # a future's result, an event: waits for another thread's work, not for a permit
    future = [
        ("score", "/srv/app.py"),
        ("Future.result", "/usr/lib/python3.11/concurrent/futures/_base.py"),
    ]
    assert waits_for_a_limit(future) == ""


def thread_samples(rows: list[tuple[str, str, str, int]]) -> pd.DataFrame:
    """(function, reason, limit, ms waited) rows, one a 10 ms tick, in order."""
    frame = pd.DataFrame(rows, columns=["user_function", "reason", "limit", "wait_ms"])
    return frame.assign(
        wait_ns=frame["wait_ms"] * 1_000_000, ts_ns=[i * 10_000_000 for i in range(len(rows))]
    )


def test_threads_in_line_at_a_pool_are_counted_against_those_in_its_calls():
    samples = thread_samples(
        [(LOOKUP, "lock", "queue.Queue", 30), (LOOKUP, "network", "", 10)] * 50
        # a batcher's callers wait in a queue for its answer: no I/O of their own
        + [(PREDICT, "lock", "queue.Queue", 40)] * 20
    )
    table = threads_in_line(samples)
    assert list(table.index) == [LOOKUP]
    assert table.loc[LOOKUP, "in_line"] == pytest.approx(3.0)
    assert table.loc[LOOKUP, "queued_in"] == "queue.Queue"


def test_the_verdict_names_the_limit_its_requests_are_in_line_for():
    in_line = Finding(
        "contention", "lock", LOOKUP, 0.9, 1.0, "queued_for_a_limit", {"queued_in": "queue.Queue"}
    )
    assert _what_it_waits_on(in_line) == "in line for the permits its queue.Queue lends"
    mutex = Finding("contention", "lock", LOOKUP, 0.9, 1.0, "wait_lock", {})
    assert _what_it_waits_on(mutex) == "waiting on locks"
