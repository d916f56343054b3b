"""The asyncio task sampler: what an event loop's suspended tasks are waiting for.

An event-loop thread asleep in its selector shows only the loop (``_run_once`` in
``select``); the time its requests take is in coroutines suspended at their awaits, which
no thread's stack holds. So at each tick, for every thread running an event loop, the
sampler reads the loop's pending tasks (asyncio's own registry of tasks, which
``asyncio.all_tasks`` copies from any thread the same way) and follows each task's await
chain -- the task's coroutine, what it awaits (``cr_await``), what that awaits, down to
the innermost coroutine suspended at its ``await`` -- and records the chain's frames as a
stack (outermost coroutine first, the await's line as the leaf), with what it waits on:

* ``network``: an await inside asyncio's streams or socket calls (``open_connection``,
  ``StreamReader.read``, ``sock_recv``), or an installed client library's I/O;
* ``sleep``: ``asyncio.sleep``;
* ``subprocess``: asyncio's child processes;
* ``tasks``: the task waits on other tasks of the loop -- a ``gather``, an awaited task,
  a lock, semaphore, event or queue of asyncio's -- whose own chains say what the work
  waits on (like a thread's wait on another thread);
* ``thread``: a future run in an executor (``run_in_executor``, ``to_thread``): the
  thread doing it is sampled on its own;
* ``unknown``: a future nothing here names; ``ready``: runnable, waiting for the loop
  (nothing awaited yet, or what it awaited is done and its wake-up is queued).

A tick costs a look at every pending task: ticks are spaced to keep that under 1% of
the time (every stack tick with a few tasks; ~8 a second with a thousand). A task still
waiting on the future it waited on at the last tick has not moved: its stack and reason
are kept, not walked again. A tick walks at most ``max_tasks`` chains
of tasks that moved: with hundreds pending (a semaphore queueing the rest) walking them
all would cost a millisecond a tick. Where more moved, the walk starts at a random one of
them: from the registry's first, a server's own tasks that move at every tick (hypercorn
lists dozens before the requests' handlers) would take the whole walk at every tick and
the handlers would never be seen. Each row counts the tasks it stands for (``tasks``,
scaled up by pending over known when some could not be walked). A task with no future
to wait on, or whose future is done, is ``ready``: runnable, waiting for its loop -- while
the loop runs something else, that wait is loop lag.

Rows: ``task_samples`` (ts_ns, thread_id, stack_id, wait_reason, tasks, wall_ns,
main_task), one per loop thread, stack and reason at each tick, where ``wall_ns`` is the
time since the tick before and ``main_task`` marks the row of the task its loop's
``run_until_complete`` waits for (``asyncio.run``'s: a batch job's own chain of awaits,
which its run's length follows).

A task awaiting a TCP connection (asyncio's streams, aiohttp's, anyio's: the socket
of the transport its innermost coroutines read from) has the connection read at each
tick: the kernel's counts of data segments and bytes each way so far (``TCP_INFO``, ~1
us a connection, at most ``max_tasks`` a tick): ``awaited_sockets`` (ts_ns, thread_id,
stack_id, connection, segments_out, segments_in, bytes_out, bytes_in). A call sends its
request before each answer; a stream's reads send nothing (``analyzers.streams``).

Loop lag is read at every call, not only on the spaced ticks: each loop the ticks have
met is asked how many callbacks wait in its ready queue (a task whose await completed,
an I/O callback) and whether a task runs on it -- a deque's length and a copy of the
running-task dict, ~2 us a loop (measured on a loop in a thread). A coroutine holding
the loop with CPU shows as ready callbacks queued behind it: ``loop_samples`` (ts_ns,
thread_id, ready, running). A loop that takes no weak reference is not read.
"""

from __future__ import annotations

import asyncio
import random
import socket
import struct
import time
import weakref
from collections import Counter
from collections.abc import Callable, Iterable
from types import FrameType
from typing import Any

