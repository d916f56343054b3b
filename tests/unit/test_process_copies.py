"""Data copied between processes (``analyzers.transfer``, ``roles.process_transfer``):
multiprocessing's send and receive paths told apart from the rest, their CPU summed over
threads, a note where the copy takes half a core or more, and a verdict's confidence
lowered beside it (the copy is on no stage of the service's)."""

from __future__ import annotations

import pandas as pd
import pytest

from probe.analyzers.roles import process_transfer
from probe.analyzers.rules import Finding, RunFacts, with_doubts
from probe.analyzers.transfer import copy_cores, transfer_notes, transfer_table

MP = "/usr/lib/python3.11/multiprocessing/"
FEEDER = [
    ("Thread._bootstrap", "/usr/lib/python3.11/threading.py"),
    ("Queue._feed", MP + "queues.py"),
]
WORKER = [("_process_worker", "/usr/lib/python3.11/concurrent/futures/process.py")]


@pytest.mark.parametrize(
    ("frames", "side"),
    [
        (FEEDER + [("ForkingPickler.dumps", MP + "reduction.py")], "send"),
        (FEEDER + [("_ConnectionBase.send_bytes", MP + "connection.py")], "send"),
        (WORKER + [("Queue.get", MP + "queues.py")], "receive"),
        (WORKER + [("Queue.get", MP + "queues.py"), ("_ConnectionBase.recv", MP + "connection.py")],
         "receive"),
        # the feeder waiting for something to send moves nothing; a service's own
        # function of the same name is not multiprocessing's
        (FEEDER + [("Condition.wait", "/usr/lib/python3.11/threading.py")], ""),
        ([("Queue.get", "/srv/app/queues.py")], ""),
    ],
)  # fmt: skip
def test_multiprocessing_s_send_and_receive_paths_are_told_apart(frames, side):
    assert process_transfer(frames) == side


def samples(rows: list[tuple[int, str, str, float, float]]) -> pd.DataFrame:
    """(thread, transfer side, wait reason, CPU s, wait s) rows, as attributed samples."""
    return pd.DataFrame(
        [
            {"thread_id": t, "transfer": side, "reason": why, "cpu_ns": c * 1e9, "wait_ns": w * 1e9}
            for t, side, why, c, w in rows
        ]
    )  # fmt: skip


FRAMES_TO_A_POOL = samples(
    [
        (1, "", "", 2.0, 0.0),  # the main thread making frames
        (1, "", "subprocess", 0.0, 6.0),  # ...then waiting for results
        (2, "send", "", 3.7, 0.0),  # the feeder pickling and writing
        (2, "send", "subprocess", 0.0, 4.9),  # blocked on full pipes
        (3, "receive", "", 1.4, 0.0),  # a worker reading and unpickling
        (3, "receive", "subprocess", 0.0, 3.5),  # ...and waiting for its next task
        (4, "receive", "", 1.4, 0.0),
    ]
)


def test_the_copy_is_the_cpu_spent_sending_and_receiving_not_the_waits():
    table = transfer_table(FRAMES_TO_A_POOL)
    assert set(table.index) == {2, 3, 4}
    assert table.loc[2, "send_cpu_s"] == pytest.approx(3.7)
    assert table.loc[2, "send_blocked_s"] == pytest.approx(4.9)
    assert table.loc[3, "receive_cpu_s"] == pytest.approx(1.4)  # its blocked read left out
    assert copy_cores(table, 8.7) == pytest.approx(6.5 / 8.7)


def test_a_copy_of_a_twentieth_of_the_run_or_more_is_said_with_what_to_do_instead():
    [note] = transfer_notes(transfer_table(FRAMES_TO_A_POOL), 8.7)
    assert note.startswith(
        "moving data between processes by copy took 6.5 s of CPU in a 8.7-s run (0.7 of a core)"
    )
    assert "blocked on full pipes 4.9 s more" in note and "shared_memory" in note
    # the bar is the run's wall, not a count of cores: 0.5 s of copying in 10 s is said
    twentieth = samples([(2, "send", "", 0.3, 0.0), (3, "receive", "", 0.2, 0.0)])
    assert transfer_notes(transfer_table(twentieth), 10.0)
    assert not transfer_notes(transfer_table(twentieth), 11.0)


def test_a_pool_of_small_tasks_blocked_on_busy_workers_gets_no_note():
    # Pool.map's task handler blocked writing while its workers compute: backpressure,
    # not copying (tests/threads_corpus's pool_score: 0.01 of a core copying)
    busy = samples([(2, "send", "subprocess", 0.0, 1.3), (3, "receive", "", 0.02, 0.0)])
    assert transfer_notes(transfer_table(busy), 1.5) == []
    assert transfer_notes(transfer_table(samples([(1, "", "", 1.0, 0.0)])), 1.0) == []


def decoding(share: float, confidence: float, sampled_s: float) -> Finding:
    return Finding(
        kind="cpu", subkind="native", stage="decode", share=share, confidence=confidence,
        rule="cpu_native", evidence={"sampled_s": sampled_s, "native": 0.9},
    )  # fmt: skip


def copying(cores: float) -> RunFacts:
    return RunFacts(cpu_count=2, process_cores=1.3, copy_cores=cores)


def test_a_verdict_beside_a_copy_as_large_as_its_stage_loses_its_confidence():
    decode = decoding(share=0.47, confidence=0.54, sampled_s=4.0)
    # as frame_stats in a CI run (decode at 52% of the path, the copy 0.495 of a core)
    doubted = with_doubts(decode, [], copying(0.45))
    assert doubted.confidence == pytest.approx(0.54 * 0.1, abs=0.002)
    assert any(
        "copying data between processes took 0.5 of a core (see the note), 96% as much as "
        "`decode`'s 47%" in d
        for d in doubted.evidence["doubts"]
    )
    # a copy of a third of the stage's share leaves the stage a clear lead (clear_lead)
    assert with_doubts(decode, [], copying(0.15)) == decode
    assert with_doubts(decode, [], copying(0.01)) == decode


def test_a_copy_bigger_than_the_stage_leaves_it_a_tenth_of_its_confidence():
    decode = decoding(share=0.2, confidence=0.9, sampled_s=2.0)
    assert with_doubts(decode, [], copying(0.6)).confidence == pytest.approx(0.09)
