"""A daemon thread that calls one function at a fixed rate until stopped (slower where its
ticks cost more than a share of one core: ``TickPacer``), and the budget that spaces a
costly reading taken on such a thread."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Protocol, TypeVar

from probe.osthreads import begin_probes_thread

__all__ = ["CostBudget", "TickPacer", "Ticker"]

_T = TypeVar("_T")


class TickPacer:
    """The interval to a ticker's next tick: ``interval_s``, or longer where its ticks cost
    more than ``share`` of one core over it.

    A tick's cost is its thread's CPU time since the last tick (the reads its waiter made
    at the tick included), smoothed over ~``1/smoothing`` ticks (an
    exponentially weighted mean), so that one slow tick (a new stack interned, a new call
    site decoded) does not stretch the next interval; the interval is then
    ``max(interval_s, mean cost / share)``. The mean starts at nothing: the first ticks,
    which intern every stack and call site, would otherwise space out the start of a
    run. ``figures()`` says how often the ticks were spaced out, and the mean interval,
    for meta.json."""

    def __init__(self, interval_s: float, share: float, smoothing: float = 0.1) -> None:
        if interval_s <= 0 or not 0 < share <= 1 or not 0 < smoothing <= 1:
            raise ValueError("interval, share and smoothing must be positive, share <= 1")
        self.interval_s, self.share, self.smoothing = interval_s, share, smoothing
        self.mean_cost_s = 0.0
        self.ticks = self.spaced_out = 0
        self.total_interval_s = 0.0

    def after(self, cost_s: float) -> float:
        """The interval to the next tick, after a tick that cost ``cost_s`` of CPU."""
        cost_s = max(0.0, cost_s)
        mean = self.mean_cost_s = self.mean_cost_s + self.smoothing * (cost_s - self.mean_cost_s)
        interval = max(self.interval_s, mean / self.share)
        self.ticks += 1
        self.spaced_out += interval > self.interval_s
        self.total_interval_s += interval
        return interval

    def figures(self) -> dict[str, float | int]:
        return {
            "interval_s": self.interval_s,
            "share": self.share,
            "mean_interval_s": round(self.total_interval_s / self.ticks, 6) if self.ticks else 0.0,
            "mean_tick_cpu_s": round(self.mean_cost_s, 6),
            "ticks_spaced_out": self.spaced_out,
        }


class Waiter(Protocol):
    def wait(self, timeout_s: float) -> bool: ...
    def wake(self) -> None: ...


class Ticker:
    """Calls ``tick()`` every ``interval_s`` seconds on a daemon thread; with a ``pacer``,
    at the interval it gives after each tick (its CPU time measured on this thread).

    A tick that overruns does not cause a burst of catch-up ticks: the schedule slips.
    An exception in ``tick`` is logged once and counted, never raised into the target.
    A ``waiter`` does the waiting between ticks (the stack sampler reads stacks at the
    tick's instant there): ``wait(timeout_s)`` returns True once ``wake()`` was called.
    ``excluded`` is left out of the ticks' CPU, as in ``CostBudget``.
    """

    def __init__(
        self,
        name: str,
        interval_s: float,
        tick: Callable[[], None],
        *,
        clock: Callable[[], float] = time.monotonic,
        pacer: TickPacer | None = None,
        waiter: Waiter | None = None,
        excluded: Callable[[], float] | None = None,
    ) -> None:
        if interval_s <= 0:
            raise ValueError("interval must be positive")
        self.name = name
        self.interval_s = interval_s
        self._tick = tick
        self._clock = clock
        self.pacer = pacer
        self._waiter = waiter
        self._excluded = excluded or _nothing
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
        if self._waiter is not None:
            self._waiter.wake()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout)

    def _run(self) -> None:
        begin_probes_thread()
        clock, interval, pacer = self._clock, self.interval_s, self.pacer
        due = clock() + interval
        wait = self._waiter.wait if self._waiter is not None else self._stop.wait
        # A tick's cost runs from the end of the last one: the waiter's reads at the tick
        # (the stack sampler's C reader: frames, CPU clocks, kernel states) count with the
        # tick's own work. Timed from the tick's call alone, a served app's sampler thread
        # took ~8% of a core while its pacer read ~3.5% (no-op FastAPI route under
        # uvicorn: 0.76 s of CPU in a 9.5-s run, 871 ticks, 2026-12-02).
        # Collections set off on this thread are the target's heap work, not the tick's
        # (``excluded``: CostBudget's docstring)
        excluded = self._excluded
        spent = time.thread_time() - excluded()
        while not wait(max(0.0, due - clock())) and not self._stop.is_set():
            try:
                self._tick()
            except Exception:  # a sampler bug must never take the service down
                self.errors += 1
                if self.errors == 1:
                    # logging imported here: ~5 ms of every helper's start-up otherwise
                    import logging

                    logging.getLogger("probe").exception(
                        "probe: %s tick failed (further failures not logged)", self.name
                    )
            if pacer is not None:
                spent_before, spent = spent, time.thread_time() - excluded()
                interval = pacer.after(spent - spent_before)
            now = clock()
            due += interval
            if due < now:
                due = now + interval
        self.cpu_s = time.thread_time()


class CostBudget:
    """Spaces a reading whose cost grows with the target (a heap walk, a look at every
    pending task) so that it takes at most ``share`` of the time: after a reading that
    cost c seconds, the next is due c / share seconds later (at once while it is cheap).

    ``excluded`` (seconds so far, on the reading's thread) is time the timer counts that is
    not the reading's: the garbage collections the reading happened to set off
    (``probe.samplers.gc_pauses.GcPauses.collected_here_s``), the target's heap work,
    which runs on whichever thread allocates when the collector is due. Counted, one
    22-ms full collection during a task tick (1% share) silenced the task sampler for
    2.2 s."""

    def __init__(
        self,
        share: float,
        timer: Callable[[], float] = time.perf_counter,
        excluded: Callable[[], float] | None = None,
    ) -> None:
        self._share = share
        self._timer = timer
        self._excluded = excluded or _nothing
        self._next_ns = 0

    def due(self, now_ns: int) -> bool:
        return now_ns >= self._next_ns

    def spend(self, now_ns: int, read: Callable[[], _T]) -> _T:
        """``read()``, timed: the next reading is due when its cost is paid for."""
        started, excluded = self._timer(), self._excluded()
        value = read()
        cost = (self._timer() - started) - (self._excluded() - excluded)
        self._next_ns = now_ns + int(max(0.0, cost) / self._share * 1e9)
        return value


def _nothing() -> float:
    return 0.0
