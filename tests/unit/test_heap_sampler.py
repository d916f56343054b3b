"""The heap sampler: allocated blocks every tick, gc type counts only when asked, on fake
clocks and a fake heap."""

from __future__ import annotations

from collections import OrderedDict

import pytest

from probe.samplers.heap import HeapSampler, malloc_in_use_reader, type_name


def make(cost_s: float, heap: list[object]) -> tuple[HeapSampler, list[int]]:
    now = [0]
    readings = iter([0.0, cost_s] * 1000)  # each count: started, then ended cost_s later
    s = HeapSampler(
        clock=lambda: now[0],
        timer=lambda: next(readings),
        allocated_blocks=lambda: len(heap) * 10,
        gc_objects=lambda: list(heap),
    )
    return s, now


def test_blocks_are_read_every_tick_and_types_counted_only_when_asked():
    # counting types from probe's thread can break the target's tuple(generator): never
    # on the sampler's own initiative
    heap: list[object] = [{}, {}, [], OrderedDict()]
    s, now = make(0.001, heap)
    for t in range(12):
        now[0] = t * 1_000_000_000
        s.sample(count_types=t in (0, 5, 10))
    rows = s.drain()
    assert [b for _, b, _ in rows["heap"]] == [40] * 12
    counted_at = sorted({ts for ts, *_ in rows["gc_types"]})
    assert counted_at == [0, 5_000_000_000, 10_000_000_000]
    first = {name: n for ts, snap, name, n in rows["gc_types"] if snap == 1}
    assert first == {"dict": 2, "list": 1, "collections.OrderedDict": 1}
    assert s.counted == 3 and abs(s.count_cost_s - 0.003) < 1e-12


def test_a_costly_blocks_read_is_spaced_to_stay_under_its_budget_and_stop_always_reads():
    # a 10-ms read at 0.5% of the time: one read every 2 s, however often it is ticked
    s, now = make(0.010, [1, 2])
    for tick in range(50):  # 5 s at 10 Hz
        now[0] = tick * 100_000_000
        s.sample()
    assert [ts for ts, *_ in s.drain()["heap"]] == [0, 2_000_000_000, 4_000_000_000]
    now[0] = 4_100_000_000
    s.sample(force=True)  # the session's last reading, at stop
    assert len(s.drain()["heap"]) == 1


def test_a_cheap_blocks_read_is_taken_at_every_tick():
    s, now = make(0.000_1, [1, 2])  # 0.1 ms: due again after 20 ms
    for tick in range(10):
        now[0] = tick * 100_000_000
        s.sample()
    assert len(s.drain()["heap"]) == 10


def test_a_count_can_be_asked_for_and_drain_empties_the_rows():
    s, now = make(0.001, [1, 2])
    s.sample()  # a tick: blocks only
    s.sample(count_types=True)  # the session's last count at stop
    assert s.counted == 1
    assert len(s.drain()["heap"]) == 2
    assert s.drain() == {"heap": [], "gc_types": []}


def test_the_bytes_malloc_holds_are_read_beside_the_blocks_and_null_without_a_reader():
    in_use = iter(range(1000, 2000, 100))
    s = HeapSampler(clock=lambda: 0, allocated_blocks=lambda: 7, malloc_in_use=lambda: next(in_use))
    s.sample(force=True)
    s.sample(force=True)
    assert [row[1:] for row in s.drain()["heap"]] == [(7, 1000), (7, 1100)]
    bare = HeapSampler(clock=lambda: 0, allocated_blocks=lambda: 7)
    bare.sample(force=True)
    assert [row[1:] for row in bare.drain()["heap"]] == [(7, None)]


def test_a_full_collection_at_the_end_reads_what_is_alive_before_and_after_it():
    blocks, in_use = iter([900, 600]), iter([50_000, 20_000])
    s = HeapSampler(allocated_blocks=lambda: next(blocks), malloc_in_use=lambda: next(in_use))
    ran = []
    full = s.full_collection(collect=lambda: ran.append(1) or 42, enabled=lambda: True)
    assert ran == [1] and full is not None
    assert (full["blocks_before"], full["blocks_after"]) == (900, 600)
    assert (full["malloc_in_use_before"], full["malloc_in_use_after"]) == (50_000, 20_000)
    assert full["objects_freed"] == 42


def test_a_target_that_turned_the_collector_off_gets_no_collection_from_us():
    s = HeapSampler(allocated_blocks=lambda: 1)
    assert s.full_collection(collect=lambda: 1 / 0, enabled=lambda: False) is None


def test_the_malloc_reader_sees_a_buffer_allocated_and_freed():
    read = malloc_in_use_reader()
    if read is None:
        pytest.skip("no glibc mallinfo2 here")
    before = read()
    buffer = bytearray(64 * 1024 * 1024)
    held = read()
    del buffer
    assert held - before >= 64 * 1024 * 1024
    assert read() < held - 32 * 1024 * 1024


def test_type_names_are_bare_for_builtins_and_qualified_otherwise():
    assert type_name(dict) == "dict"
    assert type_name(OrderedDict) == "collections.OrderedDict"


def test_a_few_growing_objects_are_kept_beside_the_most_numerous_types():
    class Leaked:
        pass

    heap: list[object] = [(i,) for i in range(100)]  # many tuples: the most numerous
    now = [0]
    s = HeapSampler(
        clock=lambda: now[0],
        timer=lambda: 0.0,
        allocated_blocks=lambda: 0,
        gc_objects=lambda: list(heap),
        top_types=1,
    )
    s.sample(count_types=True)  # the baseline: every type
    heap += [Leaked() for _ in range(3)]
    now[0] = 5_000_000_000
    s.sample(count_types=True)
    second = {name for _, snap, name, _ in s.drain()["gc_types"] if snap == 2}
    assert second == {"tuple", type_name(Leaked)}  # the most numerous, and the one that grew
