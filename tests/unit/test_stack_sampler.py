"""The stack sampler's arithmetic on a fake clock, fake CPU clocks and fake frames."""

from __future__ import annotations

import sys
import threading

from probe.samplers.stacks import OVERFLOW_STACK_ID, StackSampler, thread_cpu_ns


class Clock:
    def __init__(self):
        self.now = 0

    def __call__(self):
        return self.now


def frame_running_python():
    return sys._getframe()


def make(frames, cpu, clock, **kw):
    threads = {
        ident: type("T", (), {"native_id": ident, "name": f"t{ident}"})() for ident in frames
    }
    return StackSampler(
        clock=clock,
        current_frames=lambda: frames,
        thread_cpu=lambda n: cpu[n],
        threads=lambda: threads,
        **kw,
    )


def test_interval_split_into_on_cpu_and_waiting_with_reason(blocked_frame):
    clock = Clock()
    frames = {1: blocked_frame, 2: frame_running_python()}
    cpu = {1: 0, 2: 0}
    s = make(frames, cpu, clock)
    s.sample()  # first sight: baselines only
    clock.now = 10_000_000
    cpu[1] += 0  # the sleeper used no CPU
    cpu[2] += 10_000_000  # the busy thread ran the whole interval
    s.sample()
    out = s.drain()
    rows = {r[1]: r for r in out["samples"]}
    assert rows[1][3:6] == [10_000_000, 0, "lock"]
    assert rows[2][3:6] == [10_000_000, 10_000_000, ""]
    assert {t[0] for t in out["threads"]} == {1, 2}


def two_python_threads():
    """A sampler over two threads running Python, after its first (baseline) tick."""
    clock = Clock()
    busy = frame_running_python()
    cpu = {1: 0, 2: 0}
    s = make({1: busy, 2: busy}, cpu, clock)
    s.sample()
    return clock, cpu, s


def test_runnable_thread_waiting_while_another_ran_is_attributed_to_gil():
    clock, cpu, s = two_python_threads()
    clock.now = 10_000_000
    cpu[1] += 9_000_000
    cpu[2] += 1_000_000
    s.sample()
    rows = {r[1]: r for r in s.drain()["samples"]}
    assert rows[2][5] == "gil"  # waited 9 ms while the other ran 9 ms
    assert rows[1][5] == "gil"  # waited 1 ms while the other ran 1 ms


def test_runnable_thread_waiting_while_nothing_else_ran_is_unknown():
    clock = Clock()
    frames = {1: frame_running_python()}
    cpu = {1: 0}
    s = make(frames, cpu, clock)
    s.sample()
    clock.now = 10_000_000
    cpu[1] += 2_000_000  # descheduled by the OS, not by another thread of ours
    s.sample()
    [row] = s.drain()["samples"]
    assert row[5] == "unknown" and row[4] == 2_000_000


def test_consecutive_idle_intervals_in_one_stack_merge_and_keep_totals(blocked_frame):
    clock = Clock()
    frames = {1: blocked_frame}
    cpu = {1: 0}
    s = make(frames, cpu, clock)
    for k in range(101):
        clock.now = k * 10_000_000
        s.sample()
    rows = s.drain()["samples"]
    assert len(rows) == 1
    assert rows[0][3] == 1_000_000_000 and rows[0][6] == 100


def test_stack_table_is_bounded_and_overflow_is_counted(blocked_frame):
    clock = Clock()
    s = StackSampler(
        clock=clock, current_frames=lambda: {}, thread_cpu=lambda n: 0, threads=dict, max_stacks=2
    )
    fs = [frame_running_python(), blocked_frame]

    def nested():
        return sys._getframe()

    fs.append(nested())
    ids = [s._stack_id(f) for f in fs]
    assert ids[:2] == [1, 2]
    assert ids[2] == OVERFLOW_STACK_ID
    assert s.distinct_stacks == 2


def test_threads_that_exit_are_forgotten():
    clock = Clock()
    frames = {1: frame_running_python(), 2: frame_running_python()}
    cpu = {1: 0, 2: 0}
    s = make(frames, cpu, clock)
    s.sample()
    del frames[2]
    clock.now = 1_000_000
    s.sample()
    assert set(s._last) == {1}


def test_thread_cpu_clock_reads_this_thread_and_fails_soft_for_dead_ones():
    me = threading.current_thread().native_id
    a = thread_cpu_ns(me)
    x = 0
    for i in range(200_000):
        x += i
    b = thread_cpu_ns(me)
    assert a is not None and b is not None and b > a
    assert thread_cpu_ns(2**22 + 12345) is None
    assert thread_cpu_ns(threading.get_ident()) is None  # a pthread ident, not a TID


