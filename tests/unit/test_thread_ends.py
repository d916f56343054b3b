"""A thread's own reading at its end (probe.samplers.thread_ends) on real threads, and what
the stack sampler makes of it on fakes: the CPU since the thread's last reading, and the
CPU of threads no tick read, in stacks drawn from the short-lived threads it did read."""

from __future__ import annotations

import sys
import threading
import time

from probe.samplers.stacks import StackSampler
from probe.samplers.thread_ends import ThreadEnd, ThreadEnds
from tests.unit.test_stack_sampler import Clock, make

MS = 1_000_000


def _spin(seconds: float) -> None:
    end = time.thread_time() + seconds
    while time.thread_time() < end:
        pass


def test_a_thread_started_while_installed_reads_its_own_cpu_as_it_ends_and_after_none_do():
    ends = ThreadEnds()
    original = threading.Thread._bootstrap_inner
    ends.install()
    try:
        worker = threading.Thread(target=_spin, args=(0.02,), name="spinner")
        worker.start()
        worker.join()
        [end] = ends.take()
        assert (end.ident, end.tid, end.name) == (worker.ident, worker.native_id, "spinner")
        assert end.cpu_ns >= 20 * MS and end.end_ns - end.start_ns >= end.cpu_ns * 0.9
        assert ends.take() == []  # taken once
    finally:
        ends.uninstall()
    assert threading.Thread._bootstrap_inner is original
    later = threading.Thread(target=_spin, args=(0.001,))
    later.start()
    later.join()
    assert ends.take() == []


def test_a_thread_that_raises_still_reads_its_end():
    ends = ThreadEnds()
    ends.install()
    hook, threading.excepthook = threading.excepthook, lambda args: None
    try:
        failing = threading.Thread(target=lambda: 1 / 0)
        failing.start()
        failing.join()
    finally:
        threading.excepthook = hook
        ends.uninstall()
    assert [end.ident for end in ends.take()] == [failing.ident]


class Ended:
    """Ends set by the test, taken by the sampler at its next tick."""

    def __init__(self) -> None:
        self.pending: list[ThreadEnd] = []

    def take(self) -> list[ThreadEnd]:
        out, self.pending = self.pending, []
        return out


def parse():
    return sys._getframe()


def score():
    return sys._getframe()


def _leaf(sampler: StackSampler, sid: int) -> str:
    key = next(k for k, v in sampler._stack_ids.items() if v == sid)
    return sampler._codes[key[0] - 1].co_name


def test_a_thread_read_running_then_ended_gets_its_cpu_since_in_that_stack():
    # thread 7 read at 10 ms in `parse` with 4 ms of CPU; it ends at 14 ms with 7 ms: the
    # 3 ms since are parse's (a row as long as its CPU: what else it did, nothing read)
    clock, cpu, ended = Clock(), {7: 0}, Ended()
    frames = {7: parse()}
    sampler = make(frames, cpu, clock, thread_ends=ended)
    sampler.sample()
    clock.now, cpu[7] = 10 * MS, 4 * MS
    sampler.sample()
    sampler.drain()
    ended.pending = [ThreadEnd(7, 7, "t7", -50 * MS, 14 * MS, 7 * MS)]
    frames.clear()
    clock.now = 20 * MS
    sampler.sample()
    [row] = sampler.drain()["samples"]
    assert row[:5] == [14 * MS, 7, row[2], 3 * MS, 3 * MS] and row[5] == ""
    assert _leaf(sampler, row[2]) == "parse" and sampler.ended_tails == 1


def _short_pool(sampler, frames, cpu, clock, ended, lives_ms):
    """Threads 11, 12... each read once at a tick (at 10 ms intervals) in its own
    function, running, then ended before the next with its whole life on a CPU."""
    for k, (code_of, life_ms) in enumerate(lives_ms):
        ident = 11 + k
        frames[ident] = code_of()
        cpu[ident] = 0
        sampler._threads = lambda: {}  # born unnamed: registered by ident
        clock.now += 10 * MS
        cpu[ident] = life_ms * MS // 2
        sampler.sample()
        del frames[ident]
        born = clock.now - life_ms * MS // 2
        life = life_ms * MS
        ended.pending.append(ThreadEnd(ident, ident, f"t{ident}", born, born + life, life))
    clock.now += 10 * MS
    sampler.sample()
    sampler.drain()


def test_unread_threads_take_stacks_from_read_short_threads_by_the_cpu_they_stand_for():
    # A thread in `parse` that lived 1 ms of a 10-ms tick is read 1 time in 10: it stands
    # for 9 unread ones (weight 1 ms x 9); one in `score` that lived 8 ms stands for a
    # quarter of one (8 ms x 0.25 = 2 ms). Unread threads' CPU splits ~9 to 2.
    clock, cpu, ended = Clock(), {}, Ended()
    frames: dict = {}
    sampler = make(frames, cpu, clock, thread_ends=ended)
    sampler.sample()
    _short_pool(sampler, frames, cpu, clock, ended, [(parse, 1), (score, 8)])
    ended.pending = [
        ThreadEnd(100 + k, 100 + k, f"gone-{k}", clock.now, clock.now + MS, MS) for k in range(400)
    ]
    clock.now += 10 * MS
    sampler.sample()
    out = sampler.drain()
    rows = out["samples"]
    assert len(rows) == 400 and all(r[3] == r[4] == MS for r in rows)  # their CPU, exact
    in_parse = sum(_leaf(sampler, r[2]) == "parse" for r in rows) / len(rows)
    assert 0.75 <= in_parse <= 0.90, in_parse  # 9 / 11 = 0.82
    # each under its own thread, named as it was
    assert {t[2] for t in out["threads"]} == {f"gone-{k}" for k in range(400)}
    assert sampler.unseen_threads == 400 and sampler.unseen_placed_ns == 400 * MS


def test_without_a_short_thread_read_running_an_unread_thread_s_cpu_is_counted_in_no_stack(
    blocked_frame,
):
    # the only short thread read was blocked (a pool's worker back in its queue): where
    # threads like it spend their CPU, no reading says
    clock, cpu, ended = Clock(), {}, Ended()
    frames: dict = {}
    sampler = make(frames, cpu, clock, thread_ends=ended)
    sampler.sample()
    frames[11], cpu[11] = blocked_frame, 0
    clock.now += 10 * MS
    cpu[11] = MS
    sampler.sample()
    del frames[11]
    ended.pending = [
        ThreadEnd(11, 11, "t11", clock.now - MS, clock.now + MS, 2 * MS),
        ThreadEnd(12, 12, "t12", clock.now, clock.now + MS, MS),
    ]
    clock.now += 10 * MS
    sampler.sample()
    sampler.drain()
    assert sampler.unplaced_ns == 2 * MS  # 11's CPU after its reading, and all of 12's
    assert sampler.unseen_threads == 1 and sampler.unseen_placed_ns == 0
