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
    "IDLE_LOOPS",
    "NOTIFY_WAITS",
    "SERVING_LOOPS",
    "IdleLoop",
    "idle_role",
    "in_serving_loop",
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
    # logging's QueueListener: waits for records
    ("logging/handlers.py", "QueueListener._monitor"): IdleLoop("log listener", _QUEUE_GET),
}
_IDLE_KEYS = frozenset(IDLE_LOOPS)


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