def test_a_thread_seen_before_threading_knows_it_is_sampled_once_it_does(blocked_frame):
    """A thread just started is in sys._current_frames before threading.enumerate() has
    its native id; the sampler keys it by its ident until then (found on a pool of 16
    workers starting while sampled: the tick raised OverflowError)."""
    waiter = next(
        t
        for t in threading.enumerate()
        if t.ident in sys._current_frames() and sys._current_frames()[t.ident] is blocked_frame
    )
    known: dict[int, threading.Thread] = {}
    clock = Clock()
    s = StackSampler(
        clock=clock, current_frames=lambda: {waiter.ident: blocked_frame}, threads=lambda: known
    )
    s.sample()
    assert s._last == {}
    known[waiter.ident] = waiter
    for now in (1_000_000, 2_000_000):
        clock.now = now
        s.sample()
    assert set(s._last) == {waiter.native_id}


def test_sampling_does_not_keep_a_finished_frames_locals_alive():
    """The target's locals die when its function returns, not at the next GC cycle."""
    import gc
    import weakref

    class Big:
        pass

    ready, release = threading.Event(), threading.Event()
    refs = []

    def work():
        big = Big()
        refs.append(weakref.ref(big))
        ready.set()
        release.wait()  # sampled while parked here, `big` in its locals

    s = StackSampler()
    t = threading.Thread(target=work)
    gc.disable()
    try:
        t.start()
        ready.wait()
        for _ in range(3):
            s.sample()
        release.set()
        t.join()
        s.sample()
        assert refs[0]() is None, "a sampled frame outlived its function (reference cycle)"
    finally:
        gc.enable()


def test_a_thread_busy_all_interval_is_not_blocked_whatever_its_leaf_call(blocked_frame):
    # `d.get(k)` reads like `queue.get`: the CPU clock, not the name, says it ran.
    clock = Clock()
    frames = {1: blocked_frame}
    cpu = {1: 0}
    s = make(frames, cpu, clock)
    s.sample()
    clock.now = 10_000_000
    cpu[1] += 9_800_000
    s.sample()
    [row] = s.drain()["samples"]
    assert row[5] == ""


def test_pending_rows_keep_no_python_object_per_row():
    """A second of rows held as Python objects pinned pymalloc arenas the target had
    emptied (benchmarks/allocator_floor.py: the healthy sample's floor climbed 2 MB/s and
    its saw-tooth vanished). Held in typed arrays, a thousand pending rows add a handful of
    blocks (the arrays' buffers while small), not the ~5 000 of lists and large ints."""
    clock, cpu, s = two_python_threads()
    clock.now = 10_000_000_000  # large values: ints beyond CPython's small-int cache
    s.sample()  # interning and first rows done before counting
    before = sys.getallocatedblocks()
    for k in range(2, 502):
        clock.now = k * 10_000_000_000
        cpu[1] += 9_000_000_000 + k
        cpu[2] += 1_000_000_000 + k
        s.sample()
    held = sys.getallocatedblocks() - before
    rows = s.drain()["samples"]
    assert len(rows) == 1002
    assert held < 100, held
    assert rows[-1][3:6] == [10_000_000_000, 1_000_000_501, "gil"]


def test_a_thread_born_between_two_ticks_is_sampled_at_its_first_sight():
    """A server's thread per connection lives less than a tick: its one sight is all."""
    clock = Clock()
    frames = {1: frame_running_python()}
    cpu = {1: 0, 2: 0}
    s = make(frames, cpu, clock)
    s.sample()  # thread 1 was there from the start: a baseline only
    assert s.drain()["samples"] == []
    frames[2] = frame_running_python()  # born since: 3 ms of CPU so far
    clock.now = 10_000_000
    cpu[1] += 10_000_000
    cpu[2] = 3_000_000
    s.sample()
    rows = {r[1]: r for r in s.drain()["samples"]}
    assert rows[2][3:5] == [5_000_000, 3_000_000]  # half the tick for its age; its CPU
    assert rows[1][3:5] == [10_000_000, 10_000_000]
    frames[3] = frame_running_python()  # born and busy for most of the next tick
    cpu[3] = 8_000_000
    clock.now = 20_000_000
    s.sample()
    rows = {r[1]: r for r in s.drain()["samples"]}
    assert rows[3][3:5] == [8_000_000, 8_000_000]  # its age is at least its CPU


