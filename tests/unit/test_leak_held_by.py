"""What holds a leak's growth: the bounds on the small objects' share, from Python's live
blocks read beside the memory series (``analyzers.leaks.growth``)."""

from __future__ import annotations

import numpy as np

from probe.analyzers.leaks.growth import (
    held_by,
    malloc_share,
    piled,
    piling_up,
    small_objects_part,
    small_objects_share,
    what_holds,
)


def test_blocks_that_rise_with_the_memory_bound_the_small_objects_share_from_both_sides():
    t = np.arange(0.0, 10.0, 0.1)
    blocks = 100_000 + 1_000 * t  # 10,000 blocks over a 1-MB rise: 16-512 bytes each
    low, high = small_objects_share(1e6, t, blocks)
    assert abs(low - 0.16) < 0.01 and high == 1.0


def test_a_gc_saw_tooth_over_flat_blocks_holds_no_share():
    t = np.arange(0.0, 10.0, 0.1)
    blocks = 100_000 + 5_000 * (np.arange(len(t)) % 10 == 9)  # a collection's garbage
    low, high = small_objects_share(2e6, t, blocks)
    assert low == 0.0 and high == 0.0


def test_too_few_readings_or_no_rise_leave_the_share_unjudged():
    t = np.array([0.0, 1.0])
    assert small_objects_share(1e6, t, np.array([1.0, 2.0])) is None
    assert small_objects_share(0.0, np.arange(5.0), np.arange(5.0)) is None
    nan = np.array([np.nan, np.nan, 1.0, np.nan])
    assert small_objects_share(1e6, np.arange(4.0), nan) is None


def test_the_blocks_bounds_alone_speak_only_past_three_quarters_either_way():
    assert small_objects_part((0.0, 0.2), None) == ("large", 0.2, False)
    assert small_objects_part((0.8, 1.0), None) == ("small", 0.8, False)
    assert small_objects_part((0.16, 1.0), None) is None  # 16-512 bytes a block: open


def test_malloc_s_bytes_place_the_estimate_within_the_blocks_bounds():
    # a dict of short strings: malloc rose by 0.6% of it, its blocks bound it from 16%
    assert small_objects_part((0.16, 1.0), 0.006) == ("small", 0.994, True)
    # native memory: malloc took all of it
    assert small_objects_part((0.0, 0.002), 1.0) == ("large", 0.0, True)
    # the blocks' bounds win over malloc's reading: they cannot hold more than 512 B each
    assert small_objects_part((0.0, 0.1), 0.0) == ("large", 0.1, True)
    assert small_objects_part((0.2, 1.0), 0.5) is None  # half and half: open


def test_the_sentence_names_a_container_or_large_and_native_memory_and_keeps_quiet_between():
    assert "native memory" in held_by((0.0, 0.004)) and "less than 1%" in held_by((0.0, 0.004))
    assert "at most 20%" in held_by([0.0, 0.2])
    assert "about 10%" in held_by([0.0, 0.2], 0.9)  # 1 - 0.9, within the bounds
    assert "container" in held_by((0.16, 1.0), 0.05)
    assert held_by((0.16, 1.0), 0.05).startswith("About 95% of it is small Python objects")
    assert held_by((0.8, 1.0)).startswith("At least 80%")
    assert held_by((0.1, 0.9)) == "" and held_by(None) == ""
    assert held_by((0.0, 0.2), brief=True).endswith("the rest large or native")


def test_malloc_s_share_is_its_rise_over_the_memory_s_held_within_zero_and_one():
    t = np.arange(0.0, 10.0, 0.5)
    assert abs(malloc_share(2e6, t, 1e6 + 1e5 * t) - 0.475) < 1e-9  # 0.95 MB of 2 over 9.5 s
    assert malloc_share(2e6, t, 1e6 - 1e5 * t) == 0.0
    assert malloc_share(1e6, t, 1e6 + 1e6 * t) == 1.0
    assert malloc_share(1e6, t[:2], t[:2]) is None


def test_a_count_that_climbs_steadily_piles_up_with_its_rate_a_request():
    t = np.arange(0.0, 10.0, 0.1)
    threads = 5 + np.floor(9 * t)  # one a request at 9 requests a second
    ends = np.arange(0.05, 10.0, 1 / 9)
    (pile,) = piling_up({"threads": (t, threads)}, ends, judged_from=2.5)
    assert pile["what"] == "threads" and pile["first"] == 27 and pile["last"] == 94
    assert abs(pile["per_request"] - 1.0) < 0.05 and abs(pile["per_s"] - 9) < 0.5


def test_a_pool_filling_to_its_size_or_a_few_more_does_not_pile_up():
    t = np.arange(0.0, 10.0, 0.1)
    pool = np.minimum(4 + np.floor(10 * t), 40)  # anyio's 40 threads, full at 3.6 s
    few = 4 + np.floor(0.8 * t)  # eight more over the run
    flat = np.full(len(t), 12.0)
    series = {"threads": (t, pool), "file descriptors": (t, few), "asyncio tasks": (t, flat)}
    assert piling_up(series) == []


def test_what_piles_up_speaks_before_the_memory_s_shares_and_names_its_cause():
    pile = {"what": "asyncio tasks", "first": 10, "last": 600, "per_s": 90.0, "per_request": 1.0}
    leak = {"small_objects_share": [0.0, 0.002], "malloc_share": 1.0, "piling_up": [pile]}
    kind, said = what_holds(leak)
    assert kind == "asyncio tasks" and "coroutine's frame" in said
    assert what_holds(leak, brief=True)[1] == "asyncio tasks pile up (10 to 600, 1 a request)"
    assert what_holds({**leak, "piling_up": []})[0] == "large"
    assert what_holds({"small_objects_share": None}) == ("", "")
    assert piled(None) == ""


def test_every_pile_constant_says_where_its_number_comes_from():
    from probe.analyzers.constants import sources
    from probe.analyzers.leaks.growth import PileSettings

    assert all(len(text) >= 20 for text in sources(PileSettings()).values())
