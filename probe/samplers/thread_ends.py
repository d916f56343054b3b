"""Each Python thread's end: its CPU clock and the instant, read by the thread itself as
it finishes.

The stack sampler measures a thread's CPU between two of its readings (its CPU clock at
each tick); a thread that ends between two ticks takes the CPU it used since its last
reading with it. Servers that start a thread per request lose most of it: Django under
uvicorn runs each view on a thread of its own (asgiref, a one-thread executor per
request), ~2 ms of CPU and gone, so the tick that saw it mid-call read part of its CPU
and none of the rest. Measured on ``tests/serving_corpus/shop_django.py`` (its CPU route
~2 ms a request): 0.05-0.2 ms a request read by the samples, below its sleeping route's
0.18-0.28 (test_http_spans' check, failing 1 run in 8 at the 0.1-ms switch interval and
5 in 8 at 5 ms, where the thread more often ends before the sampler gets the GIL).

So while a session runs, ``threading.Thread._bootstrap_inner`` -- where every thread
started through ``threading`` runs its ``run`` -- is wrapped: once ``run`` has returned,
the thread appends (ident, native id, instant, its CPU clock) to the active recorder's
queue, and the stack sampler gives each such end the CPU since the thread's last
reading, in the stack it read there. A thread that began and ended between two ticks is
never read: its CPU is counted (``unseen_cpu_ns``), its stack is not known. Threads
started before the session, or by ``_thread.start_new_thread`` directly, end unrecorded,
as before. The cost: one clock read and one append per thread's life.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any, NamedTuple

__all__ = ["ThreadEnd", "ThreadEnds"]

_active: ThreadEnds | None = None  # the recorder the wrapper appends to
# Thread._bootstrap_inner as threading defines it: kept for good once the wrapper is in
# place, so that a thread that entered the wrapper as it was taken out still runs
_original: Any = None


def _bootstrap_inner(thread: threading.Thread) -> None:
    recorder = _active
    start_ns = recorder.now() if recorder is not None else None
    try:
        _original(thread)
    finally:
        recorder = _active
        if recorder is not None and start_ns is not None:
            recorder.record(thread.ident, thread.name, start_ns)


class ThreadEnd(NamedTuple):
    """A thread's own reading as it finished: its CPU clock then is all its CPU."""

    ident: int | None
    tid: int  # its native id
    name: str
    start_ns: int  # when its bootstrap began (the recorder's clock)
    end_ns: int
    cpu_ns: int


class ThreadEnds:
    """The ends of the threads that finished since the last ``take``; see the module
    docstring. ``clock``: the stack sampler's (instants on one time line)."""

    def __init__(
        self,
        *,
        clock: Callable[[], int] = time.perf_counter_ns,
        thread_cpu: Callable[[], int] = time.thread_time_ns,
        native_id: Callable[[], int] = threading.get_native_id,
        most: int = 100_000,
    ) -> None:
        self._clock = clock
        self._thread_cpu = thread_cpu
        self._native_id = native_id
        # appended by ending threads, taken by the sampler (deque's append and popleft
        # are atomic); bounded: a sampler that stops taking does not grow the process
        self._ended: deque[ThreadEnd] = deque(maxlen=most)

    def now(self) -> int:
        return self._clock()

    def record(self, ident: int | None, name: str, start_ns: int) -> None:
        """Called by the ending thread itself, after its ``run``."""
        self._ended.append(
            ThreadEnd(ident, self._native_id(), name, start_ns, self._clock(), self._thread_cpu())
        )

    def take(self) -> list[ThreadEnd]:
        """Each thread ended since the last take."""
        out = []
        ended = self._ended
        while ended:
            out.append(ended.popleft())
        return out

    def install(self) -> None:
        """This recorder takes the ends of the threads from now on."""
        global _active, _original
        if _original is None:
            _original = threading.Thread._bootstrap_inner  # type: ignore[attr-defined]
        threading.Thread._bootstrap_inner = _bootstrap_inner  # type: ignore[attr-defined]
        _active = self

    def uninstall(self) -> None:
        """Threads end unrecorded again (``threading`` as it was)."""
        global _active
        if _active is not self:
            return
        _active = None
        threading.Thread._bootstrap_inner = _original  # type: ignore[attr-defined]
