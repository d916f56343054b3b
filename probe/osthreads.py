"""Probe's threads named in the operating system, where tools outside Python look.

CPython 3.11 leaves a thread's OS name as the process's ("python"), so ``top -H``,
``ps -L``, ``perf`` and ``/proc/PID/task/*/comm`` showed probe's sampler beside a
service's threads as one more "python" (a served app under ``probe run``: 5 threads, all
"python", 2026-12-06). Each of probe's threads in the target names itself after its
``threading`` name, as the kernel keeps it: 15 bytes.

Through ``/proc/thread-self/comm`` (Linux 3.17 and later), a file write: no ctypes to
import at the start of a run. Elsewhere, or where /proc is not mounted, threads keep the
name they had.
"""

from __future__ import annotations

__all__ = ["name_this_os_thread"]

COMM_BYTES = 15  # TASK_COMM_LEN less its terminating NUL


def name_this_os_thread(name: str, comm: str = "/proc/thread-self/comm") -> None:
    """The calling thread's OS name, cut to what the kernel keeps."""
    cut = name.encode("utf-8", "replace")[:COMM_BYTES]
    try:
        with open(comm, "wb", buffering=0) as f:
            f.write(cut)
    except OSError:  # not Linux, no /proc, or a name the kernel refuses
        pass
