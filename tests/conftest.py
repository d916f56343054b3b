"""Shared fixtures: no probe thread may outlive the test that started it."""

from __future__ import annotations

import threading
import time

import pytest

from probe import spans


def _probe_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("probe-")]


@pytest.fixture(autouse=True)
def no_leftover_probe_threads():
    before = set(_probe_threads())
    yield
    deadline = time.monotonic() + 2.0
    while time.monotonic() < deadline:
        left = [t for t in _probe_threads() if t not in before and t.is_alive()]
        if not left:
            break
        time.sleep(0.02)
    spans.activate(None)
    assert not left, f"probe threads outlived the test: {[t.name for t in left]}"


@pytest.fixture
def recorder():
    """A span recorder, active for the test."""
    rec = spans.SpanRecorder()
    spans.activate(rec)
    yield rec
    spans.activate(None)
