"""A batch job's critical path across threads (``analyzers.path``), on written-out samples:
10-ms rows as the sampler writes them, thread 1 the main thread."""

from __future__ import annotations

import pandas as pd
import pytest

from probe.analyzers.path import critical_path

TICK = 10_000_000


def rows(
    *specs: tuple[int, int, float, float, str],
    serving: bool = False,
    notified: frozenset[int] = frozenset(),
    behind_brief: frozenset[int] = frozenset(),
) -> pd.DataFrame:
    """(thread, tick, cpu share, wait share, reason) per row: one tick each; the threads in
    ``notified`` wait in ``Condition.wait`` (to be notified, not for a mutex), those in
    ``behind_brief`` wait (reason ``gil``) behind a briefly held lock's holder."""
    return pd.DataFrame(
        {
            "thread_id": [s[0] for s in specs],
            "ts_ns": [(s[1] + 1) * TICK for s in specs],
            "wall_ns": [TICK] * len(specs),
            "cpu_ns": [s[2] * TICK for s in specs],
            "wait_ns": [s[3] * TICK for s in specs],
            "reason": [s[4] for s in specs],
            "serving": [serving] * len(specs),
            "notify_wait": [s[0] in notified and s[4] == "lock" for s in specs],
            "brief_lock": [s[0] in behind_brief and s[4] == "gil" for s in specs],
            "user_function": ["work (app.py)"] * len(specs),
        }
    )


def on_path(samples: pd.DataFrame) -> pd.Series:
    factors = critical_path(samples, 1, TICK)
    assert factors is not None
    time = samples["cpu_ns"] * factors["cpu"] + samples["wait_ns"] * factors["wait"]
    return time.groupby(samples["thread_id"]).sum() / TICK


def test_a_join_is_replaced_by_the_work_it_waited_for():
    samples = rows(
        *[(1, t, 1.0, 0.0, "") for t in range(5)],  # the main thread computes 50 ms
        *[(1, t, 0.0, 1.0, "lock") for t in range(5, 15)],  # then joins for 100 ms
        *[(2, t, 1.0, 0.0, "") for t in range(5, 15)],  # while a worker computes
    )
    path = on_path(samples)
    assert path[1] == pytest.approx(5) and path[2] == pytest.approx(10)


def test_two_workers_share_the_wait_and_the_path_stays_the_main_thread_s_wall():
    samples = rows(
        *[(1, t, 0.0, 1.0, "lock") for t in range(10)],
        *[(2, t, 1.0, 0.0, "") for t in range(10)],
        *[(3, t, 0.2, 0.8, "gil") for t in range(10)],  # runnable, waiting for the GIL
    )
    path = on_path(samples)
    assert path.sum() == pytest.approx(10)
    assert path[2] == pytest.approx(5) and path[3] == pytest.approx(5)


def test_starved_consumers_are_not_the_work_their_producer_is():
    samples = rows(
        *[(1, t, 0.0, 1.0, "lock") for t in range(10)],  # main joins the consumers
        *[(c, t, 0.0, 1.0, "lock") for c in (2, 3, 4, 5) for t in range(10)],  # empty queue
        *[(6, t, 1.0, 0.0, "") for t in range(10)],  # the producer computes
    )
    path = on_path(samples)
    assert path.get(6) == pytest.approx(10)
    assert path.reindex([2, 3, 4, 5]).fillna(0).sum() == pytest.approx(0)


@pytest.mark.parametrize(("stalled", "brief"), [("lock", frozenset()), ("gil", frozenset({6}))])
def test_a_producer_stalled_behind_a_lock_takes_the_path_from_consumers_waiting_for_it(
    stalled, brief
):
    # ticks 0-7 the producer computes; 8-9 it waits on a mutex, or on the queue's mutex
    # whose holder lost the GIL, while the consumers wait to be notified: its wait is the
    # path, not theirs
    samples = rows(
        *[(1, t, 0.0, 1.0, "lock") for t in range(10)],  # main joins them
        *[(c, t, 0.0, 1.0, "lock") for c in (2, 3) for t in range(10)],  # empty queue
        *[(6, t, 1.0, 0.0, "") for t in range(8)],
        *[(6, t, 0.0, 1.0, stalled) for t in (8, 9)],
        notified=frozenset({2, 3}),
        behind_brief=brief,
    )
    path = on_path(samples)
    assert path.get(6) == pytest.approx(10)
    assert path.reindex([2, 3]).fillna(0).sum() == pytest.approx(0)
    # with nothing but waits to be notified in a tick, those are what there is
    alone = rows((1, 0, 0.0, 1.0, "lock"), (2, 0, 0.0, 1.0, "lock"), notified=frozenset({2}))
    assert on_path(alone).get(2) == pytest.approx(1)


