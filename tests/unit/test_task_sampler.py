"""The asyncio task sampler and the loop's idle time given to the tasks awaiting I/O: real
coroutines suspended on a real loop in a thread, and attributed rows built by hand."""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import pandas as pd
import pytest

from probe.analyzers.tasks import loop_lag, loop_lag_notes, with_task_waits
from probe.samplers.stacks import StackSampler
from probe.samplers.tasks import TaskSampler, await_chain, await_reason, awaited_socket


async def read_reply(reader: asyncio.StreamReader) -> bytes:
    return await reader.readline()  # the peer never answers: suspended in the stream


async def ask(port: int) -> bytes:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(b"hello\n")
    try:
        return await read_reply(reader)
    finally:
        writer.close()


async def nap() -> None:
    await asyncio.sleep(30)


async def parent(children: list[asyncio.Task[None]]) -> None:
    await asyncio.gather(*children)


@contextmanager
def loop_with_tasks() -> Iterator[tuple[asyncio.AbstractEventLoop, list[asyncio.Task]]]:
    """A loop in a thread with three asking tasks suspended in a socket read, two napping
    and one gathering the nappers."""
    server = socket.create_server(("127.0.0.1", 0))
    port = server.getsockname()[1]
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    made: list[asyncio.Task] = []

    async def start() -> None:
        naps = [asyncio.ensure_future(nap()) for _ in range(2)]
        made.extend(asyncio.ensure_future(ask(port)) for _ in range(3))
        made.extend([*naps, asyncio.ensure_future(parent(naps))])
        await asyncio.sleep(0.2)  # every task reaches its await

    asyncio.run_coroutine_threadsafe(start(), loop).result(timeout=10)
    try:
        yield loop, made
    finally:

        async def cancel() -> None:
            for task in made:
                task.cancel()
            await asyncio.gather(*made, return_exceptions=True)

        asyncio.run_coroutine_threadsafe(cancel(), loop).result(timeout=10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=10)
        loop.close()
        server.close()


def test_a_suspended_task_s_chain_names_its_coroutines_and_what_it_awaits():
    with loop_with_tasks() as (_, tasks):
        asking, napping, gathering = tasks[0], tasks[3], tasks[5]
        frames = await_chain(asking.get_coro())
        names = [f.f_code.co_name for f in frames]
        assert names[:2] == ["ask", "read_reply"] and "readline" in names
        assert await_reason(frames, asking._fut_waiter) == "network"
        frames = await_chain(napping.get_coro())
        assert await_reason(frames, napping._fut_waiter) == "sleep"
        frames = await_chain(gathering.get_coro())
        assert await_reason(frames, gathering._fut_waiter) == "tasks"


def test_the_sampler_counts_tasks_per_stack_and_reason_on_the_loop_s_thread():
    with loop_with_tasks() as (loop, _):
        stacks = StackSampler()
        stacks.sample()  # registers the loop's thread
        now = [1_000]
        sampler = TaskSampler(
            stack_of=stacks.await_stack_id,
            thread_of=stacks.thread_id_of,
            clock=lambda: now[0],
            timer=lambda: 0.0,  # ticks that cost nothing are never spaced out
        )
        sampler.sample()  # the first tick only starts the interval
        now[0] = 11_000
        sampler.sample()
        rows = sampler.drain()["task_samples"]
        tid = stacks.thread_id_of(loop._thread_id)  # type: ignore[attr-defined]
        by_reason: dict[str, float] = {}
        for ts, thread, _, reason, count, wall, main in rows:
            assert (ts, thread, wall, main) == (11_000, tid, 10_000, False)
            by_reason[reason] = by_reason.get(reason, 0.0) + count
        assert by_reason == {"network": 3.0, "sleep": 2.0, "tasks": 1.0}
        chains = [s for s in stacks.drain()["stacks"] if s[3] == "<await>"]
        assert len(chains) == 3  # one stack per chain shape