from probe.samplers.collection import collector_held_off
from probe.samplers.ticker import CostBudget
from probe.samplers.waits import module_path

__all__ = ["TaskSampler", "await_chain", "await_reason", "awaited_socket", "tcp_counts"]

# What an await inside these modules waits on (module paths from the stdlib's or
# site-packages' root, as ``waits``'s tables), innermost frame first.
_AWAIT_MODULES = {
    "asyncio/streams.py": "network",
    "asyncio/selector_events.py": "network",
    "asyncio/sslproto.py": "network",
    "asyncio/subprocess.py": "subprocess",
    "asyncio/base_subprocess.py": "subprocess",
    "asyncio/locks.py": "tasks",
    "asyncio/queues.py": "tasks",
    "asyncio/taskgroups.py": "tasks",
    "asyncio/threads.py": "thread",
    # installed clients' transports
    "httpcore/_async/connection.py": "network",
    "httpcore/_async/http11.py": "network",
    "httpcore/_backends/anyio.py": "network",
    "aiohttp/streams.py": "network",
    "aiohttp/client_proto.py": "network",
    "aiohttp/connector.py": "network",
}
# (module path, function) pairs where the module alone does not decide
_AWAIT_FUNCTIONS = {
    ("asyncio/tasks.py", "sleep"): "sleep",
    ("asyncio/tasks.py", "gather"): "tasks",
    ("asyncio/tasks.py", "wait"): "tasks",
    ("asyncio/tasks.py", "_wait"): "tasks",
    ("asyncio/tasks.py", "wait_for"): "tasks",
    ("asyncio/base_events.py", "create_connection"): "network",
    ("asyncio/base_events.py", "_connect_sock"): "network",
    ("asyncio/base_events.py", "getaddrinfo"): "network",
    ("asyncio/base_events.py", "sock_sendall"): "network",
    ("asyncio/base_events.py", "run_in_executor"): "thread",
    # Starlette/FastAPI's sync routes: anyio runs them on its worker threads
    ("anyio/_backends/_asyncio.py", "run_sync_in_worker_thread"): "thread",
    # anyio's sockets (httpx's and httpcore's, through AnyIOStream): a read or write
    # waits on an asyncio.Event the transport's protocol sets (asyncio/locks.py, "tasks",
    # is the innermost frame), yet it is the network's wait (its socket streams' receive
    # and send; its Event's and Lock's are "wait" and "acquire")
    ("anyio/_backends/_asyncio.py", "receive"): "network",
    ("anyio/_backends/_asyncio.py", "send"): "network",
}


def await_chain(coro: Any, max_depth: int = 64) -> list[FrameType]:
    """The frames of a suspended coroutine chain, outermost first (down to the innermost
    coroutine: what that awaits is a future)."""
    frames: list[FrameType] = []
    while coro is not None and len(frames) < max_depth:
        frame = getattr(coro, "cr_frame", None) or getattr(coro, "gi_frame", None)
        if frame is None:
            break
        frames.append(frame)
        coro = getattr(coro, "cr_await", None) or getattr(coro, "gi_yieldfrom", None)
    return frames


def await_reason(frames: Iterable[FrameType], waiter: Any) -> str:
    """What a task suspended in ``frames`` (outermost first) waits on; ``waiter`` is the
    future the task itself is waiting for (``Task._fut_waiter``)."""
    # a function that decides (a library's I/O call) outranks the module of what it
    # awaits below it (the asyncio primitive it waits on), then modules, innermost first
    keys = [(module_path(f.f_code.co_filename), f.f_code.co_name) for f in frames][::-1]
    for key in keys:
        if key in _AWAIT_FUNCTIONS:
            return _AWAIT_FUNCTIONS[key]
    for path, _ in keys:
        if path in _AWAIT_MODULES:
            return _AWAIT_MODULES[path]
    if isinstance(waiter, asyncio.Future) and (
        isinstance(waiter, asyncio.Task) or type(waiter).__name__ == "_GatheringFuture"
    ):
        return "tasks"
    return "unknown"


