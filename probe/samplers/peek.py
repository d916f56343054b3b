"""Stacks read at the tick's instant, before the stack sampler takes the GIL.

A sampler thread needs the GIL to read frames, and it gets it where the thread holding it
lets go: at the first GIL-releasing call (a numpy product, a socket read) within the
switch interval. Frames read then put the Python, and the C that holds the GIL, that ran
before that call into the call. Measured on ``sample_services/batch_scorer.py`` at batch 1
(its loop: ``parse`` 10 us, ``score`` 74 us of three GIL-releasing products, ``label``),
against in-process timers of the same host (``tests/serving_corpus/batching.truth.md``):
``score`` 72% and ``parse`` 8.5% of the run, read with the GIL as 88-93% and 0%.

So the sampler waits for its tick in ``probe._tickpeek`` (C), with the GIL released, and
there reads each wanted thread's frame chain -- code object and instruction per frame --
at the tick, then asks for the GIL. Those reads race the threads; each goes through
``process_vm_readv`` on this process, so an address no longer mapped fails the read
instead of faulting. Here, with the GIL held, every code address is checked (one the
sampler has interned is alive: it keeps a reference; any other must hold a live code
object, ``_tickpeek.code_at``) and every instruction must fall inside its code; a chain
that does not check out is not used, and the thread's frames are read with the GIL as
before. Where the module is not built, not supported on this Python (3.11's frame layout
only), or the kernel refuses the reads (a seccomp filter), nothing is peeked; nor where
``PROBE_GIL_STACKS=1`` asks for the stacks read with the GIL (to compare the two).

At the same instant each read thread's CPU clock is read: the sampler's row for the
thread then ends where its stack was read, not where the GIL came (up to a switch
interval later, and later where the thread holds the GIL in C), so a row's length does
not depend on what its stack was doing. The instant is CLOCK_MONOTONIC's, which
``time.perf_counter_ns`` reads on Linux.

At most ``max_threads`` threads are read a tick, in turn: a read costs one system call
a frame (~0.3-1 us). Which ones is settled before the sampler sleeps, with the GIL; a
thread born during the sleep is found at the tick (``max_born`` of them at most, newest
first) by walking the interpreter's list of threads under the runtime's lock on it,
without the GIL. Without that, a server's thread per request (Django's dev server, or
Django under uvicorn: each view on a thread of its own), ~2 ms of CPU and a few ms of
life, was first read when the GIL came -- at CPython's 5-ms switch interval, after its
work: ``tests/serving_corpus/shop_django.py``'s CPU route had 6 rows in ``crunch`` in a
run where the 0.1-ms interval gave 292.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterable, Mapping
from types import CodeType, ModuleType
from typing import Any, NamedTuple

__all__ = ["PeekedFrame", "TickPeek", "TickRead", "peek_module"]


def peek_module() -> ModuleType | None:
    """``probe._tickpeek`` where it is built, its reads work here and the environment
    does not ask for the GIL's stacks (``PROBE_GIL_STACKS=1``); else None."""
    if os.environ.get("PROBE_GIL_STACKS", "") not in ("", "0"):
        return None
    try:
        from probe import _tickpeek
    except ImportError:
        return None
    return _tickpeek if _tickpeek.USABLE else None


class PeekedFrame:
    """A frame as the tick found it: what the stack sampler reads of a frame object."""

    __slots__ = ("f_back", "f_code", "f_lasti")

    def __init__(self, code: CodeType, lasti: int, back: PeekedFrame | None) -> None:
        self.f_code = code
        self.f_lasti = lasti
        self.f_back = back


class TickRead(NamedTuple):
    """One thread as read at the tick: its frame chain (leaf-first addresses, None where
    a read failed), its kernel TID and its CPU time then (ns, -1 where unread)."""

    chain: tuple[int, ...] | None
    tid: int
    cpu_ns: int
    # the text of its /proc/self/task/TID/syscall and, where it says more, of its stat or
    # its descriptor's link (probe.samplers.kernel parses them); None where not read
    kernel: tuple[str, str | None] | None = None
    # its time on a run queue so far (ns, its schedstat), -1 where not read: it did not
    # run since its last sample (kernel.RunQueueDelays reads it with the GIL otherwise)
    queued_ns: int = -1


