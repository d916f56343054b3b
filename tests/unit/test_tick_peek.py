"""Stacks read at the tick's instant (probe.samplers.peek): which threads are read, which
chains are believed, how the stack sampler uses them -- on a fake of the compiled module
-- and the compiled module's reads on this process's own threads."""

from __future__ import annotations

import os
import sys
import threading
import time

import pytest

from probe.samplers.peek import TickPeek, peek_module
from probe.samplers.stacks import StackSampler
from probe.samplers.ticker import Ticker
from tests.build_env import c_compiler_and_headers

OFFSET = 100  # the fake's code objects' first instruction, from their address


class FakeModule:
    """probe._tickpeek's calls, with chains set by the test; code addresses are ids."""

    USABLE = 1
    CODE_OFFSET = OFFSET

    def __init__(self, states: dict[int, int], chains: dict[int, tuple[int, ...] | None]):
        self.states, self.chains, self.waits = states, chains, []
        self.live: dict[int, object] = {}  # address -> a code object code_at vouches for

    def thread_states(self):
        return dict(self.states)

    def wait_and_peek(self, fd, timeout_s, states, max_depth):
        self.waits.append((timeout_s, list(states)))
        readable = os.read(fd, 1) if _readable(fd) else b""
        return None if readable else (0, [self.chains.get(s) for s in states])

    def code_at(self, address):
        return self.live.get(address)


def _readable(fd: int) -> bool:
    import select

    return bool(select.select([fd], [], [], 0)[0])


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
    peek = TickPeek(module=module)
    clock = [0]
    sampler = StackSampler(
        clock=lambda: clock[0],
        current_frames=lambda: gil_time,
        thread_cpu=lambda tid: clock[0],
        threads=dict,
        peek=peek,
    )
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
        chains = peek.take()
        leaf = peek.frame(chains[thread.ident], lambda address: None)
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
        assert threading.get_ident() not in chains
        peek.close()
    finally:
        release.set()
        thread.join()


def test_the_environment_can_ask_for_the_stacks_read_with_the_gil(monkeypatch):
    monkeypatch.setenv("PROBE_GIL_STACKS", "1")
    assert peek_module() is None and not TickPeek().available
    sampler = StackSampler(peek=TickPeek())
    assert sampler.peek is None  # and the session's ticker then waits on its own event
