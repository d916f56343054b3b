"""Stacks read at the tick's instant (probe.samplers.peek): which threads are read, which
chains are believed, how the stack sampler uses them -- on a fake of the compiled module
-- and the compiled module's reads on this process's own threads."""

from __future__ import annotations

import os
import sys
import threading
import time
from pathlib import Path

import pytest

from probe.samplers.peek import TickPeek, peek_module
from probe.samplers.stacks import StackSampler
from probe.samplers.ticker import Ticker
from tests.build_env import c_compiler_and_headers
from tests.unit.test_kernel_states import blocked_reading_a_pipe

OFFSET = 100  # the fake's code objects' first instruction, from their address


class FakeModule:
    """probe._tickpeek's calls, with chains set by the test; code addresses are ids."""

    USABLE = 1
    CODE_OFFSET = OFFSET

    def __init__(self, states: dict[int, int], chains: dict[int, tuple[int, ...] | None]):
        # thread ident -> its thread state's address, which is also its TID here
        self.states, self.chains, self.waits = states, chains, []
        self.live: dict[int, object] = {}  # address -> a code object code_at vouches for
        self.at_ns = 0  # the tick's instant, and each TID's CPU clock then (-1: unread)
        self.cpu: dict[int, int] = {}
        self.kernel: dict[int, tuple[str, str | None]] = {}  # TID -> its /proc texts
        self.asked: list[object] = []  # each wait's threads and kernel request
        self.born: dict[int, int] = {}  # threads the next tick finds born (ident -> TID)
        self.queued: dict[int, int] = {}  # TID -> its run-queue time so far (-1: unread)
        self.born_asked: list[object] = []  # each wait's request for them

    def thread_states(self):
        return {ident: (state, state) for ident, state in self.states.items()}

    def wait_and_peek(self, fd, timeout_s, threads, max_depth, kernel, born=None):
        states = [thread[0] for thread in threads]
        self.waits.append((timeout_s, states))
        self.asked.append((list(threads), kernel))
        self.born_asked.append(born)
        readable = os.read(fd, 1) if _readable(fd, timeout_s) else b""
        if readable:
            return None
        # threads born during the sleep (ident -> TID), newest first, as many as asked
        new = list(self.born.items())[: born[2] if born else 0]
        self.born = {}
        states += [tid for _, tid in new]
        return (
            self.at_ns,
            [self.chains.get(s) for s in states],
            [self.cpu.get(s, -1) for s in states],
            [self.kernel.get(s) for s in states],
            new,
            [self.queued.get(s, -1) for s in states],
        )

    def code_at(self, address):
        return self.live.get(address)


def _readable(fd: int, timeout_s: float) -> bool:
    import select

    return bool(select.select([fd], [], [], timeout_s)[0])


def chain(*frames: tuple[object, int]) -> tuple[int, ...]:
    """Leaf first (code, instruction offset) -> the addresses the module reads."""
    out: list[int] = []
    for k, (code, lasti) in enumerate(frames):
        out += [1000 + k, id(code), id(code) + OFFSET + lasti]
    return tuple(out)


def parse():
    return sum(range(3))


def score():
    return sum(range(3))


def serve():
    return parse(), score()


def sampler_on(module: FakeModule, frames, clock, cpu, **more) -> StackSampler:
    """A stack sampler peeking through ``module``; ``frames`` is what it finds with the
    GIL, ``clock`` and ``cpu`` its clock and thread CPU clock."""
    return StackSampler(
        clock=clock,
        current_frames=lambda: frames,
        thread_cpu=cpu,
        peek=TickPeek(module=module),
        **{"threads": _thread_70, **more},
    )


def test_a_tick_reads_every_thread_but_its_own_and_the_excluded_ones_at_most_max_a_tick():
    me = threading.get_ident()
    module = FakeModule({me: 1, 11: 2, 12: 3, 13: 4, 14: 5}, {})
    peek = TickPeek(module=module, max_threads=2)
    reads = []
    for _ in range(2):
        assert peek.wait(0.01, exclude={14}) is False
        reads.append(module.waits[-1][1])
    assert all(len(r) == 2 and 1 not in r and 5 not in r for r in reads)
    assert set(reads[0]) | set(reads[1]) == {2, 3, 4}  # the budget goes round
    peek.close()


