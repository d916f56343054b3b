"""probe.pids: what the kernel says of a process's signals."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from probe.pids import alive, ignores


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


def test_a_process_that_ended_is_not_alive_while_its_parent_has_yet_to_reap_it():
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    try:
        assert alive(os.getpid())
        deadline = time.monotonic() + 30
        while alive(child.pid) and time.monotonic() < deadline:
            time.sleep(0.01)  # not reaped: no wait() until the end
        assert not alive(child.pid)
        stat = Path(f"/proc/{child.pid}/stat").read_text()
        assert stat.rsplit(")", 1)[1].split()[0] == "Z"  # still there, a zombie
    finally:
        child.wait()
    assert not alive(child.pid)
