"""The work a watched process has done -- its finished ``probe.request`` spans -- and its
live Python heap (``sys.getallocatedblocks()``), kept in the process and read by the
watcher at every memory reading.

Why: a leak retains bytes per request, and the pace of a service's requests follows its
host. On this machine kind the same pure-Python loop's slowest of 40 runs took 1.3-1.8x its
fastest (two sittings, 2026-11-22), CPU time and wall time alike: the work itself ran
slower, nothing was stolen (``benchmarks/host_drift.py``). So a leak judged
against time can seem to slow down by a quarter within a few seconds -- which the
recorded verdict reads as a warm-up's tail. Against the requests done, its pace stays
steady whatever the host's speed.

The count is an 8-byte integer in a file the agent maps into memory (``MAP_SHARED``): the
request's thread adds one to it, the watcher reads it with one ``pread`` per reading. No
lock: under the GIL the increment runs without a thread switch in it (no call, no jump
between its load and store); a count lost now and then would not bend an axis anyway.

The heap gauge is the same kind of file, set by the agent's thread every 0.2 s: kept
Python objects add live blocks, so a floor that rises while they fall is not a leak of
Python objects (``analyzers.leaks.judge_recorded``'s heap).

The counter is probe's span recorder in the process. If something else takes that place
(``probe run`` in the same process), requests stop reaching it: the agent then marks the
count unknown (``UNKNOWN``) and the watcher judges against time. The in-process watchdog
(``probe.watchdog.start``) keeps the same counter without the file, so it judges on the
same axis as ``probe watch``.
"""

from __future__ import annotations

import mmap
import os
import struct
import weakref
from pathlib import Path
from typing import Any

from probe import spans

__all__ = ["UNKNOWN", "RequestCounter", "SharedCount", "count_served_requests", "read_count"]

_COUNT = struct.Struct("<Q")
UNKNOWN = 2**64 - 1  # the count stopped being kept


class _CountingBuffer(spans.ThreadSpans):
    """A thread's span buffer that keeps nothing: finished requests add to the count."""

    __slots__ = ("counter",)
    counter: RequestCounter

    def append(self, record: tuple[Any, ...]) -> None:
        if record[3] == "request":
            self.counter.add()


class SharedCount:
    """An 8-byte count in a file ``path`` (created, 0600), mapped into this process."""

    def __init__(self, path: Path) -> None:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
        try:
            os.ftruncate(fd, _COUNT.size)
            self._map = mmap.mmap(fd, _COUNT.size)
        finally:
            os.close(fd)

    def set(self, count: int) -> None:
        _COUNT.pack_into(self._map, 0, count)

    def give_up(self) -> None:
        """Mark the count unknown."""
        _COUNT.pack_into(self._map, 0, UNKNOWN)


class RequestCounter(spans.SpanRecorder):
    """Counts the process's finished requests: in ``count`` (the in-process watchdog reads
    it), and into ``path`` (a ``SharedCount``) for a watcher in another process."""

    def __init__(self, path: Path | None = None) -> None:
        super().__init__()
        self._shared = SharedCount(path) if path is not None else None
        self.count = 0
        if self._shared is not None:
            # a forked child (gunicorn's workers, a multiprocessing pool) inherits the
            # mapping: its own count written there would overwrite the watched process's
            ref = weakref.ref(self)
            os.register_at_fork(after_in_child=lambda: _unshare(ref))

    def thread_buffer(self) -> spans.ThreadSpans:
        buf = _CountingBuffer(0, None, "")
        buf.counter = self
        self.local.buf = buf
        return buf

    def add(self) -> None:
        self.count += 1
        if self._shared is not None:
            self._shared.set(self.count)

    def start(self) -> bool:
        """Become the process's span recorder, unless one is already in place."""
        if spans.active_recorder() is not None:
            self.give_up()
            return False
        spans.activate(self)
        return True

    @property
    def in_place(self) -> bool:
        return spans.active_recorder() is self

    def done(self) -> int | None:
        """The requests finished so far; None once requests no longer reach the count."""
        return self.count if self.in_place else None

    def stop(self) -> None:
        """Stop counting (the process's span recorder is none again, if it was this)."""
        if self.in_place:
            spans.activate(None)

    def give_up(self) -> None:
        """Mark the count unknown (requests no longer reach this counter)."""
        if self._shared is not None:
            self._shared.give_up()


def count_served_requests() -> None:
    """A served app's requests are its work too: the servers ``probe run`` wraps
    (``probe.serving``: uvicorn, gunicorn, Werkzeug, hypercorn, waitress, Django's) are
    wrapped here the same way as the service imports them, so each HTTP request is a
    ``probe.request`` span, which a ``RequestCounter`` in place counts -- probe watch's
    agent's and the in-process watchdog's. Without it an undecorated app's leak is judged
    against time: a login API keeping 9 KB a session under bursts of load read "no
    significant upward trend" under ``probe watch`` where ``probe run`` read 9.3 KB a
    request (tests/memory_corpus/services/session_api.py). A server that cannot be
    patched leaves the service as it is (``probe.serving.hooks``)."""
    try:
        from probe import serving

        serving.install()
    except Exception:  # noqa: BLE001 -- the service runs on unwrapped; time is the axis
        pass


def _unshare(ref: weakref.ReferenceType[RequestCounter]) -> None:
    counter = ref()
    if counter is not None:
        counter._shared = None


def read_count(fd: int) -> int | None:
    """The count in an open counter file; None when it is not (yet, or no longer) known."""
    try:
        data = os.pread(fd, _COUNT.size, 0)
    except OSError:
        return None
    if len(data) != _COUNT.size:
        return None
    (count,) = _COUNT.unpack(data)
    return None if count == UNKNOWN else int(count)