def test_wake_ends_the_wait_without_reads_and_a_closed_peek_waits_no_more():
    peek = TickPeek(module=FakeModule({1: 1}, {}))
    peek.wake()
    assert peek.wait(5.0) is True and peek.take() == {}
    peek.close()
    assert peek.wait(5.0) is True


def test_a_chain_of_known_and_vouched_for_codes_becomes_the_thread_s_stack():
    module = FakeModule({}, {})
    module.live[id(parse.__code__)] = parse.__code__
    peek = TickPeek(module=module)
    known = {id(serve.__code__): serve.__code__}
    leaf = peek.frame(chain((parse.__code__, 4), (serve.__code__, 2)), known.get)
    assert leaf is not None and leaf.f_code is parse.__code__ and leaf.f_lasti == 4
    assert leaf.f_back is not None and leaf.f_back.f_code is serve.__code__
    assert leaf.f_back.f_back is None and peek.read == 1


def test_a_chain_with_an_address_that_is_no_code_or_an_instruction_outside_it_is_refused():
    module = FakeModule({}, {})
    peek = TickPeek(module=module)
    known = {id(serve.__code__): serve.__code__}
    # parse's code is not vouched for (freed, or never a code object): not believed
    assert peek.frame(chain((parse.__code__, 4), (serve.__code__, 2)), known.get) is None
    outside = len(serve.__code__.co_code)
    assert peek.frame(chain((serve.__code__, outside)), known.get) is None
    assert peek.refused == 2 and peek.read == 0
    # no frame at all (a thread not started yet, or past its last frame): not torn
    assert peek.frame((), known.get) is None and (peek.refused, peek.frameless) == (2, 1)
    # a frame pushed but not yet started (its instruction before the first) is skipped
    leaf = peek.frame(chain((serve.__code__, -2), (serve.__code__, 6)), known.get)
    assert leaf is not None and leaf.f_lasti == 6 and leaf.f_back is None


def test_the_sampler_takes_the_stack_read_at_the_tick_over_the_one_it_finds_with_the_gil():
    # With the GIL the thread is found in `score` (its GIL-releasing call); at the tick it
    # was in `parse`: the row is parse's. A chain that does not check out: score's.
    gil_time = {7: sys._getframe()}
    module = FakeModule({7: 70}, {})
    for code in (parse.__code__, serve.__code__, score.__code__):
        module.live[id(code)] = code
    clock = [0]
    sampler = sampler_on(module, gil_time, lambda: clock[0], lambda tid: clock[0], threads=dict)
    peek = sampler.peek
    assert peek is not None
    sampler.sample()  # the first tick takes each thread's baselines
    leaves = []
    for at_tick in (chain((parse.__code__, 2), (serve.__code__, 2)), (1, 2, 3), None):
        module.chains[70] = at_tick
        assert sampler.wait(0.0) is False
        clock[0] += 10_000_000
        sampler.sample()
        leaves.append(sampler._stack_of[7])
    keys = {sid: key for key, sid in sampler._stack_ids.items()}  # leaf's frame id first
    leaf_names = [sampler._codes[keys[sid][0] - 1].co_name for sid in leaves]
    here = sys._getframe().f_code.co_name
    assert leaf_names == ["parse", here, here]
    assert peek.read == 1 and peek.refused == 1
    sampler.close()


