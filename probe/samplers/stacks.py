"""The stack sampler: every thread's stack, on-CPU vs waiting, and what it waits on.

Each tick reads ``sys._current_frames()`` and each thread's CPU clock. A row records, for
one thread, the interval since its previous sample (``wall_ns``), the CPU it used in that
interval (``cpu_ns``, exact), the stack at the sample's instant, and ``wait_reason``.
Where ``probe._tickpeek`` is built, a thread's stack is the one read at the tick itself,
before the sampler had the GIL (``probe.samplers.peek``: read with the GIL, the code
before a GIL-releasing call is charged to the call); the interval still ends when the
sampler has the GIL, so a stretch the target held the GIL for after the tick goes to
the stack it held it in.
A thread born since the previous tick has its first row at first sight (its CPU since it
began; half the tick for its age, the expectation when the start is unknown): a server's
thread per connection lives a few milliseconds and is seen once if at all.

* a blocking call at the leaf (``waits.WaitClassifier``: network, disk, sleep, lock,
  subprocess, gpu_sync) -- the thread was waiting at that instant. The interval's CPU was
  spent before it blocked, elsewhere: analysis must not charge it to this stack
  (``analyzers.attribution``). A thread on-CPU for the whole interval was not blocked,
  whatever its leaf call is named (``d.get(k)`` reads like ``queue.get``);
* otherwise ``""`` when the thread ran the whole interval, ``gil`` when it was runnable but
  waited while another of our threads ran, else ``unknown`` (the OS scheduler).

A thread that has not run since the previous tick -- its CPU clock unchanged to the
nanosecond, its leaf frame and instruction the same -- keeps the stack it had: it is not
walked again (a pool's parked threads are most of a tick's work otherwise).

Bounded memory: code objects and stacks are interned (at most ``max_stacks`` distinct
stacks; past that new stacks share one overflow id), rows are handed to the collector
every second, and consecutive fully-waiting intervals in the same stack are merged.

Pending rows are held column-wise in typed arrays (``_SampleColumns``), not as Python
objects. This thread shares pymalloc's arenas with the target: a second's worth of row
objects, allocated one every 10 ms in whichever arena the target is filling, kept each
arena the target had emptied from going back to the OS. On
``sample_services/healthy_service.py``, whose cache is filled and cleared every second,
RSS stopped falling at each clear and its floor climbed ~2 MB/s for the whole run (a
"leak" the service does not have: without probe it saw-tooths 75-120 MB). An array's
buffer, once past pymalloc's 512-byte limit, comes from the system allocator instead
(``benchmarks/allocator_floor.py``: floor 2.1 -> 1.2 MB/s, swing 6 -> 38 MB; 0.2 MB/s and
50 MB unobserved). The rest is any thread's allocations at all: a bare thread that made
and dropped a few tuples every 10 ms moved the floor by ~1 MB/s too.
"""

from __future__ import annotations

import random
import sys
import threading
import time
from array import array
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from types import CodeType, FrameType
from typing import Any

from probe.samplers import kernel
from probe.samplers.collection import collector_held_off
from probe.samplers.peek import PeekedFrame, TickPeek, TickRead
from probe.samplers.thread_ends import ThreadEnd, ThreadEnds
from probe.samplers.waits import WaitClassifier, enclosing_reason

# a sampled interval of a thread: (tid, stack, wall, cpu, wait for a CPU, instant), in ns
_Row = tuple[int, int, int, int, int, int]

__all__ = ["OVERFLOW_STACK_ID", "StackSampler", "thread_cpu_ns"]

OVERFLOW_STACK_ID = 0
# A thread on-CPU for under this fraction of an interval counts as fully waiting
# for merging purposes (a blocked thread still wakes briefly: signals, timeouts).
_IDLE_CPU_FRACTION = 0.05
# A thread on-CPU for at least this fraction of an interval has no wait reason.
_BUSY_CPU_FRACTION = 0.95


class _Texts:
    """Short texts interned as small codes (a row's wait reason, its kernel state)."""

    def __init__(self) -> None:
        self.texts: list[str] = [""]
        self._codes: dict[str, int] = {"": 0}

    def code(self, text: str) -> int:
        code = self._codes.get(text)
        if code is None:
            code = self._codes[text] = len(self.texts)
            self.texts.append(text)
        return code