def _pending_tasks() -> list[asyncio.Task[Any]]:
    """Every pending task of every loop: a copy of asyncio's registry, retried when
    another thread changes it mid-copy (as ``asyncio.all_tasks`` does)."""
    registry: Any = getattr(asyncio.tasks, "_all_tasks", None)
    if registry is None:  # 3.12+: scheduled and eager tasks are kept apart
        registry = list(getattr(asyncio.tasks, "_scheduled_tasks", ())) + list(
            getattr(asyncio.tasks, "_eager_tasks", ())
        )
    for _ in range(100):
        try:
            tasks = list(registry)
            break
        except RuntimeError:  # the set changed size during the copy
            continue
    else:
        return []
    return [t for t in tasks if not t.done()]


class TaskSampler:
    """Samples the pending asyncio tasks of every event loop in the process."""

    def __init__(
        self,
        *,
        stack_of: Callable[[list[FrameType]], int],
        thread_of: Callable[[int], int | None],
        clock: Callable[[], int] = time.perf_counter_ns,
        pending: Callable[[], list[Any]] = _pending_tasks,
        max_tasks: int = 16,
        timer: Callable[[], float] = time.thread_time,
        budget_share: float = 0.01,
        start_at: Callable[[int], int] = random.randrange,
        excluded: Callable[[], float] | None = None,
    ) -> None:
        self._stack_of = stack_of  # interns a chain (outermost first) as a stack id
        self._thread_of = thread_of  # Python ident -> thread id, when sampled
        self._clock = clock
        self._pending = pending
        self._max_tasks = max_tasks
        self._start_at = start_at  # n -> where a tick's walk starts among n tasks
        # task -> (the future it waited on, stack, reason, whether it is its loop's main
        # task, the TCP socket it waits to read from or None) when last walked: a task
        # still waiting on the same future has not moved, and is not walked again
        self._known: dict[Any, tuple[Any, int, str, bool, Any]] = {}
        self._last_ns: int | None = None
        # ticks are spaced to keep their cost under ``budget_share`` of the time: a tick
        # copies the registry and looks at every pending task (measured by
        # benchmarks/task_sampler_cost.py: ~60 us with 10 tasks, ~1.4 ms with 1,000). Its
        # cost is the sampler thread's CPU, not its wall time: waiting for the GIL, it
        # takes nothing from the target. Timed by the wall, ticks in hypercorn's worker
        # under test_http_spans's load came 10-15 in its 3.1-3.4 s, by CPU 16-21
        # (``excluded``: the collections a tick sets off, which are not its cost)
        self._budget = CostBudget(budget_share, timer, excluded)
        self._rows: list[tuple[int, int, int, str, float, int, bool]] = []
        # the loops the ticks have met -> their thread's id (weak: a closed loop goes)
        self._loops: weakref.WeakKeyDictionary[Any, int] = weakref.WeakKeyDictionary()
        self._loop_rows: list[tuple[int, int, int, bool]] = []
        self._socket_rows: list[tuple[int, int, int, str, int, int, int, int]] = []

    def sample(self, now: int | None = None) -> None:
        """One tick, when one is due: the pending tasks of each loop, grouped by stack and
        reason; ``now``: the stack sampler's instant for this tick, so a loop's row and
        its tasks' rows share it."""
        now = self._clock() if now is None else now
        if self._loops:
            self._read_loops(now)
        if self._budget.due(now):
            self._budget.spend(now, lambda: self._tick(now))

    def _meet(self, loop: Any, tid: int | None) -> None:
        """Read ``loop``'s ready queue from now on (once a tick per loop)."""
        if tid is None or loop in self._loops:
            return
        try:
            self._loops[loop] = tid
        except TypeError:  # a loop that takes no weak reference: not read
            pass

    def _read_loops(self, now: int) -> None:
        running = _running_tasks()
        for loop, tid in list(self._loops.items()):
            ready = getattr(loop, "_ready", None)  # asyncio's deque of ready callbacks
            if ready is None or loop.is_closed() or not loop.is_running():
                continue
            self._loop_rows.append((now, tid, len(ready), running.get(loop) is not None))

    def _tick(self, now: int) -> None:
        last, self._last_ns = self._last_ns, now
        tasks = self._pending()
        if last is None or not tasks:
            return
        running = _running_tasks()
        threads: dict[Any, int | None] = {}  # loop -> its thread's id, while it runs
        waiting: list[tuple[Any, int]] = []
        for task in tasks:
            loop = task.get_loop()
            if task is running.get(loop):
                continue  # its frames are on its thread's stack
            if loop not in threads:
                ident = getattr(loop, "_thread_id", None)  # None once the loop stops
                threads[loop] = None if ident is None else self._thread_of(ident)
                self._meet(loop, threads[loop])
            tid = threads[loop]
            if tid is not None:
                waiting.append((task, tid))
        if not waiting:
            return
        if len(waiting) > self._max_tasks:
            # the walk may run out before the list does: start it anywhere, so that
            # every task is as likely to be walked whatever its place in the registry
            first = self._start_at(len(waiting))
            waiting = waiting[first:] + waiting[:first]
        groups: Counter[tuple[int, int, str, bool]] = Counter()
        sockets: dict[str, tuple[int, int, Any]] = {}  # awaited sockets: key -> where
        known, self._known = self._known, {}
        budget, unwalked = self._max_tasks, 0
        for task, tid in waiting:
            waiter = getattr(task, "_fut_waiter", None)
            if waiter is not None and waiter.done():
                # what it awaited has happened: its wake-up waits in the loop's ready
                # queue (the task clears _fut_waiter only when it runs again)
                waiter = None
            hit = known.get(task)
            if hit is not None and waiter is not None and hit[0] is waiter:
                _, sid, reason, main, sock = hit  # the same future: the same wait
            elif budget > 0:
                budget -= 1
                walked, reason, sock = self._walk(task, waiter)
                if walked is None:
                    continue
                sid, main = walked, _is_main(task)
            else:
                unwalked += 1
                continue
            self._known[task] = (waiter, sid, reason, main, sock)
            groups[(tid, sid, reason, main)] += 1
            if sock is not None and len(sockets) < self._max_tasks:
                sockets[sock[0]] = (tid, sid, sock[1])
        self._read_sockets(now, sockets)
        if not groups:
            return
        scale = len(waiting) / (len(waiting) - unwalked)
        self._rows.extend(
            (now, tid, sid, reason, n * scale, now - last, main)
            for (tid, sid, reason, main), n in groups.items()
        )

    def _walk(self, task: Any, waiter: Any) -> tuple[int | None, str, Any]:
        """The stack and reason of a task's await chain (None: nothing awaited yet), and
        the TCP socket it waits to read from (``awaited_socket``; None for other waits)."""
        # The task may have started running on its loop's thread since it was listed:
        # its frames are then that thread's live frames (probe.samplers.collection).
        with collector_held_off():
            frames = await_chain(task.get_coro())
            if not frames:
                return None, "", None  # created, not started: nothing awaited
            # ready to run again, waiting for the loop (which is busy, or about to be)
            reason = "ready" if waiter is None else await_reason(frames, waiter)
            sid = self._stack_of(frames)
            sock = awaited_socket(frames) if reason == "network" else None
            del frames
        return sid, reason, sock

    def _read_sockets(self, now: int, sockets: dict[str, tuple[int, int, Any]]) -> None:
        """A row per socket awaited at this tick: its kernel's counts of data segments
        and bytes each way so far (``tcp_counts``); a closed socket is left out."""
        for key, (tid, sid, sock) in sockets.items():
            counts = tcp_counts(sock)
            if counts is not None:
                self._socket_rows.append((now, tid, sid, key, *counts))

    def drain(self) -> dict[str, list[Any]]:
        rows, self._rows = self._rows, []
        loops, self._loop_rows = self._loop_rows, []
        sockets, self._socket_rows = self._socket_rows, []
        return {"task_samples": rows, "loop_samples": loops, "awaited_sockets": sockets}