def test_a_thread_read_at_the_tick_is_timed_there_not_where_the_gil_came():
    # The tick reads thread 7 (TID 70) at 10 ms, 20 ms, 30 ms, its CPU clock then 0, 9, 10
    # ms; the GIL comes 4 ms, 0 ms, 3 ms later, the clock read with it 2 ms further on.
    # Rows end at the tick: 10 ms of wall each, 9 ms then 1 ms of CPU -- not 6 ms and 7 ms
    # of wall, as the GIL's instants would make them.
    module = FakeModule({7: 70}, {})
    gil_ns, gil_cpu = [0], [0]
    frames = {7: sys._getframe()}
    sampler = sampler_on(module, frames, lambda: gil_ns[0], lambda tid: gil_cpu[0])
    rows = []
    for tick_ms, cpu_ms, late_ms in ((10, 0, 4), (20, 9, 0), (30, 10, 3)):
        module.at_ns, module.cpu[70] = tick_ms * 1_000_000, cpu_ms * 1_000_000
        assert sampler.wait(0.0) is False
        gil_ns[0] = (tick_ms + late_ms) * 1_000_000
        gil_cpu[0] = (cpu_ms + 2) * 1_000_000
        sampler.sample()
        rows += sampler.drain()["samples"]
    ts, wall, cpu = (_column(rows, name) for name in ("ts_ns", "wall_ns", "cpu_ns"))
    assert ts == [20_000_000, 30_000_000]
    assert wall == [10_000_000, 10_000_000] and cpu == [9_000_000, 1_000_000]
    # unread at the tick (its clock -1): the GIL's instant and clock, as before
    module.at_ns, module.cpu[70] = 40_000_000, -1
    assert sampler.wait(0.0) is False
    gil_ns[0], gil_cpu[0] = 45_000_000, 15_000_000
    sampler.sample()
    row = sampler.drain()["samples"]
    assert _column(row, "wall_ns") == [15_000_000] and _column(row, "cpu_ns") == [5_000_000]
    sampler.close()


def test_a_thread_that_took_a_gone_thread_s_ident_keeps_the_tick_s_reading():
    # ident 7 was TID 70's; between two ticks 70 ended and TID 71 took the ident. The
    # tick read 71 (its CPU clock 3 ms at 20 ms); the GIL came 4 ms later: 71's row ends
    # at the tick with the tick's clock, as any thread read there does
    module = FakeModule({7: 70}, {})
    now, clocks = [0], {70: 0, 71: 0}
    frames = {7: sys._getframe()}

    class Thread:
        native_id, name = 70, "seventy"

    sampler = sampler_on(module, frames, lambda: now[0], clocks.get, threads=lambda: {7: Thread()})
    module.at_ns, module.cpu[70] = 10_000_000, 0
    assert sampler.wait(0.0) is False
    now[0] = 11_000_000
    sampler.sample()
    sampler.drain()
    del clocks[70]
    Thread.native_id, module.states = 71, {7: 71}
    module.at_ns, module.cpu[71], clocks[71] = 20_000_000, 3_000_000, 5_000_000
    assert sampler.wait(0.0) is False
    now[0] = 24_000_000
    sampler.sample()
    drained = sampler.drain()["samples"]
    rows = [r for r, tid in zip(drained, _column(drained, "thread_id"), strict=True) if tid == 71]
    assert _column(rows, "ts_ns") == [20_000_000]
    assert _column(rows, "cpu_ns") == [3_000_000]
    sampler.close()


