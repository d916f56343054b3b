"""probe.pids: what the kernel says of a process's signals."""

from __future__ import annotations

import os
import signal

from probe.pids import ignores


def test_a_signal_set_to_sig_ign_reads_as_ignored_and_a_handled_one_does_not():
    before = signal.signal(signal.SIGUSR1, signal.SIG_IGN)
    try:
        assert ignores(os.getpid(), signal.SIGUSR1)
        signal.signal(signal.SIGUSR1, lambda *a: None)  # caught, not ignored
        assert not ignores(os.getpid(), signal.SIGUSR1)
    finally:
        signal.signal(signal.SIGUSR1, before)


def test_a_process_that_is_not_there_ignores_nothing():
    assert not ignores(
        2**22 + 1, signal.SIGINT
    )  # above the kernel's largest pid (PID_MAX_LIMIT, 2**22)