# Linux's struct tcp_info (include/uapi/linux/tcp.h): tcpi_bytes_acked and
# tcpi_bytes_received (u64, since 4.1) at byte 120, tcpi_data_segs_in and
# tcpi_data_segs_out (u32, since 4.6) at 152; shorter answers come from older kernels
_TCP_BYTES = struct.Struct("=QQ")
_TCP_SEGMENTS = struct.Struct("=II")
_TCP_INFO_LEN = 160


def tcp_counts(sock: Any) -> tuple[int, int, int, int] | None:
    """(data segments sent, data segments received, bytes sent and acknowledged, bytes
    received) on a TCP socket so far, read from the kernel (``TCP_INFO``: ~1 us); None
    where it cannot say (closed, not TCP, a kernel before 4.6, not Linux)."""
    try:
        info = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, _TCP_INFO_LEN)
    except (OSError, AttributeError, ValueError):
        return None
    if len(info) < _TCP_INFO_LEN:
        return None
    acked, received = _TCP_BYTES.unpack_from(info, 120)
    segments_in, segments_out = _TCP_SEGMENTS.unpack_from(info, 152)
    return segments_out, segments_in, max(0, acked - 1), received  # less the SYN's


def awaited_socket(frames: list[FrameType]) -> tuple[str, Any] | None:
    """(a key naming the connection, its socket) where the innermost coroutines of an
    await chain (outermost first) read from a TCP transport -- asyncio's streams,
    aiohttp's and anyio's (httpx's) sockets: the ``self`` of one of the last three frames
    holds it as ``_transport``, ``transport`` or ``_protocol.transport`` -- else None."""
    for frame in reversed(frames[-3:]):
        owner = frame.f_locals.get("self")
        if owner is None:
            continue
        protocol = getattr(owner, "_protocol", None)
        for transport in (
            getattr(owner, "_transport", None),
            getattr(owner, "transport", None),
            getattr(protocol, "transport", None),
        ):
            sock = _tcp_socket(transport)
            if sock is not None:
                return sock
    return None