def test_a_thread_read_at_the_tick_that_ends_before_the_gil_comes_keeps_its_row():
    # Thread 7 (TID 70, sampled before) and thread 8 (TID 80, born since the last tick)
    # are read at the 10-ms tick in `parse`; both have ended when the sampler gets the
    # GIL, which finds no frames of theirs. Their rows come from the tick: 70's 10 ms
    # with its 9 ms of CPU; 80's half the time since the last sample (the GIL's, 3 ms
    # after its tick: a thread born before it was seen then), its expected age, 3.5 ms.
    # Thread 9's chain did not check out: nothing of it is known, no row.
    module = FakeModule({7: 70}, {})
    for code in (parse.__code__, serve.__code__):
        module.live[id(code)] = code
    frames = {7: sys._getframe()}
    sampler = sampler_on(module, frames, lambda: module.at_ns + 3_000_000, lambda tid: 0)
    module.cpu[70] = 0
    assert sampler.wait(0.0) is False
    sampler.sample()  # the baselines
    sampler.drain()
    module.states.update({8: 80, 9: 90})
    module.at_ns, module.cpu.update({70: 9_000_000, 80: 3_000_000, 90: 1_000_000})
    in_parse = chain((parse.__code__, 2), (serve.__code__, 2))
    module.chains.update({70: in_parse, 80: in_parse, 90: (1, 2, 3)})
    module.at_ns = 10_000_000
    assert sampler.wait(0.0) is False
    frames.clear()  # all three ended between the tick and the GIL
    sampler.sample()
    out = sampler.drain()
    rows = sorted(out["samples"], key=lambda row: row[1])
    tids, ts, wall, cpu = (_column(rows, n) for n in ("thread_id", "ts_ns", "wall_ns", "cpu_ns"))
    assert tids == [70, 80] and ts == [10_000_000, 10_000_000]
    assert wall == [10_000_000, 3_500_000] and cpu == [9_000_000, 3_000_000]
    leaves = {sampler._codes[key[0] - 1].co_name for key in sampler._stack_ids if key}
    assert "parse" in leaves
    assert [(t[0], t[2]) for t in out["threads"]] == [(80, "thread-8")]
    assert sampler.ended_at_tick == 2
    # gone: the next tick has no rows of theirs and keeps nothing of them
    module.states = {}
    assert sampler.wait(0.0) is False
    sampler.sample()
    assert sampler.drain()["samples"] == [] and not sampler._last
    sampler.close()


def test_a_thread_s_wait_for_a_cpu_is_read_at_the_tick_and_not_again_with_the_gil():
    # TID 70 ran 4 ms of a 10-ms tick; its schedstat said 1 ms on a run queue at the
    # first tick, 3 ms at the second (read in C beside its CPU clock): its row holds the
    # 2 ms between, and the GIL-side reader is never asked, its baseline included
    from tests.unit.test_stack_sampler import RunQueue

    module = FakeModule({7: 70}, {})
    run_queue = RunQueue({70: 999 * 1_000_000})  # what a read with the GIL would say
    frames = {7: sys._getframe()}
    sampler = sampler_on(module, frames, lambda: module.at_ns, lambda tid: 0, run_queue=run_queue)
    module.cpu[70], module.queued[70] = 0, 1_000_000
    assert sampler.wait(0.0) is False
    sampler.sample()
    module.at_ns, module.cpu[70], module.queued[70] = 10_000_000, 4_000_000, 3_000_000
    assert sampler.wait(0.0) is False
    sampler.sample()
    row = sampler.drain()["samples"][-1]
    assert _column([row], "queued_ns") == [2_000_000] and run_queue.reads == 0
    sampler.close()


@pytest.fixture
def frame_in_readv():
    """A live frame blocked in ``os.readv`` on a pipe: a call no wait rule names."""

    def read(fd):
        os.readv(fd, [bytearray(1)])

    yield from blocked_reading_a_pipe(read)


def test_the_kernel_s_state_read_at_the_tick_is_the_row_s_and_none_is_read_later(
    frame_in_readv,
):
    # The tick finds TID 70 in `read` on a pipe; by the time the GIL comes it has moved
    # on to a sleep (what /proc says then). The row takes the tick's state, with its
    # frame's instant, and /proc is not read again.
    from tests.unit.test_kernel_states import fake_proc

    module = FakeModule({7: 70}, {})
    states = fake_proc({"/t/70/syscall": "230 0x1 0x0"})
    frames = {7: frame_in_readv}
    sampler = sampler_on(module, frames, lambda: module.at_ns, lambda tid: 0, kernel_states=states)
    module.cpu[70] = 0
    assert sampler.wait(0.0) is False
    sampler.sample()  # the baselines
    module.at_ns, module.cpu[70] = 10_000_000, 1_000_000  # 10% on a CPU: in doubt
    module.kernel[70] = ("0 0x9 0x1 0x0", "pipe:[4711]")
    assert sampler.wait(0.0) is False
    threads, kernel = module.asked[-1]
    assert threads == [(70, 70, 0, 0)]  # its last sample's instant and CPU clock
    assert kernel is not None and kernel[0] == 0.95 and 0 in kernel[1]  # read(2) waits on one
    sampler.sample()
    [row] = sampler.drain()["samples"]
    assert (row[5], row[7]) == ("subprocess", "sys read pipe")
    assert states.reads == 0 and sampler.kernel_states_at_tick == 1
    sampler.close()


