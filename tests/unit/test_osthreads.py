"""probe's threads named where tools outside Python look (probe.osthreads)."""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Callable

import pytest

from probe.launcher import _DurationStop
from probe.osthreads import name_this_os_thread
from probe.samplers.ticker import Ticker
from probe.watchdog import Watchdog

pytestmark = pytest.mark.skipif(
    not os.path.exists("/proc/thread-self/comm"), reason="names threads through Linux's /proc"
)


def os_name(native_id: int) -> str:
    with open(f"/proc/self/task/{native_id}/comm") as f:
        return f.read().rstrip("\n")


def in_a_thread(fn) -> int:
    """Run ``fn`` on a new thread, which then waits: its native id, while it lives."""
    ready, done, ids = threading.Event(), threading.Event(), []

    def run() -> None:
        fn()
        ids.append(threading.get_native_id())
        ready.set()
        done.wait(5)

    t = threading.Thread(target=run, daemon=True)
    t.start()
    ready.wait(5)
    try:
        return os_name(ids[0])
    finally:
        done.set()
        t.join(5)


def test_a_thread_takes_the_name_cut_to_what_the_kernel_keeps():
    assert in_a_thread(lambda: name_this_os_thread("probe-stack-sampler")) == "probe-stack-sam"


def test_a_name_that_cannot_be_written_leaves_the_thread_as_it_was():
    before = in_a_thread(lambda: None)
    after = in_a_thread(lambda: name_this_os_thread("probe-x", comm="/nonexistent/comm"))
    assert after == before


def test_a_ticker_s_thread_bears_its_name_outside_python():
    seen: list[str] = []
    ticker = Ticker(
        "probe-collector", 0.01, lambda: seen.append(os_name(threading.get_native_id()))
    )
    ticker.start()
    try:
        for _ in range(500):
            if seen:
                break
            threading.Event().wait(0.01)
    finally:
        ticker.stop()
    assert seen and seen[0] == "probe-collector"


def blocked_signals(native_id: int) -> set[int]:
    """The thread's blocked signals, as the kernel holds them (SigBlk, a hex mask)."""
    with open(f"/proc/self/task/{native_id}/status") as f:
        mask = int(next(line for line in f if line.startswith("SigBlk:")).split()[1], 16)
    return {n for n in range(1, 65) if mask >> (n - 1) & 1}


def duration_stop() -> tuple[threading.Thread, Callable[[], None]]:
    stop = _DurationStop(60.0, 1.0, threading.main_thread().ident or 0, kill=lambda: None)
    stop.start()
    return stop._thread, stop.done.set


def in_process_watchdog() -> tuple[threading.Thread, Callable[[], None]]:
    class Waits:
        def run(self, stop: threading.Event) -> None:
            stop.wait(10)

    dog = Watchdog(Waits(), None)  # type: ignore[arg-type]
    dog._thread.start()
    return dog._thread, dog._stop.set


@pytest.mark.parametrize(
    "start, name",
    [(duration_stop, "probe-duration"), (in_process_watchdog, "probe-watchdog")],
)
def test_probe_s_waiting_threads_are_named_and_leave_interrupts_to_the_target(start, name):
    """The duration stop signals the target's main thread by its id, the watchdog lives
    in a service: a SIGINT or SIGTERM sent to the process must find one of the target's
    threads, which a blocking call of its main thread then returns from, not these."""
    thread, stop = start()
    try:
        tid = named_as(thread, name)
        assert {signal.SIGINT, signal.SIGTERM} <= blocked_signals(tid)
    finally:
        stop()
        thread.join(5)


def named_as(thread: threading.Thread, name: str) -> int:
    """The started thread's native id, once its OS name is ``name`` (it names itself
    first thing on its thread; a thread that never does fails here)."""
    for _ in range(500):
        tid = thread.native_id
        if tid is not None and os_name(tid) == name:
            return tid
        threading.Event().wait(0.01)
    raise AssertionError(f"{thread.name} never named itself {name!r}")