def test_a_thread_caught_waiting_that_ran_most_of_its_interval_takes_the_path_as_its_work():
    # ticks 8-9: the main thread waits on the worker, the worker is caught waiting to be
    # notified, but its CPU clock says it ran 90% of those ticks (the two handed off
    # faster than the tick): that part of the path is its work, not its wait
    samples = rows(
        *[(1, t, 0.0, 1.0, "lock") for t in range(10)],
        *[(2, t, 1.0, 0.0, "") for t in range(8)],
        *[(2, t, 0.0, 0.1, "lock") for t in (8, 9)],
        notified=frozenset({2}),
    )
    read = samples.assign(interval_cpu_ns=samples["cpu_ns"])
    read.loc[read["thread_id"].eq(2) & read["reason"].eq("lock"), "interval_cpu_ns"] = 0.9 * TICK
    for frame, waited in ((samples, 2.0), (read, 0.2)):
        factors = critical_path(frame, 1, TICK)
        worker = frame["thread_id"] == 2
        on_cpu = (frame["cpu_ns"] * factors["cpu"])[worker].sum() / TICK
        wait = (frame["wait_ns"] * factors["wait"])[worker].sum() / TICK
        assert on_cpu + wait == pytest.approx(10)
        assert wait == pytest.approx(waited)


def test_a_wait_with_nobody_else_running_stays_on_the_main_thread():
    samples = rows(*[(1, t, 0.0, 1.0, "lock") for t in range(10)])
    assert on_path(samples)[1] == pytest.approx(10)


def test_a_helper_thread_is_off_the_path_while_the_main_thread_works_or_waits_on_io():
    samples = rows(
        *[(1, t, 0.3, 0.7, "network") for t in range(10)],  # the client waits on a socket
        *[(2, t, 0.0, 1.0, "network") for t in range(10)],  # the helper server's thread
    )
    path = on_path(samples)
    assert path[1] == pytest.approx(10) and path.get(2, 0) == pytest.approx(0)


def test_a_merged_row_spanning_many_ticks_is_shared_by_time():
    # the worker's 100-ms network wait is one merged row; the main thread joins it
    samples = pd.concat(
        [
            rows(*[(1, t, 0.0, 1.0, "lock") for t in range(10)]),
            pd.DataFrame(
                {
                    "thread_id": [2],
                    "ts_ns": [10 * TICK],
                    "wall_ns": [10 * TICK],
                    "cpu_ns": [0],
                    "wait_ns": [10 * TICK],
                    "reason": ["network"],
                    "serving": [False],
                    "notify_wait": [False],
                    "brief_lock": [False],
                    "user_function": ["work (app.py)"],
                }
            ),  # fmt: skip
        ],
        ignore_index=True,
    )
    path = on_path(samples)
    assert path[2] == pytest.approx(10) and path.get(1, 0) == pytest.approx(0)


def test_a_server_s_main_thread_has_no_batch_path():
    samples = rows(*[(1, t, 0.1, 0.9, "network") for t in range(10)], serving=True)
    assert critical_path(samples, 1, TICK) is None
    assert critical_path(rows((2, 0, 1.0, 0.0, "")), None, TICK) is None


def test_threads_queued_on_a_lock_behind_the_work_are_counted_as_queued_not_as_path():
    samples = rows(
        *[(1, t, 0.0, 1.0, "lock") for t in range(10)],  # main joins the workers
        *[(2, t, 0.02, 0.98, "network") for t in range(10)],  # one holds the lock, calls
        *[(w, t, 0.0, 1.0, "lock") for w in (3, 4, 5) for t in range(10)],  # queued
    )
    factors = critical_path(samples, 1, TICK)
    waiters = factors["waiters"].groupby(samples["thread_id"]).sum()
    assert waiters[[3, 4, 5]].tolist() == pytest.approx([1, 1, 1])  # each, every tick
    assert waiters[[1, 2]].sum() == 0
    assert on_path(samples)[2] == pytest.approx(10)


def test_consumers_waiting_to_be_notified_are_not_queued_behind_the_producer():
    # four consumers in Condition.wait on an empty queue while the producer computes:
    # starved, not a convoy on a lock (that read as "67 threads serialised by a lock")
    samples = rows(
        *[(1, t, 0.0, 1.0, "lock") for t in range(10)],  # main joins the producer
        *[(2, t, 1.0, 0.0, "") for t in range(10)],  # the producer computes
        *[(c, t, 0.0, 1.0, "lock") for c in (3, 4, 5, 6) for t in range(10)],
        notified=frozenset({3, 4, 5, 6}),
    )
    factors = critical_path(samples, 1, TICK)
    assert factors["waiters"].sum() == 0
    assert on_path(samples)[2] == pytest.approx(10)


def test_the_queue_behind_a_lock_is_counted_while_its_function_runs_not_over_the_run():
    # two threads queue on a mutex in `store` for 2 of the 10 ticks in which a third
    # works in it: 0.4 waiters on average, not 2 x 20 ms over the 20 ms on the path
    samples = rows(
        *[(1, t, 0.0, 1.0, "lock") for t in range(10)],
        *[(2, t, 1.0, 0.0, "") for t in range(10)],
        *[(w, t, 0.0, 1.0, "lock") for w in (3, 4) for t in range(2)],
    )
    waiters = critical_path(samples, 1, TICK)["waiters"]
    assert waiters.sum() == pytest.approx(0.4)


