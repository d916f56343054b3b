"""The stack sampler's pacing: its ticks take at most a share of one core, by coming less
often where each costs more (probe.samplers.ticker.TickPacer)."""

from __future__ import annotations

import threading
import time

import pytest

from probe.samplers.ticker import CostBudget, Ticker, TickPacer


def test_ticks_cheaper_than_the_share_keep_the_configured_interval():
    pacer = TickPacer(0.01, share=0.05)
    # 0.3 ms a 10-ms tick: 3% of a core, under the 5% share
    intervals = [pacer.after(0.0003) for _ in range(200)]
    assert intervals == [0.01] * 200
    assert pacer.figures()["ticks_spaced_out"] == 0


def test_costly_ticks_are_spaced_out_to_the_share_of_one_core():
    pacer = TickPacer(0.01, share=0.05)
    for _ in range(200):
        interval = pacer.after(0.0015)  # 1.5 ms a tick: 15% of a core at 100 Hz
    # the mean cost has converged: 1.5 ms every 30 ms is 5%
    assert interval == pytest.approx(0.03, rel=1e-3)
    assert 0.0015 / interval == pytest.approx(0.05, rel=1e-3)
    figures = pacer.figures()
    assert figures["ticks_spaced_out"] > 190 and figures["mean_interval_s"] > 0.025


def test_one_slow_tick_stretches_the_next_interval_by_a_tenth_of_what_it_alone_would():
    pacer = TickPacer(0.01, share=0.05)
    for _ in range(50):
        pacer.after(0.0002)
    # a tick that interned a burst of new stacks: 5 ms
    after_burst = pacer.after(0.005)
    # alone it would ask for 5 ms / 5% = 100 ms; smoothed over ten ticks, (0.2 ms + 4.8
    # ms / 10) / 5% = 13.6 ms
    assert after_burst == pytest.approx(0.0136, rel=0.01)  # the mean not quite at 0.2 ms
    # and the pace comes back as the cheap ticks resume
    for _ in range(30):
        interval = pacer.after(0.0002)
    assert interval == 0.01


def test_the_first_costly_ticks_of_a_run_do_not_space_out_its_start():
    pacer = TickPacer(0.01, share=0.05)
    # the first ticks intern every stack and decode every call site
    assert pacer.after(0.004) == pytest.approx(0.01, abs=1e-9)


@pytest.mark.parametrize("share", [0.0, -0.1, 1.5])
def test_a_share_outside_one_core_is_refused(share):
    with pytest.raises(ValueError):
        TickPacer(0.01, share=share)


class _BurningWaiter:
    """A waiter that, like the stack sampler's C reader, does its reads at the tick:
    ~2 ms of CPU each time it returns."""

    def __init__(self) -> None:
        self._woken = threading.Event()

    def wait(self, timeout_s: float) -> bool:
        if self._woken.wait(timeout_s):
            return True
        end = time.thread_time() + 0.002
        while time.thread_time() < end:
            pass
        return False

    def wake(self) -> None:
        self._woken.set()


def test_the_reads_a_waiter_makes_at_the_tick_count_in_the_tick_s_cost():
    pacer = TickPacer(0.001, share=0.1)
    ticker = Ticker("test-ticker", 0.001, lambda: None, pacer=pacer, waiter=_BurningWaiter())
    ticker.start()
    time.sleep(0.3)
    ticker.stop()
    # the tick itself costs nothing: all of the ~2 ms is the waiter's
    assert pacer.ticks > 5
    assert pacer.mean_cost_s > 0.001
    assert pacer.figures()["ticks_spaced_out"] > 0


class _Seconds:
    """A clock of seconds that tests move by hand."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_a_reading_s_cost_spaces_the_next_by_the_share():
    timer = _Seconds()
    budget = CostBudget(0.01, timer)

    def read() -> int:
        timer.now += 0.002
        return 7

    assert budget.spend(0, read) == 7
    assert not budget.due(199_000_000) and budget.due(200_000_000)


def test_a_collection_a_reading_sets_off_is_not_its_cost():
    # a CI run of a FastAPI app: a 22-ms full collection on the sampler's thread, counted
    # as a task tick's cost at a 1% share, left the task sampler silent for 2.2 s
    timer, collected = _Seconds(), _Seconds()
    budget = CostBudget(0.01, timer, excluded=collected)

    def read_that_collects() -> None:
        timer.now += 0.0221
        collected.now += 0.022

    budget.spend(0, read_that_collects)
    assert budget.due(10_000_000)  # 0.1 ms of its own at 1%: due 10 ms on


def test_the_ticks_pace_leaves_out_the_collections_made_on_their_thread():
    pacer = TickPacer(0.001, share=0.1)
    excluded = threading.local()

    def collected_here() -> float:
        return getattr(excluded, "s", 0.0)

    def tick() -> None:  # burns 2 ms of CPU, all of it "a collection"
        started = time.thread_time()
        while time.thread_time() < started + 0.002:
            pass
        excluded.s = collected_here() + (time.thread_time() - started)

    ticker = Ticker("test-ticker", 0.001, tick, pacer=pacer, excluded=collected_here)
    ticker.start()
    time.sleep(0.2)
    ticker.stop()
    assert pacer.ticks > 5
    assert pacer.mean_cost_s < 0.0005, pacer.figures()
