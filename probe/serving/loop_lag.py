"""The event loop's lag as each request sees it, the way Node's ``monitorEventLoopDelay``
measures a loop: a timer on the loop, due every ``TICK_NS``, notes how late it fires. A
loop blocked by a handler's sync call (``time.sleep`` or a CPU-bound function in an
``async def`` route) fires its timer late by as long as it was blocked, and every request
open on the loop meanwhile waited that long for its next step. A request's figure
(``loop_lag_ns``) is the longest the loop kept it waiting at once while it was open, give
or take a tick: of each late firing, the part of the block (from when the timer was due
to when it fired) after the request opened; and, if the timer is overdue when the
request closes, the block so far. That last part matters: a request whose next step was
queued behind a blocking one runs right after it, in the same pass of the loop, and can
answer before the late timer gets its turn (asyncio runs the callbacks ready at the start
of a pass before it looks at its timers again). The part before the request opened is
the server's queue (``routes.Phases``'s ``queued_ns``), not counted twice. The request
that blocks the loop seldom sees its own block (the late firing comes after it has
answered): that second is its handler's time.

The timer runs only while a request is open on the loop, so an idle server pays nothing;
busy, it costs one callback every 10 ms (a few microseconds: well under 0.1% of a core).
asyncio's loops only (uvicorn, hypercorn's asyncio workers); trio's are left alone.
"""

from __future__ import annotations

import asyncio
import weakref
from collections import deque
from time import perf_counter_ns

__all__ = ["TICK_NS", "LoopLag"]

# Node's monitorEventLoopDelay samples every 10 ms by default (its `resolution`); a lag
# under a tick is not told from the timer's own granularity
TICK_NS = 10_000_000
# the firings kept per loop: 40 s at one a tick, longer than any request we time
_KEPT = 4096

# Each loop's LoopLag, for as long as the loop lives: a LoopLag holds its loop weakly,
# or the entry would keep the loop (and every loop made since) alive.
_by_loop: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, LoopLag] = (
    weakref.WeakKeyDictionary()
)
# The last one looked up: a server runs one loop, and the weak dictionary's lookup makes a
# weak reference to the key each time. With the request id's header read by a plain loop
# instead of a generator, 0.6-0.95 us of the ASGI middleware's ~9 us a request on a no-op
# FastAPI route (``benchmarks/middleware_overhead.py --noop``, 2026-12-05). The LoopLag
# refers to its loop weakly, so the loop is still freed at its end; the LoopLag itself
# (its firings: at most _KEPT pairs) stays until another loop is looked up.
_last: LoopLag | None = None


class LoopLag:
    """One loop's timer and its recent firings: (perf_counter_ns fired, ns late)."""

    __slots__ = ("_armed", "_due", "_loop", "_open", "firings")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = weakref.ref(loop)
        self._open = 0
        self._armed = False  # one timer pending at most
        self._due = 0
        self.firings: deque[tuple[int, int]] = deque(maxlen=_KEPT)

    @classmethod
    def of_running_loop(cls) -> LoopLag | None:
        """The running asyncio loop's (made on first use), or None outside one."""
        global _last
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # not asyncio (trio), or no loop
            return None
        last = _last
        if last is not None and last._loop() is loop:
            return last
        lag = _by_loop.get(loop)
        if lag is None:
            lag = _by_loop[loop] = cls(loop)
        _last = lag
        return lag

    def opened(self) -> int:
        """A request opened on the loop; the instant it did (perf_counter_ns)."""
        now = perf_counter_ns()
        self._open += 1
        if not self._armed:
            self._arm(now)
        return now

    def closed(self, since_ns: int) -> int:
        """A request opened at ``since_ns`` closed: the longest block of the loop while it
        was open (ns; 0 if the timer was never late meanwhile)."""
        now = perf_counter_ns()
        self._open = max(0, self._open - 1)
        # a block still going on as far as the timer knows: due, not fired yet
        worst = now - max(self._due, since_ns) if self._armed else 0
        for fired, late in reversed(self.firings):
            if fired < since_ns:
                break
            worst = max(worst, fired - max(fired - late, since_ns))
        return max(0, worst)

    def _arm(self, now: int) -> None:
        loop = self._loop()
        if loop is None or loop.is_closed():
            return
        self._armed = True
        self._due = now + TICK_NS
        loop.call_later(TICK_NS / 1e9, self._fire)

    def _fire(self) -> None:
        now = perf_counter_ns()
        self._armed = False
        self.firings.append((now, max(0, now - self._due)))
        if self._open > 0:
            self._arm(now)
