"""Journals parsed as they grow read the same as journals parsed whole at the end."""

from __future__ import annotations

import json

import pytest

from probe.rundir.journals import JournalFollower, read_jsonl
from probe.rundir.writer import RunWriter, prepare_run_dir


def span(i: int) -> tuple:
    return (
        i,
        None,
        f"stage{i % 3}",
        "stage",
        i * 10,
        i * 10 + 5,
        f"r{i}",
        {"k": i} if i % 2 else None,
    )


def test_a_journal_followed_as_it_grows_reads_as_the_whole_of_it(tmp_path):
    w = RunWriter(prepare_run_dir(tmp_path / "run"))
    follower = JournalFollower(w.path)
    for flush in range(4):
        w.append("spans", [span(flush * 10 + i) for i in range(10)], prefix=(7 + flush % 2,))
        w.flush()
        follower.catch_up()
    w.close()
    assert follower.parsed_bytes == (w.path / "spans.jsonl").stat().st_size
    with open(w.path / "spans.jsonl", "a") as f:  # a batch cut short by a kill
        f.write('[[7],[[99,null,"cut sh')
    whole, whole_notes = read_jsonl(w.path / "spans.jsonl", "spans")
    followed, notes = follower.take("spans")
    assert followed.equals(whole) and followed.num_rows == 40
    assert notes == whole_notes and "incomplete" in notes[0]


def test_a_line_still_being_written_waits_for_its_end(tmp_path):
    w = RunWriter(prepare_run_dir(tmp_path / "run"))
    w.append("spans", [span(1)], prefix=(7,))
    w.close()
    line = json.dumps([[8], [list(span(2))]])
    with open(w.path / "spans.jsonl", "a") as f:
        f.write(line[:20])
        f.flush()
        follower = JournalFollower(w.path)
        follower.catch_up()  # the half line is not parsed, nor dropped
        f.write(line[20:] + "\n")
    followed, notes = follower.take("spans")
    assert followed.column("thread_id").to_pylist() == [7, 8] and notes == []


def test_a_journal_rewritten_since_is_read_afresh(tmp_path):
    w = RunWriter(prepare_run_dir(tmp_path / "run"))
    w.append("spans", [span(i) for i in range(5)], prefix=(7,))
    w.close()
    follower = JournalFollower(w.path)
    follower.catch_up()
    journal = w.path / "spans.jsonl"
    replacement = w.path / "new.jsonl"
    replacement.write_text(json.dumps([[9], [list(span(42))]]) + "\n")
    replacement.replace(journal)  # another file now
    followed, _ = follower.take("spans")
    assert followed.column("span_id").to_pylist() == [42]


def test_past_its_budget_the_rest_is_read_at_the_end(tmp_path):
    w = RunWriter(prepare_run_dir(tmp_path / "run"))
    for i in range(20):
        w.append("spans", [span(i)], prefix=(7,))
        w.flush()
    w.close()
    follower = JournalFollower(w.path, max_bytes=300)
    follower.catch_up()
    assert 0 < follower.parsed_bytes <= 300
    followed, _ = follower.take("spans")
    assert followed.column("span_id").to_pylist() == list(range(20))


def test_a_journal_that_is_gone_is_said_so(tmp_path):
    follower = JournalFollower(prepare_run_dir(tmp_path / "run"))
    follower.catch_up()
    with pytest.raises(FileNotFoundError):
        follower.take("spans")
