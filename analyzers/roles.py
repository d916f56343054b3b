"""Idle capacity told apart from the work: threads parked where they wait for their next
task.

A thread-pool worker blocked in its queue's ``get``, a server loop blocked in ``select``
waiting for a connection, a multiprocessing pool's helper threads: blocked, but on nothing
a request waits for. Read as waits they made an undecorated service look
"contention-bound, waiting on locks" when its pool merely had more workers than work
(issue 12: a FastAPI app's idle thread-pool workers in ``Queue.get``). So a blocked
sample whose stack is one of these loops *waiting for its next task* -- not running one:
the frame right under the loop, or the C call the loop's own frame sits on, is the
task-fetching call -- is idle capacity. It leaves the stage table (never a bottleneck,
never contention) and is reported as headroom.

The loops are named by (file suffix, qualified function); each entry says which calls of
it fetch the next task (``None``: any wait there is idle -- helper threads whose tasks
run in other processes).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

__all__ = [
    "BRIEF_HOLDERS",
    "IDLE_LOOPS",
    "LIMITS",
    "NOTIFY_WAITS",
    "PARKED_MAIN_ROLES",
    "SERVING_LOOPS",
    "IdleLoop",
    "enters_a_brief_lock",
    "idle_role",
    "in_pool_worker",
    "in_serving_loop",
    "process_transfer",
    "waits_for_a_limit",
    "waits_to_be_notified",
]


@dataclass(frozen=True)
class IdleLoop:
    role: str  # what the thread is, for the headroom line
    fetches: frozenset[str] | None  # the task-fetching calls (callee names); None: any


_QUEUE_GET = frozenset({"get", "Queue.get", "SimpleQueue.get"})
# a selector's select, by its C call's name or its selectors.py frame's
_SELECT = frozenset(
    {
        "select",
        "_PollLikeSelector.select",
        "SelectSelector.select",
        "EpollSelector.select",
        "PollSelector.select",
        "KqueueSelector.select",
    }
)  # fmt: skip

IDLE_LOOPS: dict[tuple[str, str], IdleLoop] = {
    # ThreadPoolExecutor's worker: ``work_queue.get(block=True)`` between tasks
    ("concurrent/futures/thread.py", "_worker"): IdleLoop("thread-pool worker", _QUEUE_GET),
    # anyio's worker threads (Starlette/FastAPI's sync routes run on them): ``queue.get()``
    ("anyio/_backends/_asyncio.py", "WorkerThread.run"): IdleLoop("thread-pool worker", _QUEUE_GET),
    # socketserver (http.server, wsgiref, Werkzeug's dev server): select() for a connection
    ("socketserver.py", "BaseServer.serve_forever"): IdleLoop("server loop", _SELECT),
    # asyncio's loop (uvicorn, hypercorn, aiohttp) in its selector's select with nothing
    # ready: waiting for the next event, not on a request's network call
    ("asyncio/base_events.py", "BaseEventLoop._run_once"): IdleLoop("event loop", _SELECT),
    # multiprocessing.Pool's three helper threads: the work runs in its child processes
    ("multiprocessing/pool.py", "Pool._handle_workers"): IdleLoop("process-pool helper", None),
    ("multiprocessing/pool.py", "Pool._handle_tasks"): IdleLoop("process-pool helper", None),
    ("multiprocessing/pool.py", "Pool._handle_results"): IdleLoop("process-pool helper", None),
    # ProcessPoolExecutor's manager thread: waits for its workers' results
    ("concurrent/futures/process.py", "_ExecutorManagerThread.run"): IdleLoop(
        "process-pool helper", None
    ),
    # a server's supervisor of its worker processes (probe.workers records each worker):
    # it waits on them and their signals, the requests are served in the workers. Its own
    # waits only: a forked gunicorn worker's stack still holds Arbiter.run, under
    # spawn_worker, all the way down to its handler
    ("gunicorn/arbiter.py", "Arbiter.run"): IdleLoop(
        "worker supervisor", frozenset({"Arbiter.sleep", "Arbiter.stop"})
    ),
    ("uvicorn/supervisors/multiprocess.py", "Multiprocess.run"): IdleLoop(
        "worker supervisor",
        frozenset({"Event.wait", "Multiprocess.keep_subprocess_alive", "Multiprocess.join_all"}),
    ),
    # gunicorn's sync worker between connections: select() on its listeners
    # (SyncWorker.wait), one listener or several
    ("gunicorn/workers/sync.py", "SyncWorker.run_for_one"): IdleLoop(
        "server worker", frozenset({"SyncWorker.wait"})
    ),
    ("gunicorn/workers/sync.py", "SyncWorker.run_for_multiple"): IdleLoop(
        "server worker", frozenset({"SyncWorker.wait"})
    ),
    # its gthread worker's poller: accepts and readable keep-alive connections (gunicorn
    # 27 selects in wait_for_and_dispatch_events, earlier ones in run); the requests run
    # on a ThreadPoolExecutor's threads
    ("gunicorn/workers/gthread.py", "ThreadWorker.wait_for_and_dispatch_events"): IdleLoop(
        "server loop", _SELECT
    ),
    ("gunicorn/workers/gthread.py", "ThreadWorker.run"): IdleLoop("server loop", _SELECT),
    ("hypercorn/run.py", "run"): IdleLoop(
        "worker supervisor", frozenset({"wait", "check_for_updates", "_join_exited"})
    ),
    # waitress: its main thread's asyncore loop in select()/poll() for the next event
    # (connections, readable requests), its task threads in their queue's condition
    ("waitress/wasyncore.py", "poll"): IdleLoop("server loop", _SELECT),
    ("waitress/wasyncore.py", "poll2"): IdleLoop("server loop", frozenset({"poll"})),
    ("waitress/task.py", "ThreadedTaskDispatcher.handler_thread"): IdleLoop(
        "thread-pool worker", frozenset({"Condition.wait"})
    ),
    # grpcio's server: a thread of its own polls the server's completion queue for the
    # next event (a new call, a finished send) and hands calls to the server's
    # ThreadPoolExecutor, whose workers run the handlers; the main thread of a server
    # that has started parks in wait_for_termination until it stops (both blocked on
    # nothing a request waits for: tests/threads_corpus's rank_grpc)
    ("grpc/_server.py", "_serve"): IdleLoop("server loop", frozenset({"poll"})),
    ("grpc/_server.py", "_Server.wait_for_termination"): IdleLoop("server main thread", None),
    # logging's QueueListener: waits for records
    ("logging/handlers.py", "QueueListener._monitor"): IdleLoop("log listener", _QUEUE_GET),
}
_IDLE_KEYS = frozenset(IDLE_LOOPS)
# idle roles of a main thread that leaves the work to other threads or processes: a run
# whose main thread is mostly one is no batch path (``breakdown._main_thread``), and the
# thread is no spare capacity (``breakdown.idle_notes``)
PARKED_MAIN_ROLES = frozenset({"worker supervisor", "server main thread"})


def _frame_key(
    function: str, filename: str, keys: frozenset[tuple[str, str]]
) -> tuple[str, str] | None:
    """The (file suffix, qualified function) of ``keys`` the frame is, if any."""
    name = filename.replace("\\", "/")
    return next((k for k in keys if function == k[1] and name.endswith(k[0])), None)


@functools.lru_cache(maxsize=4096)  # one look per distinct frame, not per stack
def _loop_at(function: str, filename: str) -> IdleLoop | None:
    key = _frame_key(function, filename, _IDLE_KEYS)
    return None if key is None else IDLE_LOOPS[key]


def idle_role(frames: list[tuple[str, str]], leaf_call: str) -> str:
    """The idle role of a stack (frames root first, as (qualname, filename)), or "".

    Idle when the innermost known loop is waiting in its task fetch: the frame under it
    is a fetching call, or it is the leaf frame and its C call (``leaf_call``) fetches.
    Whether the thread is blocked at all is the caller's (the sample's wait reason)."""
    for depth in range(len(frames) - 1, -1, -1):
        loop = _loop_at(*frames[depth])
        if loop is None:
            continue
        if loop.fetches is None:
            return loop.role
        if depth == len(frames) - 1:
            callee = leaf_call.rsplit(".", 1)[-1]
            return loop.role if callee in loop.fetches else ""
        return loop.role if frames[depth + 1][0] in loop.fetches else ""
    return ""


# Loops a server's main thread runs in: a thread in one serves requests (the batch job's
# critical path does not apply to it: ``analyzers.path``)
SERVING_LOOPS: frozenset[tuple[str, str]] = frozenset(
    {
        ("asyncio/base_events.py", "BaseEventLoop.run_forever"),  # uvicorn, hypercorn, aiohttp
        ("socketserver.py", "BaseServer.serve_forever"),  # http.server, wsgiref, Werkzeug
        ("gunicorn/arbiter.py", "Arbiter.run"),
        ("uvicorn/supervisors/multiprocess.py", "Multiprocess.run"),
        ("hypercorn/run.py", "run"),
        ("waitress/server.py", "BaseWSGIServer.run"),
        ("grpc/_server.py", "_Server.wait_for_termination"),
    }
)


@functools.lru_cache(maxsize=4096)
def _serves(function: str, filename: str) -> bool:
    return _frame_key(function, filename, SERVING_LOOPS) is not None


def in_serving_loop(frames: list[tuple[str, str]]) -> bool:
    """The stack (frames as ``idle_role``'s) runs inside a serving loop."""
    return any(_serves(*f) for f in frames)


# Where a thread waits to be notified (``threading.Condition.wait``'s ``waiter.acquire``:
# a queue's ``get``, an ``Event``, a ``Future``'s result), not for a mutex someone holds
NOTIFY_WAITS: frozenset[tuple[str, str]] = frozenset({("threading.py", "Condition.wait")})


@functools.lru_cache(maxsize=4096)
def waits_to_be_notified(function: str, filename: str) -> bool:
    """The frame is a wait to be notified (``NOTIFY_WAITS``)."""
    return _frame_key(function, filename, NOTIFY_WAITS) is not None


_POOL_WORKER = "thread-pool worker"


def in_pool_worker(frames: list[tuple[str, str]]) -> bool:
    """The stack (frames as ``idle_role``'s) runs in a thread-pool worker's loop."""
    return any((loop := _loop_at(*f)) is not None and loop.role == _POOL_WORKER for f in frames)


# The standard library's primitives whose internal lock (a Condition's, a queue's mutex)
# is held only while a few bytecodes run: each wait inside them releases it
# (``Condition.wait``). Barrier is left out (its action, user code, runs holding it); a
# Queue subclass whose ``_put``/``_get`` blocks would be misread (none in the stdlib).
BRIEF_HOLDERS: dict[str, tuple[str, ...]] = {
    "threading.py": ("Semaphore.", "BoundedSemaphore.", "Event."),
    "queue.py": ("Queue.",),
    "concurrent/futures/_base.py": ("Future.",),
}
# threading.Condition's frames between such a primitive and its lock: entering it, or
# taking it back after a wait (``_acquire_restore``: Python over a Lock, C over an RLock)
_CONDITION_ENTRIES = frozenset(
    {"Condition.__enter__", "Condition._acquire_restore", "Condition.wait", "Condition.wait_for"}
)


@functools.lru_cache(maxsize=4096)
def _holds_briefly(function: str, filename: str) -> bool:
    name = filename.replace("\\", "/")
    return any(
        name.endswith("/" + path) and function.startswith(prefixes)
        for path, prefixes in BRIEF_HOLDERS.items()
    )


def _in_condition(function: str, filename: str) -> bool:
    return function in _CONDITION_ENTRIES and filename.replace("\\", "/").endswith("/threading.py")


def enters_a_brief_lock(frames: list[tuple[str, str]], leaf_call: str) -> bool:
    """The stack (frames as ``idle_role``'s, blocked on the leaf's C call ``leaf_call``)
    waits to enter the internal lock of a standard-library primitive (``BRIEF_HOLDERS``),
    not to be notified.

    That lock's holder waits on nothing: it was running a few bytecodes when it lost the
    GIL (or its CPU), and this thread waits for that. Read as lock contention, a pool of
    pure-Python workers convoyed on ``ThreadPoolExecutor``'s idle semaphore (released
    after each task) was "contention-bound, waiting on locks" in one CI run in four
    (tests/threads_corpus's tokenize_pool: 38-53% of the path; py-spy: the GIL).
    """
    if not frames:
        return False
    call = leaf_call.rpartition(".")[2]
    function, filename = frames[-1]
    if not _in_condition(function, filename):
        # the primitive's own `with self.mutex:` over a C lock
        return call == "__enter__" and _holds_briefly(function, filename)
    if function == "Condition.wait" and call != "_acquire_restore":
        return False  # waiting to be notified (waiter.acquire)
    for caller in reversed(frames[:-1]):
        if not _in_condition(*caller):
            return _holds_briefly(*caller)
    return False


# Where a thread, or an asyncio task, waits for a limit others hold: a semaphore's
# permits, or a queue lending what it holds one request at a time -- a pool of
# connections (urllib3's blocking pool lends from a LifoQueue, SQLAlchemy's QueuePool from
# its own copy of queue.py, asyncpg's from an asyncio LifoQueue; BoundedSemaphore's
# acquire is Semaphore's). Anywhere in the stack: a library's pool calls the queue. A
# thread-pool worker waits in its queue for its next task too; that wait is its idle
# role, and no stage of the service's holds it. An asyncio Lock is a mutex, told apart
# by its name (its fix is to hold it less, not to raise it).
LIMITS = {
    ("/queue.py", "Queue.get"): "queue.Queue",
    ("/threading.py", "Semaphore.acquire"): "threading.Semaphore",
    ("/asyncio/locks.py", "Lock.acquire"): "asyncio.Lock",
    ("/asyncio/locks.py", "Semaphore.acquire"): "asyncio.Semaphore",
    ("/asyncio/queues.py", "Queue.get"): "asyncio.Queue",
    # httpx's connection pool (httpcore 1.x): a request waits here for a connection
    # while max_connections are out
    ("/httpcore/_async/connection_pool.py", "AsyncPoolRequest.wait_for_connection"): (
        "httpx.AsyncClient pool"
    ),
}
_LIMIT_KEYS = frozenset(LIMITS)


def waits_for_a_limit(frames: list[tuple[str, str]]) -> str:
    """The limit (``LIMITS``) the stack (frames as ``idle_role``'s) waits in, or ``""``."""
    for function, filename in reversed(frames):
        key = _frame_key(function, filename, _LIMIT_KEYS)
        if key is not None:
            return LIMITS[key]
    return ""


# multiprocessing moving data between processes by copy: pickling a task (or a result)
# and writing it into a pipe, where a full pipe blocks the write until the far end reads;
# and reading one (a blocked read there is waiting for the next message, not moving one)
_SENDS = frozenset(
    {
        ("multiprocessing/reduction.py", "ForkingPickler.dumps"),
        ("multiprocessing/connection.py", "_ConnectionBase.send_bytes"),
        ("multiprocessing/connection.py", "_ConnectionBase.send"),
    }
)
_RECEIVES = frozenset(
    {
        ("multiprocessing/connection.py", "_ConnectionBase.recv_bytes"),
        ("multiprocessing/connection.py", "_ConnectionBase.recv"),
        # a pool worker's task arrives here: read, then unpickled (a C call in this frame)
        ("multiprocessing/queues.py", "Queue.get"),
    }
)


def process_transfer(frames: list[tuple[str, str]]) -> str:
    """``"send"`` where the stack (frames as ``idle_role``'s) sends data to another
    process through multiprocessing, ``"receive"`` where it receives it, else ``""``."""
    if any(_frame_key(fn, name, _SENDS) for fn, name in frames):
        return "send"
    if any(_frame_key(fn, name, _RECEIVES) for fn, name in frames):
        return "receive"
    return ""