def _tcp_socket(transport: Any) -> tuple[str, Any] | None:
    get_extra_info = getattr(transport, "get_extra_info", None)
    if get_extra_info is None:
        return None
    try:
        sock = get_extra_info("socket")
        if sock is None:
            return None
        # asyncio's transports keep both names from their start: no system call
        local = get_extra_info("sockname") or sock.getsockname()
        peer = get_extra_info("peername") or sock.getpeername()
    except (OSError, AttributeError, TypeError):
        return None
    if not (isinstance(local, tuple) and isinstance(peer, tuple)):
        return None  # a Unix socket's names are paths: no TCP counts (a UDP one's fail later)
    return f"{local[0]}:{local[1]}>{peer[0]}:{peer[1]}", sock


def _is_main(task: Any) -> bool:
    """The task its loop's ``run_until_complete`` waits for -- ``asyncio.run``'s: the
    job's own chain of awaits, the rest of its tasks working beside it."""
    try:
        callbacks = task._callbacks or ()
    except AttributeError:
        return False
    return any(getattr(c[0], "__name__", "") == "_run_until_complete_cb" for c in callbacks)


def _running_tasks() -> dict[Any, Any]:
    """loop -> the task running on it now (its frames are on its thread's stack)."""
    current = getattr(asyncio.tasks, "_current_tasks", None)
    try:
        return dict(current) if current is not None else {}
    except RuntimeError:  # changed during the copy
        return {}
