"""Shared fixtures: no probe thread, and no process, may outlive the test that started it."""

from __future__ import annotations

import os
import signal
import threading
import time
import uuid

import psutil
import pytest

from probe import spans

# This session's mark, inherited by every process its tests start: two test sessions on one
# machine (a CI run and a developer's) must not take each other's processes for orphans --
# reading PYTEST_CURRENT_TEST alone, a unit-test run killed a CI run's services mid-test
SESSION_MARK = "PROBE_TEST_SESSION"
os.environ[SESSION_MARK] = f"{os.getpid()}-{uuid.uuid4().hex}"

# A test session started in the background by a non-interactive shell (`cmd &`, nohup)
# inherits SIGINT ignored, and every process its tests start with it: the tests of what
# Ctrl-C does then send a signal nothing takes (9 tests hung in a repeat run started so,
# 2026-11-26). They test a terminal's Ctrl-C, so the processes start as from one; what
# probe does where SIGINT is ignored is tested on its own (test_signal_ignored.py).
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


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


def _processes_tests_started() -> list[psutil.Process]:
    # pytest puts PYTEST_CURRENT_TEST in its environment for each test, and every process a
    # test starts inherits it (the fixtures' env= dicts extend os.environ): the mark tells a
    # test's orphans (a gunicorn worker whose arbiter died, reparented away from pytest)
    # from this machine's other processes, and SESSION_MARK this session's from another's
    found = []
    ours = os.environ[SESSION_MARK]
    for p in psutil.process_iter():
        if p.pid == os.getpid():
            continue
        try:
            env = p.environ()
            if (
                "PYTEST_CURRENT_TEST" in env
                and env.get(SESSION_MARK) == ours
                and p.status() != psutil.STATUS_ZOMBIE
            ):
                found.append(p)
        except psutil.Error:
            continue
    return found


@pytest.fixture(autouse=True)
def no_leftover_processes():
    """A process left running takes a core from the tests after it, and the ones that
    measure speedups on two cores read the host instead (a clean-clone CI run's process-pool
    pair realized 1.49x where a quiet host gives 1.7-1.8x, cause not found): it fails the
    test that started it and is ended."""
    yield
    deadline = time.monotonic() + 5.0
    while (left := _processes_tests_started()) and time.monotonic() < deadline:
        time.sleep(0.05)
    described = []
    for p in left:
        try:
            described.append(f"{p.pid} {' '.join(p.cmdline())[:120]}")
            p.kill()
        except psutil.Error:
            continue
    assert not described, f"processes outlived the test: {described}"


@pytest.fixture
def recorder():
    """A span recorder, active for the test."""
    rec = spans.SpanRecorder()
    spans.activate(rec)
    yield rec
    spans.activate(None)
