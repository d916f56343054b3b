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
it is left to its owner and the main thread's handler does it alone, as before; one the
target sets later replaces the watcher's, and the target is told the one it replaced was
-1, as it would be without probe (trio warns of a collision otherwise); a target
that installs a SIGTERM handler of its own replaces probe's, and its shard closes on the
way out.

The profiled process itself (``probe.launcher``) has the same race with its own handler,
which raises in the main thread so that the target's ``finally`` blocks run: it watches
the same way (``watch_sigterm``) and, where the main thread has not taken the
signal a moment later, closes the run from the watcher. A forked child gets the wakeup
descriptor but not the thread: it is reset there, or the child's own signals would reach
its parent's watcher as if they were the parent's.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from collections.abc import Callable
from typing import Any

from probe.osthreads import begin_probes_thread

__all__ = ["close_then_die_on_sigterm", "unwatch_sigterm", "watch_sigterm"]

# The pipe this process's watcher reads, and the process that made it (a forked child
# inherits the descriptors, not the thread: see _forget_in_child).
_pipe: tuple[int, int] | None = None
_pipe_pid = 0


def close_then_die_on_sigterm(
    close: Callable[[int], None], closing_here: Callable[[], bool]
) -> int | None:
    """From the main thread, where SIGTERM is at its default: on SIGTERM, ``close(signum)``
    and then die of it. ``close`` waits for a closing under way on another thread;
    ``closing_here()``: the calling thread is closing the shard already (on its way out:
    the process ends once that is done). Returns the watcher thread's ident, if any."""

    def handler(signum: int, frame: object) -> None:
        if closing_here():
            return
        signal.signal(signum, signal.SIG_DFL)
        close(signum)
        signal.raise_signal(signum)

    def from_watcher() -> None:
        close(signal.SIGTERM)  # or wait for the main thread's closing, then end it all
        _die_here(signal.SIGTERM)

    signal.signal(signal.SIGTERM, handler)
    return watch_sigterm(handler, from_watcher)


def watch_sigterm(handler: Callable[[int, Any], Any], act: Callable[[], None]) -> int | None:
    """From the main thread, with ``handler`` installed for SIGTERM: on each SIGTERM that
    finds ``handler`` still installed, ``act()`` on a thread of probe's, whether or not
    the main thread gets to run the handler. None, and nothing watched, where the process
    has a wakeup descriptor of its own. Returns the watcher thread's ident."""
    global _pipe, _pipe_pid
    _drop_pipe()  # a parent's, or this process's own watcher before (it ends on EOF)
    read_fd, write_fd = os.pipe()
    os.set_blocking(write_fd, False)  # CPython's handler must never block on it
    previous = _set_wakeup_fd(write_fd, warn_on_full_buffer=False)
    if previous != -1:
        _set_wakeup_fd(previous)  # someone else's: theirs to keep
        os.close(read_fd)
        os.close(write_fd)
        return None
    signal.set_wakeup_fd = _set_wakeup_fd_as_without_probe
    _pipe, _pipe_pid = (read_fd, write_fd), os.getpid()
    watcher = threading.Thread(
        target=_watch, args=(read_fd, handler, act), name="probe-sigterm", daemon=True
    )
    watcher.start()
    return watcher.ident


# CPython's own, which probe calls; the target's calls go through the one below.
_set_wakeup_fd = signal.set_wakeup_fd


def _set_wakeup_fd_as_without_probe(fd: int, /, *, warn_on_full_buffer: bool = True) -> int:
    """``signal.set_wakeup_fd`` as the target sees it while probe watches: where the
    descriptor it replaces is the watcher's, the target gets -1, as it would without
    probe, and the watcher ends (the target's descriptor now gets the signals; its own
    handler is SIGTERM's, or the main thread takes it in its loop). trio's ``run`` warns
    of a collision with another library when the descriptor it replaces is not -1, and
    under ``-W error`` fails; asyncio and others just take it over."""
    previous = _set_wakeup_fd(fd, warn_on_full_buffer=warn_on_full_buffer)
    if _pipe is not None and _pipe_pid == os.getpid() and previous == _pipe[1]:
        _close_write_end()
        return -1
    return previous


def unwatch_sigterm() -> None:
    """From the main thread: this process's watcher ended, its wakeup descriptor reset."""
    _drop_pipe()


def _forget_in_child() -> None:
    """In a forked child, the parent's pipe dropped: its wakeup descriptor reset and both
    ends closed (the child has no watcher thread). Left in place, SIGTERM to the child
    would be written to the parent's watcher: a pool's terminate() would end the parent."""
    global _pipe
    if _pipe is not None and _pipe_pid != os.getpid():
        _reset_wakeup_fd()
        for fd in _pipe:
            _close_quietly(fd)
        _pipe = None


def _drop_pipe() -> None:
    """This process's watcher ended: its wakeup descriptor reset where it is still the
    watcher's (only the main thread may; the others run no Python handler to wake) and
    the pipe's write end closed, on which the watcher closes its read end and returns.
    Only the watcher closes that end: a number closed under a thread still reading it
    could be the target's next file. A parent's pipe, in a forked child, is forgotten
    whole (``_forget_in_child``), which leaves nothing for the rest to do."""
    _forget_in_child()
    _reset_wakeup_fd()
    _close_write_end()


def _reset_wakeup_fd() -> None:
    if _pipe is not None and threading.current_thread() is threading.main_thread():
        previous = _set_wakeup_fd(-1)
        if previous not in (-1, _pipe[1]):
            _set_wakeup_fd(previous)  # set by someone else since: theirs


def _close_write_end() -> None:
    global _pipe
    if _pipe is not None:
        _close_quietly(_pipe[1])
        _pipe = None


def _close_quietly(fd: int) -> None:
    try:
        os.close(fd)
    except OSError:
        pass


os.register_at_fork(after_in_child=_forget_in_child)


def _watch(read_fd: int, handler: Callable[[int, Any], Any], act: Callable[[], None]) -> None:
    begin_probes_thread()  # the signal still reaches it, through the pipe
    while True:
        try:
            numbers = os.read(read_fd, 64)
        except OSError:
            numbers = b""
        if not numbers:  # the write end closed (_drop_pipe): this end is the watcher's
            _close_quietly(read_fd)
            return
        if signal.SIGTERM not in numbers or signal.getsignal(signal.SIGTERM) is not handler:
            continue  # another handled signal, or the target's SIGTERM handler now
        act()


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