def test_on_a_cpu_at_the_tick_a_thread_in_an_unnamed_call_is_asked_again_with_the_gil(
    frame_in_readv,
):
    # "R" at the tick may be a builtin of pure Python, holding the GIL (tokenize_pool's
    # workers in `str.isalpha`, read as waiting for a core); read with the GIL held, "R"
    # is native code running without it. So the native-leaf rule reads the kernel again.
    from tests.unit.test_kernel_states import fake_proc

    module = FakeModule({7: 70}, {})
    states = fake_proc({"/t/70/syscall": "202 0x7f 0x89 0x0"})  # now: waiting on a futex
    frames = {7: frame_in_readv}
    sampler = sampler_on(module, frames, lambda: module.at_ns, lambda tid: 0, kernel_states=states)
    module.cpu[70] = 0
    assert sampler.wait(0.0) is False
    sampler.sample()
    module.at_ns, module.cpu[70] = 10_000_000, 1_000_000
    module.kernel[70] = ("running", None)
    assert sampler.wait(0.0) is False
    sampler.sample()
    [row] = sampler.drain()["samples"]
    assert row[7] == "sys futex" and states.reads == 1 and sampler.kernel_states_at_tick == 0
    sampler.close()


def _thread_70() -> dict[int, threading.Thread]:
    class Seventy:
        native_id, name = 70, "seventy"

    return {7: Seventy()}  # type: ignore[dict-item]


def _column(rows: list[list[object]], name: str) -> list[object]:
    from probe.rundir.schema import COLUMNS

    names = [column for column, _ in COLUMNS["samples"]]
    return [row[names.index(name)] for row in rows]


class Waiter:
    def __init__(self):
        self.timeouts: list[float] = []
        self.woken = threading.Event()

    def wait(self, timeout_s):
        self.timeouts.append(timeout_s)
        return self.woken.wait(timeout_s)

    def wake(self):
        self.woken.set()


def test_a_ticker_with_a_waiter_waits_there_and_its_stop_wakes_it():
    waiter, ticks = Waiter(), []
    ticker = Ticker("t", 30.0, lambda: ticks.append(1), waiter=waiter)
    ticker.start()
    time.sleep(0.05)
    started = time.perf_counter()
    ticker.stop()
    assert time.perf_counter() - started < 5.0 and not ticks
    assert waiter.timeouts and waiter.timeouts[0] == pytest.approx(30.0, abs=0.1)


# -- the compiled module on this process ---------------------------------------------------

compiled = pytest.mark.skipif(peek_module() is None, reason="probe._tickpeek not usable here")


@pytest.mark.skipif(not c_compiler_and_headers(), reason="no C compiler or Python headers")
@pytest.mark.skipif(sys.version_info[:2] != (3, 11), reason="the frame layout read is 3.11's")
def test_where_a_c_compiler_is_the_tick_s_reads_are_in_use():
    assert peek_module() is not None, (
        "probe._tickpeek was not built, or its reads are refused here although a C "
        "compiler is here: install with `pip install -e .` (the README's test command)"
    )


@compiled
def test_code_at_vouches_for_a_live_code_object_and_for_nothing_else():
    module = peek_module()
    assert module.code_at(id(parse.__code__)) is parse.__code__
    for address in (0, id(parse.__code__) + 1, id(parse), id("text"), 8):
        assert module.code_at(address) is None