def test_the_task_asyncio_run_waits_for_is_marked_its_loop_s_main_task():
    # a job's own chain of awaits (asyncio.run's task) against the tasks beside it
    server = socket.create_server(("127.0.0.1", 0))
    stop = threading.Event()

    async def job() -> None:
        helpers = [asyncio.ensure_future(nap()) for _ in range(2)]
        await asyncio.sleep(0.1)
        while not stop.is_set():
            await asyncio.sleep(0.02)  # the main task: asleep in job
        for helper in helpers:
            helper.cancel()
        await asyncio.gather(*helpers, return_exceptions=True)

    thread = threading.Thread(target=asyncio.run, args=(job(),), daemon=True)
    try:
        stacks = StackSampler()
        thread.start()
        time.sleep(0.3)
        stacks.sample()
        now = [1_000]
        sampler = TaskSampler(
            stack_of=stacks.await_stack_id,
            thread_of=stacks.thread_id_of,
            clock=lambda: now[0],
            timer=lambda: 0.0,
        )
        sampler.sample()
        now[0] = 11_000
        sampler.sample()
        rows = sampler.drain()["task_samples"]
    finally:
        stop.set()
        thread.join(timeout=10)
        server.close()
    by_main = {main: count for *_, count, _, main in rows}
    assert by_main == {True: 1.0, False: 2.0}, rows


def test_a_tick_walks_at_most_max_tasks_chains_and_scales_the_counts():
    with loop_with_tasks() as _:
        stacks = StackSampler()
        stacks.sample()
        sampler = TaskSampler(
            stack_of=stacks.await_stack_id,
            thread_of=stacks.thread_id_of,
            max_tasks=2,
            timer=lambda: 0.0,
        )
        totals = []
        for _ in range(4):
            sampler.sample()
            totals.append(sum(r[4] for r in sampler.drain()["task_samples"]))
        assert totals[1:] == [6.0, 6.0, 6.0]  # 2 walked of 6, each row counts 3


def test_a_tick_that_cannot_walk_every_moved_task_starts_anywhere_not_at_the_first():
    # six of a server's own tasks, listed first, and two request handlers, all of them
    # waking between ticks (hypercorn's timers before its handlers): a walk of two from
    # the registry's first saw no handler at all, and the async route got no time
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    wakes = [0] * 8

    async def tick_along(i: int) -> None:
        while True:
            wakes[i] += 1
            await asyncio.sleep(0.001)

    async def poll(i: int) -> None:
        await tick_along(i)

    async def handle(i: int) -> None:
        await tick_along(i)

    async def start() -> list[asyncio.Task]:
        return [asyncio.ensure_future((poll if i < 6 else handle)(i)) for i in range(8)]

    tasks: list[asyncio.Task] = []
    try:
        tasks += asyncio.run_coroutine_threadsafe(start(), loop).result(timeout=10)
        stacks = StackSampler()
        stacks.sample()  # registers the loop's thread
        offsets = iter(range(9))
        sampler = TaskSampler(
            stack_of=lambda chain: 1 if any(f.f_code.co_name == "handle" for f in chain) else 2,
            thread_of=stacks.thread_id_of,
            pending=lambda: list(tasks),  # the registry's order: the server's own first
            max_tasks=2,
            timer=lambda: 0.0,
            start_at=lambda n: next(offsets) % n,
        )
        counts = {1: 0.0, 2: 0.0}
        for _ in range(9):
            seen = list(wakes)
            deadline = time.monotonic() + 10
            while (
                any(w <= s for w, s in zip(wakes, seen, strict=True))
                and time.monotonic() < deadline
            ):
                time.sleep(0.001)  # every task has moved since the last tick
            sampler.sample()
            for _, _, sid, _, n, _, _ in sampler.drain()["task_samples"]:
                counts[sid] += n
    finally:
        for task in tasks:
            loop.call_soon_threadsafe(task.cancel)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=10)
        loop.close()
    # the first tick only starts the interval; the eight after it start at offsets 0-7
    # of 8, so each task is walked twice and the handlers are 2 of 8 tasks
    assert counts[1] / (counts[1] + counts[2]) == pytest.approx(2 / 8)