class Walked:
    """A sampler of one thread in ``frame`` on a fake clock and CPU clock, its stack
    walks counted; ``tick()`` moves the clock 10 ms and samples."""

    def __init__(self, frame, cpu_ns: int) -> None:
        self.clock, self.frames, self.cpu = Clock(), {1: frame}, {1: cpu_ns}
        self.s = make(self.frames, self.cpu, self.clock)
        self.walks = 0
        walk = self.s._stack_id

        def counted(f):
            self.walks += 1
            return walk(f)

        self.s._stack_id = counted  # type: ignore[method-assign]

    def tick(self, n: int = 1) -> None:
        for _ in range(n):
            self.clock.now += 10_000_000
            self.s.sample()


def test_a_thread_that_has_not_run_since_the_last_tick_is_not_walked_again(blocked_frame):
    w = Walked(blocked_frame, cpu_ns=5_000)
    w.tick(5)  # the first tick takes baselines; then one walk, then none
    assert w.walks == 1
    w.cpu[1] += 1  # one nanosecond of CPU: it ran, its stack is read again
    w.tick()
    assert w.walks == 2
    (row,) = w.s.drain()["samples"]  # one stack, parked throughout: one merged row
    assert row[2] == w.s._stack_of[1] and row[6] == 5


def test_a_thread_whose_leaf_moved_is_walked_again_whatever_its_cpu_clock(blocked_frame):
    # the CPU clock alone does not decide: a thread reused under the same id, or a fake
    w = Walked(blocked_frame, cpu_ns=0)
    w.tick(3)
    w.frames[1] = frame_running_python()  # another frame, the same clock reading
    w.tick()
    assert w.walks == 2
    stacks = [r[2] for r in w.s.drain()["samples"]]
    assert len(set(stacks)) == 2 and stacks[-1] == w.s._stack_of[1]


class RunQueue:
    """Run-queue delays by thread, as a fake of kernel.RunQueueDelays; counts reads."""

    def __init__(self, delays: dict[int, int]) -> None:
        self.delays, self.reads, self.forgotten, self.unavailable = delays, 0, [], ""

    def read(self, tid: int) -> int | None:
        self.reads += 1
        return self.delays.get(tid)

    def forget(self, tid: int) -> None:
        self.forgotten.append(tid)

    def close(self) -> None:
        self.forgotten.extend(self.delays)


def test_an_interval_s_wait_for_a_cpu_is_recorded_and_held_to_its_time_off_the_cpu(
    blocked_frame,
):
    clock, frames = Clock(), {1: blocked_frame, 2: frame_running_python()}
    cpu = {1: 0, 2: 0}
    queue = RunQueue({1: 1_000_000, 2: 5_000_000})
    s = make(frames, cpu, clock, run_queue=queue)
    s.sample()  # first sight: the delays so far are not the next interval's
    clock.now, cpu[1], cpu[2] = 10_000_000, 3_000_000, 2_000_000
    queue.delays = {1: 7_000_000, 2: 25_000_000}  # +6 ms; +20 ms (longer than the tick)
    s.sample()
    rows = {r[1]: r for r in s.drain()["samples"]}
    assert rows[1][5] == "lock" and rows[1][8] == 6_000_000
    assert rows[2][8] == 8_000_000  # at most its 8 ms off the CPU
    reads = queue.reads
    clock.now += 10_000_000  # neither thread ran: its delay is not read
    s.sample()
    assert queue.reads == reads
    s.close()
    assert set(queue.forgotten) >= {1, 2}


def test_run_queue_reads_are_budgeted_a_tick_and_every_thread_gets_its_turn():
    n = 5
    clock = Clock()
    frames = {i: frame_running_python() for i in range(1, n + 1)}
    cpu = dict.fromkeys(frames, 0)
    queue = RunQueue(dict.fromkeys(frames, 0))
    s = make(frames, cpu, clock, run_queue=queue, max_run_queue_reads=2)
    s.sample()  # first sight: baselines, within the budget
    credited: dict[int, int] = dict.fromkeys(frames, 0)
    for _ in range(10):
        clock.now += 10_000_000
        for tid in frames:  # every thread ran 2 ms and waited 1 ms more for a core
            cpu[tid] += 2_000_000
            queue.delays[tid] += 1_000_000
        reads = queue.reads
        s.sample()
        assert queue.reads - reads == 2  # the budget, whatever ran
        for row in s.drain()["samples"]:
            credited[row[1]] += row[8]
    assert s.run_queue_reads_skipped == 10 * (n - 2) + (n - 2)
    # taken in turn: each thread read, its wait since its last reading credited
    assert all(c > 0 for c in credited.values())
    assert sum(credited.values()) >= 0.6 * 10 * n * 1_000_000
