"""The event loop's lag per request (probe.serving.loop_lag) on a real asyncio loop."""

from __future__ import annotations

import asyncio
import gc
import time
import weakref

from probe.serving.loop_lag import TICK_NS, LoopLag


def test_a_request_open_while_the_loop_is_blocked_sees_the_block_and_a_later_one_does_not():
    async def main() -> tuple[int, int]:
        lag = LoopLag.of_running_loop()
        assert lag is not None and LoopLag.of_running_loop() is lag  # one per loop
        opened = lag.opened()
        await asyncio.sleep(0.015)  # a tick fires on time
        time.sleep(0.2)  # a sync call in async code: the loop is blocked
        await asyncio.sleep(0.015)  # the late tick fires
        blocked = lag.closed(opened)
        opened = lag.opened()
        await asyncio.sleep(0.05)
        return blocked, lag.closed(opened)

    blocked, calm = asyncio.run(main())
    assert 0.2e9 - TICK_NS <= blocked <= 0.2e9 + TICK_NS
    assert calm < TICK_NS


def test_a_request_that_answers_right_after_a_block_before_the_late_tick_sees_the_block():
    # the ordering a CI run hit (uvicorn, stall_api.py): a request's next step was made
    # ready while another step blocked the loop; asyncio runs it first in the next pass,
    # before it looks at its timers, and the request answers before the late tick fires
    async def main() -> int:
        lag = LoopLag.of_running_loop()
        assert lag is not None
        woken = asyncio.get_running_loop().create_future()

        async def request() -> int:
            opened = lag.opened()
            await woken
            return lag.closed(opened)

        answered = asyncio.create_task(request())
        await asyncio.sleep(0.015)  # the request is open, a tick has fired on time
        woken.set_result(None)  # its step is queued ...
        time.sleep(0.2)  # ... behind this block
        return await answered

    blocked = asyncio.run(main())
    assert 0.2e9 - TICK_NS <= blocked <= 0.2e9 + TICK_NS


def test_a_request_opened_after_a_block_does_not_take_the_block_as_its_own():
    # its wait for the loop before it opened is the server's queue (queued_ns), not lag
    async def main() -> int:
        lag = LoopLag.of_running_loop()
        assert lag is not None
        lag.opened()  # another request keeps the timer armed
        await asyncio.sleep(0.015)
        time.sleep(0.2)  # the block; the next request opens right after it
        opened = lag.opened()
        await asyncio.sleep(0.015)  # the late tick fires while it is open
        return lag.closed(opened)

    assert asyncio.run(main()) < TICK_NS


def test_an_idle_loop_has_no_timer_once_its_requests_are_done():
    async def main() -> int:
        lag = LoopLag.of_running_loop()
        assert lag is not None
        lag.closed(lag.opened())
        await asyncio.sleep(2 * TICK_NS / 1e9)  # the pending tick fires, is not re-armed
        fired = len(lag.firings)
        await asyncio.sleep(5 * TICK_NS / 1e9)
        return len(lag.firings) - fired

    assert asyncio.run(main()) == 0


def test_outside_an_asyncio_loop_there_is_nothing_to_measure():
    assert LoopLag.of_running_loop() is None


def test_a_loop_that_ran_requests_is_freed_once_it_is_done():
    async def main() -> weakref.ref[asyncio.AbstractEventLoop]:
        lag = LoopLag.of_running_loop()
        assert lag is not None
        lag.closed(lag.opened())  # its timer armed, as a request arms it
        return weakref.ref(asyncio.get_running_loop())

    loop = asyncio.run(main())
    gc.collect()
    assert loop() is None


def test_each_loop_gets_its_own_lag_even_right_after_another_loop_was_looked_up():
    async def lag_of_this_loop() -> LoopLag | None:
        first = LoopLag.of_running_loop()
        assert LoopLag.of_running_loop() is first
        return first

    first, second = asyncio.run(lag_of_this_loop()), asyncio.run(lag_of_this_loop())
    assert first is not None and second is not None and first is not second
