"""Idle capacity told apart from the work (``analyzers.roles``): on stacks taken from real
threads of this process, and on written-out stacks for the cases they cannot show."""

from __future__ import annotations

import queue
import socketserver
import sys
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor

import pandas as pd
import pytest

from probe.analyzers.breakdown import _charged_to_their_tasks, _idle_capacity, idle_notes
from probe.analyzers.roles import enters_a_brief_lock, idle_role, in_pool_worker
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
        # gunicorn's arbiter sleeping between its rounds: a supervisor, idle
        ([("Arbiter.run", "/x/site-packages/gunicorn/arbiter.py"),
          ("Arbiter.sleep", "/x/site-packages/gunicorn/arbiter.py")], "select",
         "worker supervisor"),
        # a forked sync worker still has Arbiter.run at its root: its handler's sleep is
        # the request's wait, not the supervisor's
        ([("Arbiter.run", "/x/site-packages/gunicorn/arbiter.py"),
          ("Arbiter.manage_workers", "/x/site-packages/gunicorn/arbiter.py"),
          ("Arbiter.spawn_worker", "/x/site-packages/gunicorn/arbiter.py"),
          ("SyncWorker.handle", "/x/site-packages/gunicorn/workers/sync.py"),
          ("item", "/srv/shop.py")], "time.sleep", ""),
        # a sync worker between connections, as recorded under gunicorn 27 -w 2: select()
        # on its listener in SyncWorker.wait
        ([("Arbiter.spawn_worker", "/x/site-packages/gunicorn/arbiter.py"),
          ("SyncWorker.run", "/x/site-packages/gunicorn/workers/sync.py"),
          ("SyncWorker.run_for_one", "/x/site-packages/gunicorn/workers/sync.py"),
          ("SyncWorker.wait", "/x/site-packages/gunicorn/workers/sync.py")], "select.select",
         "server worker"),
        # the same worker draining its client's socket as it closes it: the request's
        ([("SyncWorker.run_for_one", "/x/site-packages/gunicorn/workers/sync.py"),
          ("SyncWorker.accept", "/x/site-packages/gunicorn/workers/sync.py"),
          ("SyncWorker.handle", "/x/site-packages/gunicorn/workers/sync.py"),
          ("close_graceful", "/x/site-packages/gunicorn/util.py")], "sock.recv", ""),
        # a gthread worker's poller with nothing ready (its requests run on a pool's threads)
        ([("ThreadWorker.run", "/x/site-packages/gunicorn/workers/gthread.py"),
          ("ThreadWorker.wait_for_and_dispatch_events",
           "/x/site-packages/gunicorn/workers/gthread.py"),
          ("EpollSelector.select", "/usr/lib/python3.11/selectors.py")], "self._selector.poll",
         "server loop"),
        # grpcio's server: its poller in the completion queue's poll, as recorded under
        # rank_grpc (tests/threads_corpus), then handing an event on (work)
        ([("Thread._bootstrap", "/usr/lib/python3.11/threading.py"),
          ("Thread.run", "/usr/lib/python3.11/threading.py"),
          ("_serve", "/x/site-packages/grpc/_server.py")], "state.completion_queue.poll",
         "server loop"),
        ([("_serve", "/x/site-packages/grpc/_server.py"),
          ("_process_event_and_continue", "/x/site-packages/grpc/_server.py")], "", ""),
        # its main thread parked until the server stops
        ([("main", "/srv/rank.py"),
          ("_Server.wait_for_termination", "/x/site-packages/grpc/_server.py"),
          ("wait", "/x/site-packages/grpc/_common.py"),
          ("Event.wait", "/usr/lib/python3.11/threading.py")], "waiter.acquire",
         "server main thread"),
        # uvicorn --workers' parent between its health checks
        ([("Multiprocess.run", "/x/site-packages/uvicorn/supervisors/multiprocess.py"),
          ("Event.wait", "/usr/lib/python3.11/threading.py")], "waiter.acquire",
         "worker supervisor"),
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


def test_a_main_thread_parked_while_a_server_s_threads_work_is_no_spare_capacity():
    idle = pd.DataFrame(
        {"threads": [1, 8], "idle_s": [3.6, 10.5], "idle_share": [0.97, 0.36]},
        index=pd.Index(["server main thread", "thread-pool worker"], name="role"),
    )
    (line,) = idle_notes(idle)
    assert line.startswith("8 thread-pool workers idle 36%")