@compiled
def test_a_parked_thread_s_frames_read_without_the_gil_are_the_ones_it_is_in():
    release = threading.Event()

    def parked_here():
        release.wait()

    thread = threading.Thread(target=parked_here)
    thread.start()
    try:
        peek = TickPeek(max_threads=64)
        for _ in range(100):
            frame = sys._current_frames()[thread.ident]
            if frame.f_code.co_name == "wait" and frame.f_back.f_code is parked_here.__code__:
                break
            time.sleep(0.005)
        assert peek.wait(0.001) is False
        reads = peek.take()
        assert reads[thread.ident].tid == thread.native_id
        assert reads[thread.ident].cpu_ns > 0  # its CPU clock, read at the tick
        leaf = peek.frame(reads[thread.ident].chain, lambda address: None)
        names = []
        while leaf is not None:
            names.append(leaf.f_code.co_name)
            leaf = leaf.f_back
        expected = []
        f = sys._current_frames()[thread.ident]
        while f is not None:
            expected.append(f.f_code.co_name)
            f = f.f_back
        assert names == expected and "parked_here" in names
        assert threading.get_ident() not in reads
        peek.close()
    finally:
        release.set()
        thread.join()


@compiled
def test_a_thread_born_while_the_sampler_sleeps_is_read_at_the_tick():
    # the list of threads to read is made before the sleep; one started 50 ms into a
    # 300-ms sleep is found at the tick, newest first, with its TID and frames
    release, started = threading.Event(), []

    def born_here():
        release.wait()

    def starter():
        time.sleep(0.05)
        newborn = threading.Thread(target=born_here)
        newborn.start()
        started.append(newborn)

    spawner = threading.Thread(target=starter)
    spawner.start()
    peek = TickPeek(max_threads=64)
    try:
        assert peek.wait(0.3, exclude={spawner.ident}) is False
        reads = peek.take()
        [newborn] = started
        assert peek.born >= 1 and reads[newborn.ident].tid == newborn.native_id
        leaf = peek.frame(reads[newborn.ident].chain, lambda address: None)
        names = []
        while leaf is not None:
            names.append(leaf.f_code.co_name)
            leaf = leaf.f_back
        assert "born_here" in names
        assert spawner.ident not in reads  # excluded, born or not
    finally:
        peek.close()
        release.set()
        spawner.join()
        for thread in started:
            thread.join()


@compiled
def test_the_tick_reads_what_a_blocked_thread_waits_on_where_it_ran_since_its_last_sample():
    from probe.samplers.kernel import KernelStates

    r, w = os.pipe()
    thread = threading.Thread(target=os.read, args=(r, 1))
    thread.start()
    try:
        kernel = KernelStates()
        syscall = Path(f"/proc/self/task/{thread.native_id}/syscall")
        for _ in range(200):  # until it sleeps in read(2)
            if syscall.read_text().startswith("0 "):
                break
            time.sleep(0.005)
        peek = TickPeek(max_threads=64)
        tid = thread.native_id
        cpu = time.clock_gettime_ns(((~tid) << 3) | 6)
        ran_a_little = {tid: (time.perf_counter_ns() - 10**10, cpu - 1)}
        ask = (0.95, kernel.descriptor_calls, 4)
        assert peek.wait(0.001, last=ran_a_little, kernel=ask) is False
        read = peek.take()[thread.ident]
        assert read.kernel is not None and kernel.state_of(*read.kernel) == "sys read pipe"
        # one that did not run since (its CPU clock as it was) is not asked
        assert peek.wait(0.001, last={tid: (0, read.cpu_ns)}, kernel=ask) is False
        assert peek.take()[thread.ident].kernel is None
        peek.close()
    finally:
        os.write(w, b"x")
        thread.join()
        os.close(r)
        os.close(w)


def test_the_environment_can_ask_for_the_stacks_read_with_the_gil(monkeypatch):
    monkeypatch.setenv("PROBE_GIL_STACKS", "1")
    assert peek_module() is None and not TickPeek().available
    sampler = StackSampler(peek=TickPeek())
    assert sampler.peek is None  # and the session's ticker then waits on its own event
