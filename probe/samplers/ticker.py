"""A daemon thread that calls one function at a fixed rate until stopped, and the budget
that spaces a costly reading taken on such a thread."""

from __future__ import annotations

import logging
import signal
import threading
import time
from collections.abc import Callable
from typing import TypeVar

__all__ = ["CostBudget", "Ticker", "keep_interrupts_off_this_thread"]

_log = logging.getLogger("probe")
_T = TypeVar("_T")


def keep_interrupts_off_this_thread() -> None:
    """First thing on each of probe's threads in the target: SIGINT and SIGTERM blocked
    on it, so that the kernel delivers them to the target's threads, where they interrupt
    a blocking call of its main thread promptly, as they would without probe."""
    if hasattr(signal, "pthread_sigmask"):
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})


class Ticker:
    """Calls ``tick()`` every ``interval_s`` seconds on a daemon thread.

    A tick that overruns does not cause a burst of catch-up ticks: the schedule slips.
    An exception in ``tick`` is logged once and counted, never raised into the target.
    """

    def __init__(
        self,
        name: str,
        interval_s: float,
        tick: Callable[[], None],
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if interval_s <= 0:
            raise ValueError("interval must be positive")
        self.name = name
        self.interval_s = interval_s
        self._tick = tick
        self._clock = clock
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.errors = 0
        self.cpu_s: float | None = None  # this thread's own CPU time, set when it stops

    @property
    def ident(self) -> int | None:
        return self._thread.ident if self._thread is not None else None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name=self.name, daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 5.0) -> None:
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout)

    def _run(self) -> None:
        keep_interrupts_off_this_thread()
        clock, interval = self._clock, self.interval_s
        due = clock() + interval
        while not self._stop.wait(max(0.0, due - clock())):
            try:
                self._tick()
            except Exception:  # a sampler bug must never take the service down
                self.errors += 1
                if self.errors == 1:
                    _log.exception("probe: %s tick failed (further failures not logged)", self.name)
            now = clock()
            due += interval
            if due < now:
                due = now + interval
        self.cpu_s = time.thread_time()


class CostBudget:
    """Spaces a reading whose cost grows with the target (a heap walk, a look at every
    pending task) so that it takes at most ``share`` of the time: after a reading that
    cost c seconds, the next is due c / share seconds later (at once while it is cheap)."""

    def __init__(self, share: float, timer: Callable[[], float] = time.perf_counter) -> None:
        self._share = share
        self._timer = timer
        self._next_ns = 0

    def due(self, now_ns: int) -> bool:
        return now_ns >= self._next_ns

    def spend(self, now_ns: int, read: Callable[[], _T]) -> _T:
        """``read()``, timed: the next reading is due when its cost is paid for."""
        started = self._timer()
        value = read()
        self._next_ns = now_ns + int((self._timer() - started) / self._share * 1e9)
        return value
