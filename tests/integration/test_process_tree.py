"""The tree sampler finds a target's descendants from the kernel's per-thread child
lists, as psutil's whole-host scan does, on real processes."""

from __future__ import annotations

import os
import subprocess
import sys

import psutil
import pytest

from probe.samplers.resources import descendant_pids

pytestmark = pytest.mark.integration

# a child that starts a grandchild from a second thread, then waits for its stdin to close
FAMILY = """
import subprocess, sys, threading
kids = []
t = threading.Thread(target=lambda: kids.append(subprocess.Popen([sys.executable, "-c",
    "import sys; sys.stdin.read()"], stdin=subprocess.PIPE)))
t.start(); t.join()
print(kids[0].pid, flush=True)
sys.stdin.read()
kids[0].stdin.close(); kids[0].wait()
"""


def test_descendants_from_the_child_lists_are_psutils_including_a_thread_s_children():
    child = subprocess.Popen(
        [sys.executable, "-c", FAMILY], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        grandchild = int(child.stdout.readline())
        found = descendant_pids(os.getpid())
        expected = [p.pid for p in psutil.Process().children(recursive=True)]
        assert {child.pid, grandchild} <= set(found)
        assert sorted(found) == sorted(expected)
    finally:
        child.stdin.close()
        child.wait(timeout=30)
        child.stdout.close()


def test_a_process_that_is_gone_is_no_such_process():
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    with pytest.raises(psutil.NoSuchProcess):
        descendant_pids(gone.pid)