def test_every_call_reads_the_callbacks_queued_behind_a_coroutine_holding_its_loop():
    with loop_with_tasks() as (loop, _):
        stacks = StackSampler()
        stacks.sample()
        sampler = TaskSampler(
            stack_of=stacks.await_stack_id, thread_of=stacks.thread_id_of, timer=lambda: 0.0
        )
        sampler.sample()  # the first tick starts the interval
        sampler.sample()  # the second meets the loop: read from the next call on
        sampler.drain()
        sampler.sample()
        tid = stacks.thread_id_of(loop._thread_id)  # type: ignore[attr-defined]
        at_rest = sampler.drain()["loop_samples"]
        assert [(r[1], r[2], r[3]) for r in at_rest] == [(tid, 0, False)]
        holding = threading.Event()

        async def hog() -> None:
            holding.set()
            time.sleep(0.5)  # blocks the loop, as CPU work in a coroutine does

        asyncio.run_coroutine_threadsafe(hog(), loop)
        assert holding.wait(5)
        for _ in range(3):
            loop.call_soon_threadsafe(lambda: None)
        sampler.sample()
        ((_, thread, ready, running),) = sampler.drain()["loop_samples"]
        assert thread == tid and ready >= 3 and running


def test_a_loop_that_takes_no_weak_reference_is_left_unread_not_an_error():
    class SlottedLoop:  # as a compiled loop may be: no __weakref__
        __slots__ = ()

    sampler = TaskSampler(stack_of=lambda frames: 1, thread_of=lambda ident: 1)
    sampler._meet(SlottedLoop(), 7)
    sampler.sample()
    assert sampler.drain()["loop_samples"] == []


def test_costly_ticks_are_spaced_to_stay_under_one_percent_of_the_time():
    with loop_with_tasks() as _:
        stacks = StackSampler()
        stacks.sample()
        now, spent = [0], iter([0.0, 0.002] * 100)  # each tick costs 2 ms
        sampler = TaskSampler(
            stack_of=stacks.await_stack_id,
            thread_of=stacks.thread_id_of,
            clock=lambda: now[0],
            timer=lambda: next(spent),
        )
        ticked, walls = [], set()
        for k in range(100):  # 1 s at 100 Hz
            now[0] = k * 10_000_000
            sampler.sample()
            rows = sampler.drain()["task_samples"]
            ticked += [now[0]] * bool(rows)
            walls.update(r[5] for r in rows)
        # one tick every 200 ms (2 ms at 1%); the first only starts the interval
        assert ticked == [200_000_000, 400_000_000, 600_000_000, 800_000_000]
        assert walls == {200_000_000}  # each row's interval: since the tick before


def attributed(rows: list[tuple]) -> pd.DataFrame:
    columns = ["thread_id", "stack_id", "wall_ns", "cpu_ns", "wait_ns", "reason", "ts_ns"]
    frame = pd.DataFrame([r[:7] for r in rows], columns=columns)
    return frame.assign(idle_role=[r[7] for r in rows])


def task_rows(rows: list[tuple]) -> pd.DataFrame:
    columns = ["ts_ns", "thread_id", "stack_id", "wait_reason", "tasks", "wall_ns"]
    return pd.DataFrame(rows, columns=columns)


def test_an_idle_loop_interval_is_shared_among_the_tasks_awaiting_io_at_its_end():
    samples = attributed(
        [
            (7, 1, 100, 100, 0, "", 100, ""),  # the loop running a coroutine
            (7, 2, 300, 0, 300, "network", 400, "event loop"),  # idle in select 100..400
            (7, 2, 300, 0, 300, "network", 700, "event loop"),  # 400..700: nothing on I/O
            (7, 2, 10, 0, 10, "network", 710, "event loop"),  # between two task ticks
            (8, 5, 400, 0, 400, "lock", 400, "thread-pool worker"),
        ]
    )
    tasks = task_rows(
        [
            (400, 7, 10, "network", 3.0, 300),
            (400, 7, 11, "sleep", 1.0, 300),
            (400, 7, 12, "tasks", 1.0, 300),  # waits on the others: not the work
            (700, 7, 12, "tasks", 5.0, 300),
            (900, 7, 10, "network", 2.0, 200),  # a sparser tick: its interval holds 710
        ]
    )
    kept, made = with_task_waits(samples, tasks)
    first = made[made["ts_ns"] == 400].set_index("stack_id")
    assert first.loc[10, "wait_ns"] == pytest.approx(300 * 3 / 4)
    assert first.loc[11, "wait_ns"] == pytest.approx(300 * 1 / 4)
    assert (first.loc[10, "reason"], first.loc[11, "reason"]) == ("network", "sleep")
    (late,) = made[made["ts_ns"] == 710].itertuples()
    assert (late.stack_id, late.wait_ns, late.reason) == (10, 10, "network")
    assert (made["thread_id"] == 7).all() and 12 not in set(made["stack_id"])
    still_idle = kept[kept["idle_role"] == "event loop"]
    assert list(still_idle["ts_ns"]) == [700]  # nothing awaited I/O then: idle capacity
    # the loop's time, shared
    total = kept["wait_ns"].sum() + made["wait_ns"].sum()
    assert total == pytest.approx(samples["wait_ns"].sum())