def test_waits_behind_a_briefly_held_lock_are_off_the_path_while_the_work_runs():
    # a pool's workers convoyed on its semaphore's lock, whose holder lost the GIL, while
    # another worker computes: waits for the GIL (by reason) on another thread, neither
    # the work nor a queue behind a lock held across it
    samples = rows(
        *[(1, t, 0.0, 1.0, "lock") for t in range(10)],  # main waits for the results
        *[(2, t, 1.0, 0.0, "") for t in range(10)],  # the worker computing
        *[(w, t, 0.0, 1.0, "gil") for w in (3, 4) for t in range(10)],  # convoyed
        behind_brief=frozenset({3, 4}),
    )
    path = on_path(samples)
    assert path[2] == pytest.approx(10) and path.get(3, 0) == path.get(4, 0) == 0
    assert critical_path(samples, 1, TICK)["waiters"].sum() == 0
    # the same waits as plain GIL waits (runnable threads) share the path
    plain = on_path(samples.assign(brief_lock=False))
    assert plain[3] == pytest.approx(10 / 3)


def test_threads_woken_from_a_queue_and_waiting_for_a_cpu_take_no_share_beside_the_work():
    # ingest_pipeline beside CPU hogs: the main thread joins; the producer computes; the
    # consumers, woken for each record, wait for a core (rows split off their queue waits)
    samples = rows(
        *[(1, t, 0.0, 1.0, "lock") for t in range(10)],
        *[(2, t, 0.6, 0.4, "unknown") for t in range(10)],  # the producer, itself preempted
        *[(c, t, 0.0, 0.5, "unknown") for c in (3, 4, 5) for t in range(10)],
    ).assign(woken=lambda df: df["thread_id"] >= 3)
    path = on_path(samples)
    assert path[2] == pytest.approx(10)  # the main thread's whole wait
    assert path.get(3, 0.0) == path.get(4, 0.0) == path.get(5, 0.0) == 0.0


def test_a_thread_woken_and_waiting_for_a_cpu_takes_the_wait_where_nothing_else_ran():
    # render_queue beside CPU hogs: the main thread blocked putting on a full queue, the
    # worker woken from the queue and waiting for a core: the worker's wait is the path,
    # as the CPU it waits for (unknown), not as the queue's lock
    samples = rows(
        *[(1, t, 0.0, 1.0, "lock") for t in range(10)],
        *[(2, t, 0.0, 1.0, "unknown") for t in range(10)],
    ).assign(woken=lambda df: df["thread_id"] == 2)
    path = on_path(samples)
    assert path[2] == pytest.approx(10) and path.get(1, 0.0) == pytest.approx(0.0)


def test_the_main_thread_s_wait_for_a_cpu_after_a_wake_goes_to_the_thread_working_beside_it():
    # render_queue beside CPU hogs: the main thread, woken from a full queue's put,
    # waits for a core while the worker renders; the next item only goes in when the
    # worker takes one: the worker's rendering is the path
    samples = rows(
        *[(1, t, 0.0, 1.0, "lock") for t in range(0, 10, 2)],
        *[(1, t, 0.0, 1.0, "unknown") for t in range(1, 10, 2)],  # woken, no core
        *[(2, t, 0.7, 0.3, "unknown") for t in range(10)],  # renders, itself preempted
    ).assign(woken=lambda df: (df["thread_id"] == 1) & (df["reason"] == "unknown"))
    path = on_path(samples)
    assert path[2] == pytest.approx(10) and path.get(1, 0.0) == pytest.approx(0.0)
    # so is its time runnable in Condition.wait, notified and waiting for the GIL
    notified = samples.assign(
        woken=False,
        reason=samples["reason"].replace("unknown", "gil"),
        notify_wait=samples["thread_id"] == 1,
    )
    path = on_path(notified)
    assert path[2] == pytest.approx(10) and path.get(1, 0.0) == pytest.approx(0.0)


def test_the_main_thread_keeps_its_wait_for_a_cpu_where_the_others_only_wait():
    # a worker waiting on a lock, or to be notified, needs no core: the main thread's
    # wait for one is its own (the host's cores, taken by other processes)
    for notified in (frozenset(), frozenset({2})):
        samples = rows(
            *[(1, t, 0.0, 1.0, "unknown") for t in range(10)],
            *[(2, t, 0.0, 1.0, "lock") for t in range(10)],
            notified=notified,
        ).assign(woken=lambda df: df["thread_id"] == 1)
        path = on_path(samples)
        assert path[1] == pytest.approx(10) and path.get(2, 0.0) == pytest.approx(0.0)