class _SampleColumns:
    """The ``samples`` rows not yet drained, one typed array per column (see the module
    docstring): ts, tid, stack, wall, cpu, reason and kernel state (codes of
    ``reasons``/``states``), count, run-queue delay."""

    def __init__(self) -> None:
        self.reasons, self.states = _Texts(), _Texts()
        self.clear()

    def clear(self) -> None:
        self.ts, self.tid, self.stack = array("q"), array("q"), array("q")
        self.wall, self.cpu, self.count = array("q"), array("q"), array("q")
        self.reason, self.state = array("H"), array("H")
        self.queued = array("q")

    def append(
        self,
        ts: int,
        tid: int,
        stack: int,
        wall: int,
        cpu: int,
        reason: int,
        state: int,
        queued: int = 0,
    ) -> int:
        """Add one row; returns its index."""
        self.ts.append(ts)
        self.queued.append(queued)
        self.tid.append(tid)
        self.stack.append(stack)
        self.wall.append(wall)
        self.cpu.append(cpu)
        self.reason.append(reason)
        self.state.append(state)
        self.count.append(1)
        return len(self.ts) - 1

    def extend_row(self, k: int, ts: int, wall: int, cpu: int, queued: int = 0) -> None:
        """Merge one more interval into row ``k``."""
        self.ts[k] = ts
        self.wall[k] += wall
        self.cpu[k] += cpu
        self.queued[k] += queued
        self.count[k] += 1

    def rows(self) -> list[list[Any]]:
        reasons, states = self.reasons.texts, self.states.texts
        return [
            [ts, tid, sid, wall, cpu, reasons[r], n, states[k], q]
            for ts, tid, sid, wall, cpu, r, n, k, q in zip(
                self.ts,
                self.tid,
                self.stack,
                self.wall,
                self.cpu,
                self.reason,
                self.count,
                self.state,
                self.queued,
                strict=True,
            )
        ]


def _thread_clock_id(native_id: int) -> int:
    # Linux encodes a thread's CPU clock as MAKE_THREAD_CPUCLOCK(tid, CPUCLOCK_SCHED):
    # (~tid << 3) | 4 (per-thread) | 2 (sched). Unlike pthread_getcpuclockid on a stale
    # pthread_t, a TID that has exited just fails with EINVAL.
    return ((~native_id) << 3) | 6


def thread_cpu_ns(native_id: int) -> int | None:
    """CPU time of a thread of this process, in ns (None if it has exited, or if the id
    is no OS thread id: a thread seen in the frames before `threading` has its native id
    is keyed by its pthread ident, which overflows a clockid_t)."""
    try:
        return time.clock_gettime_ns(_thread_clock_id(native_id))
    except (OSError, OverflowError):
        return None