def test_an_idle_loop_interval_is_the_main_task_s_when_it_awaits_io_itself():
    # consume_feed: asyncio.run's task reads a paced feed (stack 10) while eight
    # consumers (stack 11) wait on their upstream: the job ends when the feed does
    samples = attributed([(7, 2, 300, 0, 300, "network", 400, "event loop")] * 1)
    main = task_rows(
        [
            (400, 7, 10, "network", 1.0, 300),
            (400, 7, 11, "network", 3.0, 300),
        ]
    ).assign(main_task=[True, False])
    _, made = with_task_waits(samples, main)
    assert list(made["stack_id"]) == [10] and made["wait_ns"].sum() == pytest.approx(300)
    # waiting on the others (a gather), the main task's time is theirs, shared
    gathering = main.assign(wait_reason=["tasks", "network"])
    _, made = with_task_waits(samples, gathering)
    assert list(made["stack_id"]) == [11]
    # a server's own main loop (no frame of the service's) does not take the time
    _, made = with_task_waits(samples, main, library_stacks=[10])
    assert made.set_index("stack_id")["wait_ns"].to_dict() == pytest.approx({10: 75, 11: 225})


def test_an_idle_interval_longer_than_a_task_tick_is_each_tick_s_in_part():
    # consume_feed in a CI run: the stack sampler, held back, read the loop once in 386
    # ms; the feed's reader (main task, stack 10) held each task tick of it but the last,
    # where the job had moved on to waiting for its consumers (stack 11)
    samples = attributed([(7, 2, 400, 0, 400, "network", 500, "event loop")])  # 100..500
    tasks = task_rows(
        [
            (200, 7, 10, "network", 1.0, 100),  # 100..200
            (300, 7, 10, "network", 1.0, 100),
            (400, 7, 10, "network", 1.0, 100),
            (500, 7, 12, "tasks", 1.0, 100),  # 400..500: the main task awaits the others
            (500, 7, 11, "network", 8.0, 100),
        ]
    ).assign(main_task=[True, True, True, True, False])
    kept, made = with_task_waits(samples, tasks)
    by_stack = made.groupby("stack_id")["wait_ns"].sum()
    assert by_stack.to_dict() == pytest.approx({10: 300, 11: 100})
    assert kept.empty
    # a piece no tick with I/O holds (300..400 here) stays the loop's idle time
    gap = tasks[tasks["ts_ns"] != 400]
    kept, made = with_task_waits(samples, gap)
    assert made.groupby("stack_id")["wait_ns"].sum().to_dict() == pytest.approx({10: 200, 11: 100})
    assert kept["wait_ns"].sum() == pytest.approx(100)


def test_a_library_task_asleep_is_a_timer_and_the_service_s_sleep_is_its_work():
    # uvicorn's main loop wakes every 0.1 s (stack 20, no frame of the service's); a
    # handler's rate-limiting sleep (stack 11) is the request's own wait
    samples = attributed([(7, 2, 300, 0, 300, "network", 400, "event loop")])
    timer_only = task_rows([(400, 7, 20, "sleep", 1.0, 300)])
    kept, made = with_task_waits(samples, timer_only, library_stacks=[20])
    assert kept is samples and made.empty  # the loop's time stays idle capacity
    both = task_rows([(400, 7, 20, "sleep", 1.0, 300), (400, 7, 11, "sleep", 1.0, 300)])
    _, made = with_task_waits(samples, both, library_stacks=[20])
    assert list(made["stack_id"]) == [11] and made["wait_ns"].sum() == pytest.approx(300)


