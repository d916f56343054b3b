"""Probe's threads in the target, as the operating system sees them: named, and deaf to
the signals that should interrupt the target's own threads.

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

import signal
import threading

__all__ = ["begin_probes_thread", "name_this_os_thread"]

COMM_BYTES = 15  # TASK_COMM_LEN less its terminating NUL


def name_this_os_thread(name: str, comm: str = "/proc/thread-self/comm") -> None:
    """The calling thread's OS name, cut to what the kernel keeps."""
    cut = name.encode("utf-8", "replace")[:COMM_BYTES]
    try:
        with open(comm, "wb", buffering=0) as f:
            f.write(cut)
    except OSError:  # not Linux, no /proc, or a name the kernel refuses
        pass


def begin_probes_thread() -> None:
    """First thing on each of probe's threads in the target: SIGINT and SIGTERM blocked
    on it, so that the kernel delivers them to the target's threads, where they interrupt
    a blocking call of its main thread promptly, as they would without probe; and its OS
    name set to its ``threading`` name, so that tools outside Python tell it from the
    target's threads (above)."""
    if hasattr(signal, "pthread_sigmask"):
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
    name_this_os_thread(threading.current_thread().name)
