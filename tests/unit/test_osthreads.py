"""probe's threads named where tools outside Python look (probe.osthreads)."""

from __future__ import annotations

import os
import threading

import pytest

from probe.osthreads import name_this_os_thread
from probe.samplers.ticker import Ticker

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
