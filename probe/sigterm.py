"""A followed worker's SIGTERM: its shard closed first, then the process dies of the
signal as it would have without probe.

multiprocessing's ``Pool.terminate()`` relies on SIGTERM's default action: it takes the
lock of the workers' task queue for good, then signals them, then joins them. A worker
whose SIGTERM is at its default gets probe's handler, which closes the shard (its last
second kept) and re-raises the signal at its default. A Python handler runs only in the
main thread, between bytecodes, and a signal that arrives between a blocking call's
last check and its system call leaves that call blocked: a pool worker that took
SIGTERM between ``SemLock.acquire``'s ``sem_trywait`` and its ``sem_wait`` waited on
the parent's lock forever, and the pool's join with it (2 runs in ~210 of a fork-and-
spawn pool script, three at once on 2 cores; 2 CI runs in 5). Without probe the default
action ends the process wherever its threads are.

So CPython's own C handler also writes the signal's number to a wakeup file descriptor
(``signal.set_wakeup_fd``), which a thread of probe's reads: whichever comes first, the
main thread's handler or that thread, closes the shard and ends the process by the
signal. Where the process already has a wakeup descriptor (an asyncio loop's, gunicorn's),
it is left to its owner and the main thread's handler does it alone, as before; a target
that installs a SIGTERM handler of its own replaces probe's, and its shard closes on the
way out.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from collections.abc import Callable

from probe.samplers.ticker import keep_interrupts_off_this_thread

__all__ = ["close_then_die_on_sigterm"]

# The pipe this process's watcher reads (a forked child inherits the descriptors, not
# the thread: its own install replaces them).
_pipe: tuple[int, int] | None = None


def close_then_die_on_sigterm(
    close: Callable[[int], None], closing_here: Callable[[], bool]
) -> int | None:
    """From the main thread, where SIGTERM is at its default: on SIGTERM, ``close(signum)``
    and then die of it. ``close`` waits for a closing under way on another thread;
    ``closing_here()``: the calling thread is closing the shard already (on its way out:
    the process ends once that is done). Returns the watcher thread's ident, if any."""
    global _pipe

    def handler(signum: int, frame: object) -> None:
        if closing_here():
            return
        signal.signal(signum, signal.SIG_DFL)
        close(signum)
        signal.raise_signal(signum)

    signal.signal(signal.SIGTERM, handler)
    inherited = _pipe
    _pipe = None
    if inherited is not None:
        for fd in inherited:
            os.close(fd)
    read_fd, write_fd = os.pipe()
    os.set_blocking(write_fd, False)  # CPython's handler must never block on it
    previous = signal.set_wakeup_fd(write_fd, warn_on_full_buffer=False)
    if previous not in (-1, *(inherited or ())):
        signal.set_wakeup_fd(previous)  # someone else's: theirs to keep
        os.close(read_fd)
        os.close(write_fd)
        return None
    _pipe = (read_fd, write_fd)
    watcher = threading.Thread(
        target=_watch, args=(read_fd, handler, close), name="probe-sigterm", daemon=True
    )
    watcher.start()
    return watcher.ident


def _watch(
    read_fd: int, handler: Callable[[int, object], None], close: Callable[[int], None]
) -> None:
    keep_interrupts_off_this_thread()  # the signal still reaches it, through the pipe
    while True:
        try:
            numbers = os.read(read_fd, 64)
        except OSError:
            return
        if not numbers:
            return
        if signal.SIGTERM not in numbers or signal.getsignal(signal.SIGTERM) is not handler:
            continue  # another handled signal, or the target's SIGTERM handler now
        close(signal.SIGTERM)  # or wait for the main thread's closing, then end it all
        _die_here(signal.SIGTERM)


def _die_here(signum: int) -> None:
    """End the process by ``signum`` at its default action, from a thread other than the
    main one (where ``signal.signal`` cannot be called): the disposition reset through
    libc, the signal raised on this thread."""
    try:
        import ctypes

        libc = ctypes.CDLL(None)
        libc.signal.argtypes = [ctypes.c_int, ctypes.c_void_p]
        libc.signal.restype = ctypes.c_void_p
        libc.signal(signum, None)  # SIG_DFL is the null handler
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signum})
        signal.raise_signal(signum)
    except Exception as e:  # no libc to call: end it all the same
        print(f"probe: SIGTERM's default could not be restored ({e})", file=sys.stderr)
    os.kill(os.getpid(), signal.SIGKILL)