class TickPeek:
    """Waits for the stack sampler's ticks and reads threads' frames at each; see the
    module docstring. ``wait`` and ``wake`` are a ``Ticker``'s waiter."""

    def __init__(
        self,
        *,
        max_threads: int = 16,
        max_born: int = 16,
        max_depth: int = 128,
        module: Any = None,
    ) -> None:
        self._module = module if module is not None else peek_module()
        self.max_threads = max_threads
        self.max_born = max_born  # threads born since the last tick, read at it: at most
        self.max_depth = max_depth
        # wake() writes here, and the wait ends: a stop needs no tick to pass
        self._pipe: tuple[int, int] | None = os.pipe() if self._module is not None else None
        self._reads: dict[int, TickRead] = {}
        self.at_ns = 0  # the instant of the last tick's reads (CLOCK_MONOTONIC)
        self._turn = 0
        self.read = 0  # threads' stacks taken from the tick's reads
        self.refused = 0  # read at the tick but not checked out: read with the GIL
        self.born = 0  # threads read at a tick that were born since the one before
        # read at the tick with no Python frame (a new thread waiting for the GIL to start,
        # one past its last frame): read with the GIL; not a torn read. A Django dev
        # server's run had 145 of these against 9 torn (2026-11-29)
        self.frameless = 0

    @property
    def available(self) -> bool:
        return self._module is not None

    def wait(
        self,
        timeout_s: float,
        exclude: Iterable[int] = (),
        last: Mapping[int, tuple[int, int]] | None = None,
        kernel: tuple[float, tuple[int, ...], int] | None = None,
    ) -> bool:
        """Sleep ``timeout_s`` with the GIL released, then read the wanted threads' frame
        chains and CPU clocks; True (nothing read) when ``wake`` was called. ``last``: by
        TID, the (instant, CPU clock) of the thread's last sample; ``kernel``: (a busy
        share, the system call numbers that wait on a descriptor, reads at most): the
        kernel's state is read, at the tick, of each thread that ran since its last sample
        but for less than the busy share of the time since (one that did not run is
        where it was; one that ran throughout waited on nothing)."""
        module = self._module
        if module is None or self._pipe is None:
            return True  # nothing to read with, or closed
        skip = {threading.get_ident(), *exclude}
        known = module.thread_states()
        states = [(i, s) for i, s in known.items() if i not in skip]
        if len(states) > self.max_threads:  # each thread's turn at the reads
            self._turn = (self._turn + self.max_threads) % len(states)
            states = (states[self._turn :] + states[: self._turn])[: self.max_threads]
        last = last or {}
        threads = [(state, tid, *last.get(tid, (-1, -1))) for _, (state, tid) in states]
        # threads born while the sampler slept are read at the tick too: a thread per
        # request that lives a few ms is otherwise first read when the GIL comes, up to
        # a switch interval later, when its work is done (module docstring)
        born = (tuple(state for state, _ in known.values()), tuple(skip), self.max_born)
        got = module.wait_and_peek(self._pipe[0], timeout_s, threads, self.max_depth, kernel, born)
        if got is None:
            return True
        self.at_ns, chains, cpus, kernels, new, queued = got
        self.born += len(new)
        read = [(ident, tid) for ident, (_, tid) in states] + new
        self._reads = {
            ident: TickRead(chain, tid, cpu, texts, wait)
            for (ident, tid), chain, cpu, texts, wait in zip(
                read, chains, cpus, kernels, queued, strict=True
            )
        }
        return False

    def wake(self) -> None:
        if self._pipe is not None:
            os.write(self._pipe[1], b"\0")

    def take(self) -> dict[int, TickRead]:
        """The threads read at the last tick (by thread ident), once; ``at_ns`` says when."""
        reads, self._reads = self._reads, {}
        return reads

    def frame(
        self, chain: tuple[int, ...] | None, known: Callable[[int], CodeType | None]
    ) -> PeekedFrame | None:
        """The leaf ``PeekedFrame`` of a chain whose every frame checks out, else None.
        ``known``: a code object the caller holds a reference to, by its address."""
        frames = _checked(chain, known, self._module) if chain else None
        if frames is None:
            if chain == ():
                self.frameless += 1
            else:
                self.refused += chain is not None
            return None
        self.read += 1
        frame: PeekedFrame | None = None
        for code, lasti in reversed(frames):  # root first
            frame = PeekedFrame(code, lasti, frame)
        return frame

    def close(self) -> None:
        if self._pipe is not None:
            for fd in self._pipe:
                os.close(fd)
            self._pipe = None


def _checked(
    chain: tuple[int, ...], known: Callable[[int], CodeType | None], module: Any
) -> list[tuple[CodeType, int]] | None:
    """Leaf first (code, instruction offset) of each frame; None if one does not check."""
    out: list[tuple[CodeType, int]] = []
    offset = module.CODE_OFFSET
    for k in range(0, len(chain), 3):
        address, instruction = chain[k + 1], chain[k + 2]
        code = known(address)
        if code is None:
            code = module.code_at(address)
            if code is None:
                return None
        lasti = instruction - address - offset
        if lasti < 0:
            continue  # pushed, its first instruction not yet run (CPython skips these)
        if lasti >= len(code.co_code):
            return None
        out.append((code, lasti))
    return out or None