def test_an_event_loop_waiting_in_its_selector_is_idle_and_one_running_a_callback_is_not():
    import asyncio.base_events
    import selectors

    loop = ("BaseEventLoop._run_once", asyncio.base_events.__file__)
    waiting = [("BaseEventLoop.run_forever", asyncio.base_events.__file__), loop,
               ("EpollSelector.select", selectors.__file__)]  # fmt: skip
    running = [*waiting[:2], ("Handle._run", "/usr/lib/python3.11/asyncio/events.py")]
    assert idle_role(waiting, "_selector.poll") == "event loop"
    assert idle_role(running, "_sock.send") == ""


def blocked_stack(target, held) -> tuple[list[tuple[str, str]], str]:
    """The stack of a thread running ``target`` while this one holds ``held``, once the
    thread is blocked in it."""
    thread = threading.Thread(target=target, daemon=True)
    with held:
        thread.start()
        time.sleep(0.1)
        stack = stack_of(thread)
    thread.join(5)
    return stack


def test_entering_a_stdlib_primitive_s_internal_lock_is_brief_and_a_user_s_lock_is_not():
    sem, cond, q, fut = threading.Semaphore(0), threading.Condition(), queue.Queue(), Future()
    # blocked entering the lock the primitive holds for a few bytecodes
    assert enters_a_brief_lock(*blocked_stack(sem.release, sem._cond))
    assert enters_a_brief_lock(*blocked_stack(q.qsize, q.mutex))
    assert enters_a_brief_lock(*blocked_stack(lambda: q.put(1), q.mutex))
    assert enters_a_brief_lock(*blocked_stack(fut.done, fut._condition))
    # the service's own Condition, held as long as its code likes: a real lock wait

    def with_cond() -> None:
        with cond:
            pass

    assert not enters_a_brief_lock(*blocked_stack(with_cond, cond))


def test_waiting_to_be_notified_is_not_a_brief_lock_but_taking_it_back_after_is():
    q, fut = queue.Queue(), Future()
    waiter = threading.Thread(target=q.get, daemon=True)
    waiter.start()
    time.sleep(0.1)
    assert not enters_a_brief_lock(*stack_of(waiter))  # an empty queue's get
    q.put(None)
    waiter.join(5)
    # a Future's result, notified while the test holds its condition's RLock: the
    # waiter wakes and blocks taking the lock back (RLock's C _acquire_restore)
    getter = threading.Thread(target=fut.result, daemon=True)
    getter.start()
    time.sleep(0.1)
    with fut._condition:
        fut._result, fut._state = 1, "FINISHED"
        fut._condition.notify_all()
        time.sleep(0.1)
        frames, call = stack_of(getter)
        assert frames[-1][0] == "Condition.wait" and call.endswith("_acquire_restore")
        assert enters_a_brief_lock(frames, call)
    getter.join(5)


@pytest.mark.parametrize(
    ("frames", "leaf_call", "brief"),
    [
        # a Barrier runs its action (the service's code) holding its lock
        ([("Barrier.wait", "/usr/lib/python3.11/threading.py"),
          ("Condition.__enter__", "/usr/lib/python3.11/threading.py")],
         "self._lock.__enter__", False),
        # a module of the service's own named threading.py is not the stdlib's
        ([("Semaphore.release", "/srv/app/mythreading.py"),
          ("Condition.__enter__", "/usr/lib/python3.11/threading.py")],
         "self._lock.__enter__", False),
        # a Semaphore's Lock-based condition taking its lock back after a wait
        ([("Semaphore.acquire", "/usr/lib/python3.11/threading.py"),
          ("Condition.wait", "/usr/lib/python3.11/threading.py"),
          ("Condition._acquire_restore", "/usr/lib/python3.11/threading.py")],
         "self._lock.acquire", True),
    ],
)  # fmt: skip
def test_written_out_brief_lock_stacks(frames, leaf_call, brief):
    assert enters_a_brief_lock(frames, leaf_call) is brief


def test_a_pool_worker_s_time_between_tasks_is_charged_to_the_task_it_ran():
    pool = ("_worker", "/usr/lib/python3.11/concurrent/futures/thread.py")
    assert in_pool_worker([("Thread.run", "/usr/lib/python3.11/threading.py"), pool])
    assert not in_pool_worker([("_worker", "/srv/jobs.py")])
    samples = pd.DataFrame(
        {
            "thread_id": [7, 7, 7, 8, 8],
            "ts_ns": [30, 10, 20, 10, 20],
            "user_function": ["<library>", "<library>", "tokenize", "<library>", "<library>"],
            "between_tasks": [True, True, False, True, False],
        }
    )
    charged = _charged_to_their_tasks(samples)
    # thread 7: before its first task, the next one; after it, the one it ran.
    # thread 8 ran no code of the service's: its bookkeeping stays the library's
    assert list(charged["user_function"]) == ["tokenize"] * 3 + ["<library>"] * 2