def test_a_loop_whose_tasks_wait_only_on_each_other_stays_idle():
    samples = attributed([(7, 2, 300, 0, 300, "network", 400, "event loop")])
    tasks = task_rows([(300, 7, 12, "tasks", 5.0, 100), (350, 7, 13, "thread", 1.0, 50)])
    kept, made = with_task_waits(samples, tasks)
    assert kept is samples and made.empty


def loop_readings(tid: int, ready: list[int]) -> pd.DataFrame:
    return pd.DataFrame(
        {"ts_ns": range(len(ready)), "thread_id": tid, "ready": ready, "running": True}
    )


def loop_thread_samples(tid: int, cpu_ms: dict[str, float], gil_ms: float) -> pd.DataFrame:
    rows = [(tid, f, ms * 1e6, 0.0, "cpu") for f, ms in cpu_ms.items()]
    rows.append((tid, "<library>", 0.0, gil_ms * 1e6, "gil"))
    columns = ["thread_id", "user_function", "cpu_ns", "wait_ns", "reason"]
    return pd.DataFrame(rows, columns=columns)


def test_a_coroutine_on_a_cpu_with_callbacks_queued_behind_it_is_loop_lag_in_it():
    # rank_async: its loop had callbacks ready at 80% of 265 readings, on a CPU 63% of
    # its time in rank_query
    loops = loop_lag(
        loop_readings(7, [0, 12, 30, 15, 0, 20, 9, 11, 0, 25]),
        loop_thread_samples(7, {"rank_query (app.py)": 630, "<library>": 60}, gil_ms=6),
    )
    r = loops.loc[7]
    assert (r.readings, r.lagged_share, r.busiest) == (10, 0.7, "rank_query (app.py)")
    assert r.ready_mean == pytest.approx(122 / 7)
    (note,) = loop_lag_notes(loops)
    assert "loop lag" in note and "mostly in rank_query (app.py)" in note
    assert "run_in_executor" in note


def test_a_loop_held_up_by_the_gil_is_not_told_its_coroutines_hog_it():
    # predict_api: the loop's own work is the server's HTTP handling (library code) and
    # it waits for the GIL the handlers' threads hold
    loops = loop_lag(
        loop_readings(3, [5, 6, 0, 4, 7, 5, 6, 8, 3, 2]),
        loop_thread_samples(3, {"<library>": 390}, gil_ms=170),
    )
    (note,) = loop_lag_notes(loops)
    assert "waited for the GIL" in note and "run_in_executor" not in note


def test_a_loop_mostly_asleep_in_its_selector_has_no_loop_lag():
    # enrich_async: a gather's burst of ready tasks at the start, then idle (4-8%)
    loops = loop_lag(
        loop_readings(3, [300, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2, 0]),
        loop_thread_samples(3, {"lookup (app.py)": 70}, gil_ms=0),
    )
    assert loops.loc[3].lagged_share == pytest.approx(2 / 12)
    assert loop_lag_notes(loops) == []


def test_a_loop_blocked_in_a_call_inside_a_coroutine_is_told_to_move_the_call_off_it():
    # lookup_api: an async route calls a blocking HTTP client; the loop thread asleep in
    # the socket's read 86% of /proc's readings, callbacks ready behind it at 66%
    samples = pd.DataFrame(
        [
            (5, "FeatureStore.fetch (app.py)", 0.0, 600e6, "network", "", False),
            (5, "score (app.py)", 40e6, 0.0, "cpu", "", False),
            (5, "<library>", 0.0, 300e6, "network", "event loop", False),  # its selector
            (5, "lookup (app.py)", 0.0, 500e6, "network", "", True),  # a task's await
        ],
        columns=[
            *("thread_id", "user_function", "cpu_ns", "wait_ns"),
            *("reason", "idle_role", "awaited"),
        ],
    )  # fmt: skip
    loops = loop_lag(loop_readings(5, [7, 8, 0, 7, 6, 8, 7, 0, 7, 8]), samples)
    r = loops.loc[5]
    assert r.blocked_share == pytest.approx(600 / 1440)
    assert (r.blocked_in, r.blocked_on) == ("FeatureStore.fetch (app.py)", "network")
    (note,) = loop_lag_notes(loops)
    assert "blocked in a call 42% of its time, mostly in FeatureStore.fetch (app.py)" in note
    assert "asyncio.to_thread" in note and "CPU work" not in note


