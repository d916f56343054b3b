"""Fixtures shared by the unit tests of the samplers."""

from __future__ import annotations

import sys
import threading
import time

import pytest


@pytest.fixture
def blocked_frame():
    """A live frame parked on `lock.acquire()` for the whole test."""
    lock = threading.Lock()
    lock.acquire()
    started = threading.Event()

    def waiter():
        started.set()
        lock.acquire()

    t = threading.Thread(target=waiter)
    t.start()
    started.wait()
    frame = None
    for _ in range(200):  # until the thread is inside the acquire call
        frame = sys._current_frames()[t.ident]
        if frame.f_code is waiter.__code__ and frame.f_lineno == waiter.__code__.co_firstlineno + 2:
            break
        time.sleep(0.005)
    yield frame
    lock.release()
    t.join()