def _interval(last: tuple[int, int] | None, ts: int, cpu: int, before: int) -> tuple[int, int]:
    """(wall, CPU) of a thread's interval ending at ``ts`` with its CPU clock at ``cpu``:
    since its ``last`` reading (instant, CPU clock), or, for a thread born since the last
    tick (``before``), since it started. All a newborn's CPU is this interval's. A thread
    that lives less than a tick (a server's thread per connection: a few ms) is seen once
    or never: skipped, its work was invisible (a Flask route's 2 ms of CPU a request read
    as none); its CPU after this reading comes with its end, and one never read is
    placed there too (StackSampler._ends). When in the interval it began is not known:
    uniformly, its expected age is half the interval (at least its CPU)."""
    if last is None:
        span = max(ts - before, 0)
        cpu_d = min(max(cpu, 0), span)
        return max(cpu_d, span // 2), cpu_d
    wall = ts - last[0]
    return wall, min(max(cpu - last[1], 0), wall)


def _threads_by_ident() -> dict[int, threading.Thread]:
    return {t.ident: t for t in threading.enumerate() if t.ident is not None}


class StackSampler:
    """Samples the stacks of this process's Python threads; see the module docstring."""

    def __init__(
        self,
        *,
        clock: Callable[[], int] = time.perf_counter_ns,
        current_frames: Callable[[], dict[int, FrameType]] = sys._current_frames,
        thread_cpu: Callable[[int], int | None] = thread_cpu_ns,
        threads: Callable[[], dict[int, threading.Thread]] = _threads_by_ident,
        exclude: Iterable[int] = (),
        max_depth: int = 128,
        max_stacks: int = 50_000,
        root_marker: tuple[str, str] | None = ("runpy.py", "_run_code"),
        kernel_states: kernel.KernelStates | None = None,
        max_kernel_reads: int = 16,
        run_queue: kernel.RunQueueDelays | None = None,
        max_run_queue_reads: int = 32,
        peek: TickPeek | None = None,
        thread_ends: ThreadEnds | None = None,
    ) -> None:
        self._clock = clock
        # threads' own readings as they end: the CPU since their last tick is theirs too
        self.thread_ends = thread_ends
        self.unseen_threads = 0  # began and ended between two ticks: never read
        self.unplaced_ns = 0  # CPU of ended threads no reading placed, in no stack
        self.ended_tails = 0  # rows of CPU since a thread's last reading, at its end
        self.unseen_placed_ns = 0  # the unread threads' CPU, in stacks drawn (_drawn)
        # (stack, weight) of the last threads read that lived less than a tick: the stacks
        # the unread ones are drawn from (_unseen); seeded, so a run's draws repeat
        self._short: deque[tuple[int, float]] = deque(maxlen=32)
        self._draw = random.Random(0)
        # stacks read at the tick's instant, where it can (the ticker waits in it)
        self.peek = peek if peek is not None and peek.available else None
        self._current_frames = current_frames
        self._thread_cpu = thread_cpu
        self._threads = threads
        self.exclude: set[int] = set(exclude)
        self._max_depth = max_depth
        self._max_stacks = max_stacks
        self._root_marker = root_marker
        self._root_fids: set[int] = set()  # frame ids of root_marker functions
        self._classifier = WaitClassifier()
        self._lock = threading.Lock()
        # The kernel is asked only where frame and CPU clock leave doubt: a thread mostly
        # off-CPU in a native call no rule names. A read costs ~20 us (open, read, close
        # of /proc/self/task/TID/syscall, 9-11 us each measured here, plus a readlink for
        # a call on a descriptor): 16 a tick keep a 10-ms tick's worst case near 3%.
        self.kernel = kernel_states if kernel_states is not None else kernel.KernelStates()
        self._max_kernel_reads = max_kernel_reads
        # Each thread that ran since the last tick: its run-queue delay (one pread, ~2-4
        # us), so that an interval's time off the CPU splits into waiting for a core and
        # blocked (see kernel.RunQueueDelays). A thread that did not run is not read: its
        # delay is credited only when it gets a CPU. At most max_run_queue_reads a tick,
        # the threads taken in turn: 32 reads cost ~0.1 ms (2.4-3.8 us each,
        # benchmarks/sampler_tick_cost.py), 1% of a 10-ms tick, where 200 threads waking
        # every millisecond made each tick 2-8 ms longer read all. A thread not read
        # this tick is read at a later one that finds it run: its delay since its last
        # reading goes to that row, as much as the row's time off the CPU holds.
        self.run_queue = run_queue if run_queue is not None else kernel.RunQueueDelays()
        self._max_run_queue_reads = max_run_queue_reads
        self._run_queue_budget = 0
        self.run_queue_reads_skipped = 0  # threads that ran, not read: the budget spent
        self._queued_at: dict[int, int] = {}  # tid -> its delay at its last reading
        self._kernel_budget = 0
        self.kernel_reads_skipped = 0  # asked for beyond the budget
        self.kernel_states_stale = 0  # read after the thread ran on: not used
        self.kernel_states_at_tick = 0  # read at the tick with the frames (peek)
        self.ended_at_tick = 0  # rows of threads read at the tick, ended before the GIL
        # tid -> its /proc texts read at this tick, parsed when a rule asks for its state
        self._tick_kernel: dict[int, tuple[str, str | None]] = {}
        # what the tick reader needs to read kernel states (peek.wait's ``kernel``)
        self._kernel_ask = (
            (_BUSY_CPU_FRACTION, self.kernel.descriptor_calls, max_kernel_reads)
            if self.peek is not None and max_kernel_reads > 0
            else None
        )
        self._native_leaf: set[int] = set()  # stacks whose leaf is in an unnamed call

        self._frame_ids: dict[int, int] = {}  # id(code) -> frame id
        self._codes: list[CodeType] = []
        self._stack_ids: dict[tuple[Any, ...], int] = {}
        self._stack_reason: dict[int, str | None] = {OVERFLOW_STACK_ID: None}
        self._tid: dict[int, int] = {}  # Python ident -> thread id (OS TID when known)
        self._last: dict[int, tuple[int, int]] = {}  # tid -> (ts_ns, cpu_ns)
        self._open: dict[int, int] = {}  # tid -> index of its last pending row (merging)
        # tid -> (ident, id of its code, instruction) of the leaf frame read this tick: the
        # kernel's answer is checked against it (_kernel_state). Numbers, not the frame.
        self._leaf: dict[int, tuple[int, int, int]] = {}
        self._stack_of: dict[int, int] = {}  # tid -> the stack id read at its last tick

        self._rows = _SampleColumns()
        self._new_frames: list[tuple[Any, ...]] = []
        self._new_stacks: list[tuple[Any, ...]] = [(OVERFLOW_STACK_ID, "", -1, "<overflow>")]
        self._new_threads: list[tuple[Any, ...]] = []
        self.ticks = 0
        self.last_ns = 0  # the instant of the last tick
        self.gil_waiters = 0  # threads of the last tick that waited for the GIL

    # -- interning ---------------------------------------------------------------------
    def _frame_id(self, code: CodeType) -> int:
        fid = self._frame_ids.get(id(code))
        if fid is None:
            fid = len(self._frame_ids) + 1
            self._frame_ids[id(code)] = fid
            self._codes.append(code)  # keeps id(code) from being reused
            marker = self._root_marker
            # runpy is frozen in 3.11+ builds ("<frozen runpy>"), a file elsewhere.
            if (
                marker
                and code.co_name == marker[1]
                and (code.co_filename.endswith(marker[0]) or code.co_filename == "<frozen runpy>")
            ):
                self._root_fids.add(fid)
            self._new_frames.append((fid, code.co_qualname, code.co_filename, code.co_firstlineno))
        return fid

    def _known_code(self, address: int) -> CodeType | None:
        """An interned code object (kept alive by the sampler) by its address."""
        fid = self._frame_ids.get(address)
        return self._codes[fid - 1] if fid is not None else None

    def _stack_id(self, frame: FrameType | PeekedFrame) -> int:
        # Per sample: frame ids by id(code) (ints hash fast; code objects hash by content)
        # plus the leaf's line and callee from the classifier's per-call-site cache.
        callee, reason, line = self._classifier.classify(frame.f_code, frame.f_lasti)
        ids: list[int] = []
        frame_id = self._frame_ids.get
        f: FrameType | PeekedFrame | None = frame
        depth = 0
        while f is not None and depth < self._max_depth:
            code = f.f_code
            fid = frame_id(id(code))
            ids.append(fid if fid is not None else self._frame_id(code))
            f = f.f_back
            depth += 1
        sid, new = self._intern((*ids, line, callee))
        if not new:
            return sid
        ids.reverse()  # root first
        if self._root_fids:
            # Drop the launcher's frames (probe CLI, runpy) above the target's module.
            for k, fid in enumerate(ids[:-1]):
                if fid in self._root_fids:
                    ids = ids[k + 1 :]
                    break
        if reason is not None:
            codes = self._codes
            reason = enclosing_reason(codes[fid - 1].co_filename for fid in ids) or reason
        self._stack_reason[sid] = reason
        if callee and reason is None:
            self._native_leaf.add(sid)
        self._new_stacks.append((sid, ";".join(map(str, ids)), line, callee))
        return sid

    def await_stack_id(self, chain: list[FrameType]) -> int:
        """The stack id of a suspended coroutine chain (``probe.samplers.tasks``):
        outermost coroutine first, the innermost one's await line as the leaf and
        ``<await>`` as its call, so it never shares an id with a thread's stack."""
        with self._lock:
            ids = [self._frame_id(f.f_code) for f in chain]
            line = chain[-1].f_lineno or 0
            sid, new = self._intern((*reversed(ids), line, "<await>"))
            if new:
                self._stack_reason[sid] = None
                self._new_stacks.append((sid, ";".join(map(str, ids)), line, "<await>"))
            return sid

    def _intern(self, key: tuple[Any, ...]) -> tuple[int, bool]:
        """(the stack id of ``key``, whether it is new); past ``max_stacks`` every new
        stack is the overflow stack."""
        sid = self._stack_ids.get(key)
        if sid is not None:
            return sid, False
        if len(self._stack_ids) >= self._max_stacks:
            return OVERFLOW_STACK_ID, False
        sid = len(self._stack_ids) + 1
        self._stack_ids[key] = sid
        return sid, True

    def thread_id_of(self, ident: int) -> int | None:
        """The thread id of a Python thread ident, once the sampler has seen it."""
        return self._tid.get(ident)

    def _reading(
        self, tid: int, got: TickRead | None, tick_ns: int, now: int
    ) -> tuple[int, int | None, int]:
        """(instant, CPU clock, wait for a CPU so far or -1) of thread ``tid``: the tick's
        reading where the tick read that thread, else its CPU clock now (None: gone)."""
        if got is not None and got.tid == tid and got.cpu_ns >= 0:
            if got.kernel is not None:
                self._tick_kernel[tid] = got.kernel
            # its wait for a CPU so far, read with its CPU clock (-1: it did not run)
            return tick_ns, got.cpu_ns, got.queued_ns
        return now, self._thread_cpu(tid), -1

    def _register_thread(self, ident: int, now: int) -> int:
        """The thread's key (OS TID when known) for a Python ident seen in the frames."""
        thread = self._threads().get(ident)
        native = thread.native_id if thread is not None else None
        name = thread.name if thread is not None else f"thread-{ident}"
        tid = native if native is not None else ident
        self._tid[ident] = tid
        self._new_threads.append((tid, ident, name, now))
        return tid

    # -- sampling ----------------------------------------------------------------------
    def wait(self, timeout_s: float) -> bool:
        """Wait for the next tick, reading stacks at its instant (a ``Ticker``'s waiter:
        only with ``peek``); True when woken to stop."""
        assert self.peek is not None
        ask = self._kernel_ask if self.kernel.available else None
        return self.peek.wait(timeout_s, self.exclude, self._last, ask)

    def wake(self) -> None:
        assert self.peek is not None
        self.peek.wake()

    def sample(self) -> None:
        """Take one sample of every thread (the sampler thread calls this each tick)."""
        with self._lock:
            self._sample()

    def _sample(self) -> None:
        before = self.last_ns
        now = self.last_ns = self._clock()
        # No collection while the frames are read and held (crashes on 3.11: see
        # probe.samplers.collection); the frames are dropped inside the block.
        # taken before the frames: a thread whose end is not taken yet is still in them
        ended = self.thread_ends.take() if self.thread_ends is not None else []
        with collector_held_off():
            frames = self._current_frames()
            # The dict holds our own running frame, whose locals hold the dict: returning
            # would leave a reference cycle keeping every sampled frame object -- and,
            # once those frames exit, the target's locals (large arrays) -- alive until
            # the cyclic GC runs. Measured: 2x page faults and +40% wall time on numpy
            # FFT code.
            frames.pop(threading.get_ident(), None)
            seen = self._read_frames(now, frames, before, ended)
            del frames
        self._emit_all(seen)

    def _read_frames(
        self,
        now: int,
        frames: dict[int, FrameType],
        before: int,
        ended: Sequence[ThreadEnd] = (),
    ) -> list[_Row]:
        """Each sampled thread's (tid, stack, wall, cpu, wait for a CPU, instant) since its
        last sample; a thread born since the last tick (``before``), since it started. A
        thread read at the tick (``peek``) is timed there: its CPU clock was read with its
        frames, and its row ends at that instant, not at ``now`` (the GIL's)."""
        exclude = self.exclude
        seen: list[_Row] = []  # tid, stack, wall, cpu, queued, ts
        live: set[int] = set()
        self._run_queue_budget = self._max_run_queue_reads
        at_tick = self.peek.take() if self.peek is not None else {}
        tick_ns = self.peek.at_ns if self.peek is not None else now
        self._tick_kernel.clear()
        threads: Iterable[tuple[int, FrameType]] = frames.items()
        if len(frames) > self._max_run_queue_reads:  # each thread's turn at the reads
            start = self.ticks % len(frames)
            listed = list(frames.items())
            threads = listed[start:] + listed[:start]
        for ident, frame in threads:
            if ident in exclude:
                continue
            tid = self._tid.get(ident)
            if tid is None:
                tid = self._register_thread(ident, now)
            got = at_tick.get(ident)
            ts, cpu, tick_queued = self._reading(tid, got, tick_ns, now)
            if cpu is None:
                # The ident outlived its thread: a new thread reused it between two ticks
                # (the tick read the new one, if it read the ident)
                tid = self._register_thread(ident, now)
                ts, cpu, tick_queued = self._reading(tid, got, tick_ns, now)
                if cpu is None:
                    continue
            live.add(tid)
            last = self._last.get(tid)
            self._last[tid] = (ts, cpu)
            if last is None and (self.ticks == 0 or now <= before):
                # there from the start: its CPU (and wait for a CPU) so far is not this
                # interval's
                self._queued(tid, ran=True, born=False, off_cpu=0, at_tick=tick_queued)
                continue
            wall, cpu_d = _interval(last, ts, cpu, before)
            if last is not None and wall <= 0:
                continue
            read: FrameType | PeekedFrame = frame
            if got is not None and self.peek is not None:
                read = self.peek.frame(got.chain, self._known_code) or frame
            leaf = (ident, id(read.f_code), read.f_lasti)
            sid = self._stack_of.get(tid)
            if sid is None or last is None or cpu != last[1] or leaf != self._leaf.get(tid):
                # A thread that has not run since the last tick -- its CPU clock to the
                # nanosecond, its leaf frame and instruction as they were -- cannot be in
                # another stack: a pool's parked threads are not walked again (200 of
                # them: ~0.9 ms a tick, benchmarks/sampler_tick_cost.py).
                sid = self._stack_id(read)
            ran = last is None or cpu != last[1]
            queued = self._queued(tid, ran, last is None, wall - cpu_d, tick_queued)
            seen.append((tid, sid, wall, cpu_d, queued, ts))
            self._leaf[tid] = leaf
            self._stack_of[tid] = sid
        names = {end.ident: end.name for end in ended}  # of threads gone: their own reading
        for ident, got in at_tick.items():
            if ident not in frames and ident not in exclude:
                name = names.get(ident, f"thread-{ident}")
                row = self._ended_since_the_tick(ident, got, tick_ns, before, now, name)
                if row is not None:
                    seen.append(row)
        seen += self._ends(ended, interval_ns=now - before if before else 0)
        self.ticks += 1
        if len(self._last) > len(live):
            for tid in [t for t in self._last if t not in live]:
                del self._last[tid]
                self._queued_at.pop(tid, None)
                self.run_queue.forget(tid)
                self._open.pop(tid, None)
                self._leaf.pop(tid, None)
                self._stack_of.pop(tid, None)
            for ident in [i for i in self._tid if i not in frames]:
                del self._tid[ident]
        return seen

    def _ended_since_the_tick(
        self, ident: int, got: TickRead, tick_ns: int, before: int, now: int, name: str
    ) -> _Row | None:
        """The row of a thread read at the tick that ended before the sampler got the GIL,
        from the tick's reads alone: its frame chain, TID and CPU clock. Without it that
        interval of the thread is lost: Django under uvicorn runs each request's view on
        a thread of its own (asgiref), and at the target's own 5-ms switch interval the
        two Django tests of test_http_spans lost enough of the views' rows to fail 5
        times in 8 (1 in 8 at 0.1 ms)."""
        if self.peek is None or got.cpu_ns < 0:
            return None
        read = self.peek.frame(got.chain, self._known_code)
        if read is None:
            return None
        tid = self._tid.get(ident)
        if tid != got.tid:  # never sampled with the GIL: named by its end, if recorded
            tid = self._tid[ident] = got.tid
            self._new_threads.append((tid, ident, name, now))
        wall, cpu_d = _interval(self._last.get(tid), tick_ns, got.cpu_ns, before)
        if wall <= 0:
            return None
        if got.kernel is not None:
            self._tick_kernel[tid] = got.kernel
        # its leaf is not checked again (_kernel_state): no later read is of this thread
        self._leaf.pop(tid, None)
        self.ended_at_tick += 1
        sid = self._stack_of[tid] = self._stack_id(read)
        self._last[tid] = (tick_ns, got.cpu_ns)  # where its end's tail starts (_tail)
        return (tid, sid, wall, cpu_d, 0, tick_ns)

    def _ends(self, ended: Sequence[ThreadEnd], *, interval_ns: int) -> list[_Row]:
        """Rows from the threads' own readings at their ends (``ThreadEnds``): the CPU of
        a thread read before, since its last reading (``_tail``); then that of each
        thread never read (``_unseen``). ``interval_ns``: this tick's, from the last."""
        rows: list[_Row] = []
        unseen: list[ThreadEnd] = []
        for end in ended:
            if end.ident in self.exclude:
                continue
            if end.tid not in self._last:
                unseen.append(end)
            elif end.tid in self._stack_of:  # else read only once, at the first tick
                tail = self._tail(end, interval_ns)
                if tail is not None:
                    rows.append(tail)
        for end in unseen:
            row = self._unseen(end)
            if row is not None:
                rows.append(row)
        return rows

    def _tail(self, end: ThreadEnd, interval_ns: int) -> _Row | None:
        """The row of the CPU a thread used between its last reading and its end. Only
        the CPU is known: the row is as long as it (what the thread waited on meanwhile,
        no reading says). Its stack: the one read last where it was running there (the
        call that CPU most likely finished); where it was blocked (a pool's worker back
        in its queue's ``get``), the CPU came after, somewhere no reading saw, and takes
        a stack drawn as an unread thread's does (``_drawn``). A thread that lived less
        than a tick and was read running joins the pool of those stacks."""
        last, sid = self._last[end.tid], self._stack_of[end.tid]
        running = not self._stack_reason.get(sid)
        life = end.end_ns - end.start_ns
        if running and 0 < life < interval_ns:
            # how much CPU of threads like it went unread, per one read (Horvitz-Thompson:
            # one that lived L of a tick T is read with probability L/T, so it stands for
            # T/L of them): its CPU x (T/L - 1), at most T - L (its CPU is at most L)
            self._short.append((sid, max(end.cpu_ns, 0) * (interval_ns - life) / life))
        cpu_d = min(end.cpu_ns - last[1], end.end_ns - last[0])
        if cpu_d <= 0:
            return None  # read after it ended (still in its last frames), or idle since
        self._last[end.tid] = (end.end_ns, end.cpu_ns)
        self.ended_tails += 1
        if not running:
            drawn = self._drawn()
            if drawn is None:
                self.unplaced_ns += cpu_d
                return None
            sid = drawn
        return (end.tid, sid, cpu_d, cpu_d, 0, end.end_ns)

    def _unseen(self, end: ThreadEnd) -> _Row | None:
        """The row of a thread that began and ended between two ticks: its CPU, exact, in
        a stack ``_drawn``. Its own stack no reading saw: without a pool to draw from,
        its CPU is counted (``unplaced_ns``) in no stack."""
        self.unseen_threads += 1
        if end.cpu_ns <= 0:
            return None
        sid = self._drawn()
        if sid is None:
            self.unplaced_ns += end.cpu_ns
            return None
        self.unseen_placed_ns += end.cpu_ns
        self._new_threads.append((end.tid, end.ident, end.name, end.start_ns))
        return (end.tid, sid, end.cpu_ns, end.cpu_ns, 0, end.end_ns)

    def _drawn(self) -> int | None:
        """A stack for CPU no reading placed, drawn from the threads that lived less than
        a tick and were read running, each in proportion to the CPU of the unread ones it
        stands for (``_tail``); None while there are none."""
        if not self._short:
            return None
        sids, weights = zip(*self._short, strict=True)
        if sum(weights) <= 0:
            return None
        return int(self._draw.choices(sids, weights)[0])

    def _queued(self, tid: int, ran: bool, born: bool, off_cpu: int, at_tick: int = -1) -> int:
        """The run-queue delay credited to the thread since its last reading (all of it
        for a thread born in the interval), at most its time off the CPU in the interval:
        a wait longer than a tick is credited when the thread runs again, and what the
        interval cannot hold stays with the earlier rows as they read. ``at_tick``: the
        delay so far as the tick read it (no GIL held, no budget spent: with the GIL a
        read cost the target ~37 us a tick of a one-thread loop at the 5-ms interval,
        2026-11-29), -1 where it did not."""
        if not ran:
            return 0
        if at_tick >= 0:
            now: int | None = at_tick
        elif self._run_queue_budget <= 0:
            self.run_queue_reads_skipped += 1
            return 0
        else:
            self._run_queue_budget -= 1
            now = self.run_queue.read(tid)
        if now is None:
            return 0
        before = self._queued_at.get(tid)
        self._queued_at[tid] = now
        if before is None and not born:
            return 0  # first read of a thread there before: its delay so far is not this one's
        return max(0, min(now - (before or 0), off_cpu))

    def close(self) -> None:
        """Let go of the files the sampler keeps open (after its last sample)."""
        self.run_queue.close()
        if self.peek is not None:
            self.peek.close()
        self._queued_at.clear()

    def _emit_all(self, seen: list[_Row]) -> None:
        total_cpu = sum(s[3] for s in seen)
        self._kernel_budget = self._max_kernel_reads
        self.gil_waiters = 0
        start = self.ticks % len(seen) if seen else 0  # who gets the budget rotates
        for tid, sid, wall, cpu_d, queued, ts in seen[start:] + seen[:start]:
            self._emit(ts, tid, sid, wall, cpu_d, total_cpu - cpu_d, queued)

    def _parked_state(self, k: int | None) -> str:
        """The kernel state read for open row ``k`` ("" when none was)."""
        return self._rows.states.texts[self._rows.state[k]] if k is not None else ""

    def _kernel_state(self, tid: int, *, running_at_tick: bool = True) -> str:
        """The thread's kernel state: as read at the tick with its frames where it was
        (the same instant: nothing to check), else read now. ``running_at_tick`` False:
        an "R" read at the tick is not taken. On a CPU at the tick, the thread may have
        held the GIL (a builtin of pure-Python code: tokenize_pool's ``str.isalpha``);
        read now, with the sampler holding the GIL, "R" is native code running without
        it -- what the native-leaf rule asks."""
        if not self.kernel.available:
            return ""
        texts = self._tick_kernel.get(tid)
        at_tick = self.kernel.state_of(*texts) if texts is not None else None
        if at_tick is not None and (running_at_tick or at_tick != "R"):
            self.kernel_states_at_tick += 1
            return at_tick
        if self._kernel_budget <= 0:
            self.kernel_reads_skipped += 1
            return ""
        self._kernel_budget -= 1
        state = self.kernel.read(tid)
        # The frames were read at the tick's instant; the GIL that keeps the threads where
        # they were can still be taken from the sampler between then and now (a thread
        # that waited a switch interval for it asks for it back). A thread found blocked
        # in a call whose frame is no longer the one read may have blocked in a later
        # call than its frame's (KernelStates' readers keep the GIL for the read itself).
        # Its CPU clock cannot tell: a direct read's kernel work is the thread's CPU while
        # it stays in the same call. One on a CPU is in its native call, or runnable.
        if state not in ("", "R") and not self._still_at_its_leaf(tid):
            self.kernel_states_stale += 1
            return ""
        return state

    def _still_at_its_leaf(self, tid: int) -> bool:
        """Is the thread's leaf frame, and its instruction, the one this tick read?"""
        ident, code_id, lasti = self._leaf.get(tid, (0, 0, -1))
        with collector_held_off():  # a frame read, as in _sample
            now = self._current_frames().get(ident)
            same = now is not None and id(now.f_code) == code_id and now.f_lasti == lasti
            del now  # a frame held past the tick keeps its locals alive (see _sample)
        return same

    def _emit(
        self, now: int, tid: int, sid: int, wall: int, cpu: int, others_cpu: int, queued: int = 0
    ) -> None:
        rows = self._rows
        k = self._open.get(tid)
        # parked: idle in the same stack since its open row began (mergeable into it)
        parked = (
            k is not None
            and cpu <= wall * _IDLE_CPU_FRACTION
            and rows.stack[k] == sid
            and rows.cpu[k] <= rows.wall[k] * _IDLE_CPU_FRACTION
        )
        state = ""
        if cpu >= wall * _BUSY_CPU_FRACTION:
            # It ran the whole interval: whatever its leaf call is named (`d.get(k)` reads
            # like `queue.get`), it was not blocked in it.
            reason = ""
        else:
            # A blocking call at the leaf is the thread's state at this instant (the
            # interval's CPU was spent before it blocked, elsewhere: see attribution).
            reason = self._stack_reason.get(sid) or ""
            if reason in ("network", "disk"):
                # The frame names the call; the kernel says where the thread is in it
                # (still parked in a wait the kernel named when last asked: in it still).
                kept = self._parked_state(k) if parked else ""
                state = kept if kernel.reason(kept) else self._kernel_state(tid)
                if state == "sys futex":
                    # it returned at once and now waits for the GIL back (an event loop's
                    # non-blocking send, with pool threads holding the GIL)
                    reason = "gil"
                elif state == "R":
                    # on a CPU or runnable: a send to a local peer, or the loop's
                    # self-pipe read, does not wait on the network (predict_api's loop:
                    # 237 such rows of a 7-s run, a third of its time read as network);
                    # a file call on a CPU is the kernel doing its I/O, and its time off
                    # the CPU the disk's (a write-and-fsync loop: 2.4 s of system time in
                    # 4.1 s, the rest in D; read as "unknown", its disk share fell to 17%)
                    reason = "unknown" if reason == "network" else reason
                else:
                    # what the descriptor is: a `write` named like a file's blocked on a
                    # full pipe waits for the process reading it, not for a disk (a
                    # logging handler's stderr, unread: search_flask's stalled CI run)
                    reason = kernel.reason(state) or reason
            if not reason and sid in self._native_leaf:
                # still parked where the kernel was last asked: in the same call, unasked
                state = (self._parked_state(k) if parked else "") or self._kernel_state(
                    tid, running_at_tick=False
                )
                # On a CPU or runnable ("R"): a thread waiting for the GIL sleeps on a
                # futex, so the interval's missing CPU went to the OS scheduler, not to
                # the GIL (two threads hashing with the GIL released were "waiting for
                # the GIL" 99% of the time: tests/threads_corpus's digest_workers).
                reason = kernel.reason(state) or ("unknown" if state == "R" else "")
            if not reason:
                # Runnable Python that did not run: the GIL if another thread of ours ran
                # for at least half of the time this one waited, else the OS scheduler.
                reason = "gil" if others_cpu * 2 >= wall - cpu else "unknown"
                self.gil_waiters += reason == "gil"
        code = rows.reasons.code(reason)
        if parked and k is not None and rows.reason[k] == code:
            rows.extend_row(k, now, wall, cpu, queued)
            return
        self._open[tid] = rows.append(
            now, tid, sid, wall, cpu, code, rows.states.code(state), queued
        )

    # -- hand-off ----------------------------------------------------------------------
    def drain(self) -> dict[str, list[Any]]:
        """Rows collected since the last drain, per table."""
        with self._lock:
            out: dict[str, list[Any]] = {
                "samples": self._rows.rows(),
                "stacks": self._new_stacks,
                "frames": self._new_frames,
                "threads": self._new_threads,
            }
            self._new_stacks, self._new_frames, self._new_threads = [], [], []
            self._rows.clear()
            self._open.clear()
        return out

    @property
    def distinct_stacks(self) -> int:
        return len(self._stack_ids)
