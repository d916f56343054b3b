"""Idle capacity told apart from the work (``analyzers.roles``): on stacks taken from real
threads of this process, and on written-out stacks for the cases they cannot show."""

from __future__ import annotations

import socketserver
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pandas as pd
import pytest

from probe.analyzers.breakdown import _idle_capacity, idle_notes
from probe.analyzers.roles import idle_role
from probe.samplers.waits import callee_at


def stack_of(thread: threading.Thread) -> tuple[list[tuple[str, str]], str]:
    """(frames root first as (qualname, filename), the leaf's C call) as the sampler sees."""
    frame = sys._current_frames()[thread.ident]
    leaf_call = callee_at(frame.f_code, frame.f_lasti)
    frames = []
    while frame is not None:
        frames.append((frame.f_code.co_qualname, frame.f_code.co_filename))
        frame = frame.f_back
    return frames[::-1], leaf_call


def settle(predicate, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate() and time.monotonic() < deadline:
        time.sleep(0.01)


def test_a_pool_worker_waiting_for_a_task_is_idle_and_one_waiting_in_a_task_is_not():
    gate = threading.Event()
    with ThreadPoolExecutor(max_workers=2, thread_name_prefix="roles") as pool:
        pool.submit(gate.wait)  # worker 1 runs a task that waits on an event
        pool.submit(gate.wait)
        settle(lambda: len(pool._threads) == 2)
        time.sleep(0.05)
        assert {idle_role(*stack_of(t)) for t in pool._threads} == {""}
        gate.set()
        time.sleep(0.1)  # both back in their queue's get
        assert {idle_role(*stack_of(t)) for t in pool._threads} == {"thread-pool worker"}


def test_a_server_loop_in_select_is_idle():
    server = socketserver.TCPServer(("127.0.0.1", 0), socketserver.BaseRequestHandler)
    thread = threading.Thread(target=server.serve_forever, args=(0.5,), daemon=True)
    thread.start()
    try:
        time.sleep(0.1)
        assert idle_role(*stack_of(thread)) == "server loop"
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.parametrize(
    ("frames", "leaf_call", "role"),
    [
        # anyio's worker (FastAPI's sync routes) in queue.Queue.get -> Condition.wait
        ([("WorkerThread.run", "/x/site-packages/anyio/_backends/_asyncio.py"),
          ("Queue.get", "/usr/lib/python3.11/queue.py"),
          ("Condition.wait", "/usr/lib/python3.11/threading.py")], "waiter.acquire",
         "thread-pool worker"),
        # the same worker inside a route that waits on a lock: work, not idle
        ([("WorkerThread.run", "/x/site-packages/anyio/_backends/_asyncio.py"),
          ("predict", "/srv/app.py")], "lock.acquire", ""),
        # a multiprocessing pool's helper thread: its tasks run in other processes
        ([("Pool._handle_results", "/usr/lib/python3.11/multiprocessing/pool.py"),
          ("Connection.recv", "/usr/lib/python3.11/multiprocessing/connection.py")],
         "_recv", "process-pool helper"),
        # the service's own function of the same name is not the loop
        ([("_worker", "/srv/concurrent_jobs.py")], "q.get", ""),
        # a server loop handling a request (not in select) is work
        ([("BaseServer.serve_forever", "/usr/lib/python3.11/socketserver.py"),
          ("BaseServer._handle_request_noblock", "/usr/lib/python3.11/socketserver.py")],
         "", ""),
    ],
)  # fmt: skip
def test_written_out_stacks(frames, leaf_call, role):
    assert idle_role(frames, leaf_call) == role


def test_only_blocked_samples_of_an_idle_stack_leave_the_work():
    samples = pd.DataFrame(
        {
            "thread_id": [1, 1, 2, 2],
            "cpu_ns": [0.0, 5e6, 9e6, 0.0],
            "wait_ns": [90e6, 5e6, 1e6, 10e6],
            "reason": ["lock", "gil", "", "lock"],
            "idle_role": ["thread-pool worker", "thread-pool worker", "", ""],
        }
    )
    work, idle = _idle_capacity(samples)
    assert list(work.index) == [1, 2, 3]  # the running row of the idle stack stays
    assert idle.loc["thread-pool worker", "threads"] == 1
    assert idle.loc["thread-pool worker", "idle_share"] == pytest.approx(0.9)
    (line,) = idle_notes(idle)
    assert line.startswith("1 thread-pool worker idle 90% of its sampled time")


def test_an_event_loop_waiting_in_its_selector_is_idle_and_one_running_a_callback_is_not():
    import asyncio.base_events
    import selectors

    loop = ("BaseEventLoop._run_once", asyncio.base_events.__file__)
    waiting = [("BaseEventLoop.run_forever", asyncio.base_events.__file__), loop,
               ("EpollSelector.select", selectors.__file__)]  # fmt: skip
    running = [*waiting[:2], ("Handle._run", "/usr/lib/python3.11/asyncio/events.py")]
    assert idle_role(waiting, "_selector.poll") == "event loop"
    assert idle_role(running, "_sock.send") == ""