def test_the_sampler_reads_the_kernel_s_counts_on_each_connection_a_task_awaits():
    # a feed pushing a line every 10 ms, read by one task; a server answering each
    # question, asked by another task in turn: the stream sends nothing, the calls do
    feed = socket.create_server(("127.0.0.1", 0))
    answers = socket.create_server(("127.0.0.1", 0))
    feed_port = feed.getsockname()[1]
    stop = threading.Event()

    def push() -> None:
        conn, _ = feed.accept()
        while not stop.is_set():
            conn.sendall(b"item\n")
            time.sleep(0.01)
        conn.close()

    def answer() -> None:
        conn, _ = answers.accept()
        reader = conn.makefile("rb")
        while not stop.is_set() and reader.readline():
            time.sleep(0.01)
            conn.sendall(b"answer\n")
        conn.close()

    async def read_feed() -> None:
        reader, writer = await asyncio.open_connection("127.0.0.1", feed_port)
        while not stop.is_set() and await reader.readline():
            pass
        writer.close()
        await writer.wait_closed()

    async def ask_in_turn() -> None:
        reader, writer = await asyncio.open_connection("127.0.0.1", answers.getsockname()[1])
        while not stop.is_set():
            writer.write(b"question\n")
            if not await reader.readline():
                break
        writer.close()
        await writer.wait_closed()

    async def job() -> None:
        await asyncio.gather(read_feed(), ask_in_turn())

    servers = [threading.Thread(target=f, daemon=True) for f in (push, answer)]
    for server in servers:
        server.start()
    thread = threading.Thread(target=asyncio.run, args=(job(),), daemon=True)
    thread.start()
    try:
        time.sleep(0.3)
        stacks = StackSampler()
        stacks.sample()
        sampler = TaskSampler(
            stack_of=stacks.await_stack_id, thread_of=stacks.thread_id_of, timer=lambda: 0.0
        )
        for _ in range(6):
            sampler.sample()
            time.sleep(0.05)
        rows = sampler.drain()["awaited_sockets"]
    finally:
        stop.set()
        thread.join(timeout=10)
        for server in servers:
            server.join(timeout=10)
        feed.close()
        answers.close()
    by_connection: dict[str, list[tuple]] = {}
    for row in rows:
        by_connection.setdefault(row[3], []).append(row)
    assert len(by_connection) == 2, rows
    moved = {}
    for key, seen in by_connection.items():
        assert len(seen) >= 4, seen
        first, last = seen[0], seen[-1]
        moved[key] = (last[4] - first[4], last[5] - first[5], last[7] - first[7])
    feed_key = next(k for k in moved if k.endswith(f":{feed_port}"))
    out, into, bytes_in = moved.pop(feed_key)
    assert out == 0 and into > 3 and bytes_in >= 5 * into, (out, into, bytes_in)
    ((out, into, _),) = moved.values()
    assert out > 3 and into > 3  # a question before each answer


def test_a_read_on_an_anyio_socket_is_the_network_s_wait_not_its_event_s():
    # httpx and httpcore read through anyio, whose socket stream awaits an asyncio.Event
    # the transport's protocol sets: the innermost frame is asyncio's locks.py ("tasks"),
    # and an httpx request in flight read as waiting on other tasks
    anyio = pytest.importorskip("anyio")

    async def check() -> tuple[str, str, object]:
        accepted: list[asyncio.StreamWriter] = []
        server = await asyncio.start_server(lambda r, w: accepted.append(w), "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        stream = await anyio.connect_tcp("127.0.0.1", port)
        event = anyio.Event()
        reading = asyncio.ensure_future(stream.receive())
        waiting = asyncio.ensure_future(event.wait())
        await asyncio.sleep(0.05)
        frames = await_chain(reading.get_coro())
        found = awaited_socket(frames)
        reasons = (
            await_reason(frames, reading._fut_waiter),
            await_reason(await_chain(waiting.get_coro()), waiting._fut_waiter),
        )
        for task in (reading, waiting):
            task.cancel()
        await asyncio.gather(reading, waiting, return_exceptions=True)
        await stream.aclose()
        for writer in accepted:
            writer.close()
            await writer.wait_closed()
        server.close()
        await server.wait_closed()
        return *reasons, found and found[0].endswith(f":{port}")

    assert asyncio.run(check()) == ("network", "tasks", True)
