"""Attribution of each thread's time to stacks: exact CPU, instants for the rest."""

from __future__ import annotations

import pandas as pd
from pytest import approx

from probe.analyzers.attribution import attribute, split_run_queue_waits

MS = 1_000_000


def samples(rows: list[tuple]) -> pd.DataFrame:
    return pd.DataFrame(rows, columns=["thread_id", "stack_id", "wall_ns", "cpu_ns", "wait_reason"])


def totals(df: pd.DataFrame) -> pd.DataFrame:
    return df.groupby("thread_id")[["wall_ns", "cpu_ns", "wait_ns"]].sum()


def test_work_between_short_sleeps_is_charged_to_the_work_not_the_sleep():
    # 0.45 ms of work then a 0.6 ms sleep, faster than the 10 ms sampling interval: every
    # interval used ~4.5 ms of CPU, and most samples caught the thread in the sleep.
    rows = [(1, 9, 10 * MS, 4 * MS, "sleep")] * 7 + [(1, 5, 10 * MS, 5 * MS, "unknown")] * 3
    out = attribute(samples(rows))
    assert (out.loc[out["reason"] == "sleep", "cpu_ns"] == 0).all()
    assert out.loc[out["stack_id"] == 5, "cpu_ns"].sum() == approx(43 * MS)  # all the CPU, exact
    t = totals(out).loc[1]
    assert t["cpu_ns"] == approx(43 * MS) and t["cpu_ns"] + t["wait_ns"] == approx(t["wall_ns"])
    assert out.loc[out["reason"] == "sleep", "wait_ns"].sum() == approx(57 * MS)


def test_a_thread_caught_running_less_than_its_cpu_keeps_waits_for_the_rest():
    rows = [(1, 1, 10 * MS, 2 * MS, "network")] * 8 + [(1, 2, 10 * MS, 9 * MS, "")] * 2
    out = attribute(samples(rows))
    t = totals(out).loc[1]
    assert t["cpu_ns"] == approx(34 * MS)  # 16 + 18, exact
    assert out.loc[out["reason"] == "network", "wait_ns"].sum() == approx(66 * MS)
    assert t["cpu_ns"] + t["wait_ns"] == approx(t["wall_ns"])


def test_gil_contention_is_kept_as_gil_and_threads_do_not_mix():
    rows = [
        (1, 1, 10 * MS, 5 * MS, "gil"),
        (2, 1, 10 * MS, 5 * MS, "gil"),
        (1, 1, 10 * MS, 5 * MS, ""),
    ]
    out = attribute(samples(rows))
    by_thread = totals(out)
    assert by_thread.loc[1, "cpu_ns"] == approx(10 * MS)
    assert by_thread.loc[2, "cpu_ns"] == approx(5 * MS)
    assert set(out.loc[out["wait_ns"] > 0, "reason"]) == {"gil"}  # "" rows take the dominant


def test_pure_waiting_and_cpu_never_caught_running_stay_exact():
    rows = [(1, 1, 10 * MS, 0, "lock")] * 3 + [(2, 4, 10 * MS, 3 * MS, "disk")] * 2
    out = attribute(samples(rows))
    by_thread = totals(out)
    assert by_thread.loc[1, "cpu_ns"] == 0 and by_thread.loc[1, "wait_ns"] == approx(30 * MS)
    assert by_thread.loc[2, "cpu_ns"] == approx(6 * MS)  # nowhere better than its rows
    assert by_thread.loc[2, "cpu_ns"] + by_thread.loc[2, "wait_ns"] == approx(20 * MS)


def test_no_samples_gives_an_empty_frame_with_the_columns():
    out = attribute(samples([]))
    assert out.empty and list(out.columns) == [
        "thread_id",
        "stack_id",
        "wall_ns",
        "cpu_ns",
        "wait_ns",
        "reason",
    ]


def test_a_wait_behind_a_briefly_held_lock_takes_no_cpu_and_waits_as_its_holder_does():
    # a pool worker blocked entering its semaphore's lock (stack 3), whose holder lost the
    # GIL: no CPU of its own, and a wait for the GIL (the thread's runnable reason)
    rows = [(1, 3, 10 * MS, 2 * MS, "lock")] * 5 + [(1, 5, 10 * MS, 6 * MS, "gil")] * 5
    out = attribute(samples(rows), brief_lock_stacks=[3])
    behind = out[out["stack_id"] == 3]
    assert (behind["cpu_ns"] == 0).all() and set(behind["reason"]) == {"gil"}
    assert out["cpu_ns"].sum() == approx(40 * MS)
    # without it, the same rows are lock waits
    assert set(attribute(samples(rows)).query("stack_id == 3")["reason"]) == {"lock"}


def test_a_blocked_row_s_wait_for_a_cpu_is_split_off_as_runnable_and_takes_no_cpu():
    # a worker caught in `queue.get` after an interval it spent 3 ms on a CPU, 6 ms on a
    # run queue and 1 ms blocked; its other row ran the whole interval
    raw = pd.DataFrame(
        {
            "ts_ns": [10 * MS, 20 * MS],
            "thread_id": [1, 1],
            "stack_id": [7, 8],
            "wall_ns": [10 * MS, 10 * MS],
            "cpu_ns": [3 * MS, 10 * MS],
            "wait_reason": ["lock", ""],
            "samples": [1, 1],
            "kernel_state": ["", ""],
            "queued_ns": [6 * MS, 0],
        }
    ).astype({"queued_ns": "Int64", "wait_reason": "string", "kernel_state": "string"})
    split = split_run_queue_waits(raw)
    assert len(split) == 3 and split["wall_ns"].sum() == 20 * MS  # nothing made or lost
    made = split[split["woken"]]
    assert made[["ts_ns", "wall_ns", "cpu_ns"]].values.tolist() == [[6 * MS, 6 * MS, 0]]
    assert made["wait_reason"].tolist() == ["unknown"] and made["stack_id"].tolist() == [7]
    out = attribute(split)
    by = out.groupby(["stack_id", "reason"])[["cpu_ns", "wait_ns"]].sum()
    assert by.loc[(7, "lock"), "wait_ns"] == approx(4 * MS)  # blocked: 10 - 6 queued
    assert by.loc[(7, "unknown"), "cpu_ns"] == approx(0)  # it ran nothing while queued
    assert by.loc[(7, "unknown"), "wait_ns"] == approx(6 * MS)
    assert out["cpu_ns"].sum() == approx(13 * MS)


def test_runs_without_run_queue_readings_are_attributed_as_before():
    rows = [(1, 9, 10 * MS, 4 * MS, "lock")] * 2 + [(1, 5, 10 * MS, 5 * MS, "unknown")]
    plain = samples(rows).assign(ts_ns=[10 * MS, 20 * MS, 30 * MS])
    assert split_run_queue_waits(plain) is plain
    unread = plain.assign(queued_ns=pd.array([None, None, None], dtype="Int64"))
    assert split_run_queue_waits(unread)["wall_ns"].tolist() == plain["wall_ns"].tolist()
