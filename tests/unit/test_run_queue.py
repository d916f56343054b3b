"""The note on a run whose threads waited for a CPU (``analyzers.run_queue``), on
written-out sample rows."""

from __future__ import annotations

import pandas as pd

from probe.analyzers.run_queue import (
    RUN_QUEUE,
    RunQueueWait,
    others_held_cores,
    run_queue_note,
    run_queue_wait,
)


def samples(cpu_ms: list[float], queued_ms: list[float | None]) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "cpu_ns": [c * 1e6 for c in cpu_ms],
            "queued_ns": pd.array([None if q is None else int(q * 1e6) for q in queued_ms],
                                  dtype="Int64"),
        }
    )  # fmt: skip


def test_the_wait_is_the_share_of_the_ready_time_spent_on_the_run_queue():
    wait = run_queue_wait(samples([10, 4, 0], [0, 6, 10]))
    assert wait is not None
    assert (wait.queued_s, wait.ran_s) == (0.016, 0.014)
    assert abs(wait.share - 16 / 30) < 1e-9


def test_a_run_without_run_queue_readings_has_no_wait_and_no_note():
    assert run_queue_wait(samples([10, 10], [None, None])) is None
    assert run_queue_wait(pd.DataFrame({"cpu_ns": [1e7]})) is None
    assert run_queue_note(None, cpu_count=2, host_cores_busy=2.0, process_cores=0.5) == []


def test_beside_cpu_bound_processes_the_note_names_them_and_the_figures():
    # render_queue beside three CPU hogs: 1.41 s queued, 1.20 s on a CPU
    (note,) = run_queue_note(
        RunQueueWait(1.41, 1.20), cpu_count=2, host_cores_busy=2.0, process_cores=0.52
    )
    assert "1.41 s on the kernel's run queue" in note and "54%" in note
    assert "other processes kept 1.5 of the host's 2 cores busy" in note


def test_waits_among_the_process_s_own_threads_are_no_note():
    # tokenize_pool on an idle host: four GIL-bound threads, 0.45 of their ready time
    # queued; its GIL finding speaks for it
    wait = RunQueueWait(0.81, 0.99)
    assert run_queue_note(wait, cpu_count=2, host_cores_busy=1.1, process_cores=0.9) == []


def test_a_wait_under_the_bars_is_no_note():
    below = RUN_QUEUE.note_share * 0.9
    for wait in (RunQueueWait(below, 1.0 - below), RunQueueWait(0.07, 0.06)):  # ship_logs
        assert run_queue_note(wait, cpu_count=2, host_cores_busy=2.0, process_cores=0.5) == []


def test_a_wait_is_the_machines_wherever_others_held_the_cores_whatever_its_share():
    # 0.15 s queued of 1.05 s ready (14%): under the note's share, still the machine's
    small = RunQueueWait(queued_s=0.15, ran_s=0.9)
    assert others_held_cores(small, host_cores_busy=1.9, process_cores=0.8)
    # the same wait with the host's other cores idle is the process's own threads'
    assert not others_held_cores(small, host_cores_busy=1.0, process_cores=0.8)
    # a few ticks on a run queue are no figure to act on
    brief = RunQueueWait(queued_s=0.05, ran_s=0.9)
    assert not others_held_cores(brief, host_cores_busy=1.9, process_cores=0.8)
    assert not others_held_cores(None, host_cores_busy=1.9, process_cores=0.8)
