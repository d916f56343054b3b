"""The run directory: write, salvage after a kill, compact to Parquet, version checks."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from probe.errors import ProbeError
from probe.rundir import SCHEMA_NAME, SCHEMA_VERSION, compact, load
from probe.rundir.writer import RunWriter, prepare_run_dir


def new_run(tmp_path: Path) -> RunWriter:
    w = RunWriter(prepare_run_dir(tmp_path / "run"))
    w.write_meta({"schema": SCHEMA_NAME, "schema_version": SCHEMA_VERSION, "start_unix_ns": 0})
    return w


def span_record(i: int) -> tuple:
    """A span as the recorder holds it; the thread id goes in the batch prefix."""
    return (i, None, f"stage<{i}>", "stage", i * 10, i * 10 + 5, "r1", {"k": i})


def test_rows_round_trip_through_jsonl_and_parquet(tmp_path):
    w = new_run(tmp_path)
    w.append("spans", [span_record(i) for i in range(3)], prefix=(7,))
    w.append("spans", [span_record(i) for i in range(3, 5)], prefix=(8,))
    w.append("samples", [[100, 7, 1, 10_000_000, 4_000_000, "network", 3]])
    w.flush()
    live = load(w.path)
    assert list(live.spans["name"]) == [f"stage<{i}>" for i in range(5)]
    assert list(live.spans["thread_id"]) == [7, 7, 7, 8, 8]
    assert json.loads(live.spans["attrs"].iloc[4]) == {"k": 4}
    assert live.samples.iloc[0]["wait_reason"] == "network"
    w.close()
    assert compact(w.path) == []
    assert not list(w.path.glob("*.jsonl"))
    done = load(w.path)
    pd.testing.assert_frame_equal(done.spans, live.spans)
    assert done.spans["parent_id"].isna().all()
    assert str(done.spans["span_id"].dtype) == "int64"
    assert done.resources.empty and list(done.resources.columns)[:2] == ["ts_ns", "pid"]


def test_torn_last_row_is_dropped_with_a_note(tmp_path):
    w = new_run(tmp_path)
    w.append("spans", [span_record(i) for i in range(3)], prefix=(7,))
    w.close()
    with open(w.path / "spans.jsonl", "a") as f:
        f.write('[[7],[[99,null,"cut sh')  # what SIGKILL mid-write leaves
    run = load(w.path)
    assert len(run.spans) == 3
    assert any("dropped 1 incomplete batch" in n for n in run.notes)
    assert any("did not finish cleanly" in n for n in run.notes)
    notes = compact(w.path)
    assert any("incomplete" in n for n in notes)
    assert len(load(w.path).spans) == 3


def test_corrupt_middle_row_is_skipped_not_fatal(tmp_path):
    w = new_run(tmp_path)
    w.append("spans", [span_record(0)], prefix=(7,))
    w.close()
    with open(w.path / "spans.jsonl", "a") as f:
        f.write("garbage\n")
    w2 = RunWriter(w.path)
    w2.append("spans", [span_record(1)], prefix=(7,))
    w2.close()
    run = load(w.path)
    assert list(run.spans["span_id"]) == [0, 1]
    assert any("corrupt" in n for n in run.notes)


def test_newer_schema_is_refused_naming_both_versions(tmp_path):
    w = new_run(tmp_path)
    w.write_meta({"schema": SCHEMA_NAME, "schema_version": SCHEMA_VERSION + 1})
    with pytest.raises(ProbeError) as e:
        load(w.path)
    assert f"version {SCHEMA_VERSION + 1}" in str(e.value)
    assert f"version {SCHEMA_VERSION})" in str(e.value)


def test_not_a_run_directory_errors_are_one_clear_line(tmp_path):
    with pytest.raises(ProbeError, match="no such run directory"):
        load(tmp_path / "missing")
    (tmp_path / "empty").mkdir()
    with pytest.raises(ProbeError, match="no meta.json"):
        load(tmp_path / "empty")
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "meta.json").write_text("{not json")
    with pytest.raises(ProbeError, match="unreadable"):
        load(tmp_path / "bad")


def test_out_must_be_a_new_writable_directory(tmp_path):
    f = tmp_path / "file"
    f.write_text("x")
    with pytest.raises(ProbeError, match="not a directory"):
        prepare_run_dir(f)
    busy = tmp_path / "busy"
    busy.mkdir()
    (busy / "meta.json").write_text("{}")
    with pytest.raises(ProbeError, match="not empty"):
        prepare_run_dir(busy)
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o500)
    try:
        import os

        if os.geteuid() != 0:  # root may write anywhere
            with pytest.raises(ProbeError, match="cannot write"):
                prepare_run_dir(ro / "run")
    finally:
        ro.chmod(0o700)
    with pytest.raises(ProbeError, match="cannot write"):
        prepare_run_dir(f / "sub")


def cpu_op(tid: int, ts: float, name: str = "aten::slice") -> dict:
    return {"ph": "X", "cat": "cpu_op", "name": name, "pid": 1, "tid": tid, "ts": ts, "dur": 1}


def run_with_window(tmp_path: Path, entry: dict, probe_ops: int) -> Path:
    """A run whose torch window holds 10 of the target's ops (thread 7) and
    ``probe_ops`` of probe's own thread (9)."""
    w = new_run(tmp_path)
    (w.path / "torch").mkdir()
    events = [cpu_op(7, i) for i in range(10)] + [cpu_op(9, 100 + i) for i in range(probe_ops)]
    (w.path / "torch" / "window-1.json").write_text(json.dumps({"traceEvents": events}))
    torch = {"windows": [{"file": "torch/window-1.json", "probe_tid": 9, **entry}]}
    w.write_meta({**json.loads((w.path / "meta.json").read_text()), "collector": {"torch": torch}})
    w.close()
    return w.path


def test_the_ops_probe_s_own_thread_ran_in_a_window_are_not_the_target_s(tmp_path):
    # a run written before 2026-12-07 measured the profiler's cost on probe's thread
    calibration = {"calls": 4, "added_ns_per_call": 1200.0}
    run = load(run_with_window(tmp_path, {"calibration": calibration}, probe_ops=12))
    [(entry, trace)] = run.torch_windows
    assert set(trace.tables["ops"]["tid"]) == {7} and len(trace.tables["ops"]) == 10
    assert "op_cost_ns" not in entry and not any("per op" in n for n in run.notes)


def ended(w: RunWriter, pid: int) -> None:
    """meta.json as a finished run's process leaves it."""
    w.close()
    meta = json.loads((w.path / "meta.json").read_text())
    w.write_meta({**meta, "pid": pid, "end": "2026-11-24T00:00:00Z"})


def test_a_finished_run_in_journals_is_compacted_on_first_load_with_its_notes_kept(tmp_path):
    w = new_run(tmp_path)
    w.append("spans", [span_record(i) for i in range(3)], prefix=(7,))
    w.flush()
    with open(w.path / "spans.jsonl", "a") as f:
        f.write('[[7],[[99,null,"cut sh')
    ended(w, pid=2**22 + 1)  # above pid_max's default: no such process
    run = load(w.path)
    assert len(run.spans) == 3 and not list(w.path.glob("*.jsonl"))
    meta = json.loads((w.path / "meta.json").read_text())
    assert any("incomplete" in n for n in meta["notes"])  # the journal it describes is gone


def test_a_run_whose_process_lives_or_that_did_not_end_is_read_not_compacted(tmp_path):
    import os

    w = new_run(tmp_path)
    w.append("spans", [span_record(0)], prefix=(7,))
    w.flush()
    assert len(load(w.path).spans) == 1  # no end in meta.json: a live run
    ended(w, pid=os.getpid())  # "ended", but its process still writes (a watch child)
    assert len(load(w.path).spans) == 1
    assert (w.path / "spans.jsonl").is_file()


def test_a_run_that_cannot_be_rewritten_is_read_from_its_journals(tmp_path, monkeypatch):
    from probe.rundir import reader

    def read_only(root, *_):
        raise PermissionError(13, "Permission denied", str(root))

    w = new_run(tmp_path)
    w.append("spans", [span_record(i) for i in range(2)], prefix=(7,))
    ended(w, pid=2**22 + 1)
    monkeypatch.setattr(reader, "_compact", read_only)
    assert len(load(w.path).spans) == 2
    assert (w.path / "spans.jsonl").is_file()


def test_a_diagnosed_run_ends_compacted_with_the_frames_its_journals_held(tmp_path, capsys):
    import os

    from probe.reports.pipeline import finish_run

    w = new_run(tmp_path)
    w.append("spans", [span_record(i) for i in range(3)], prefix=(7,))
    w.append("samples", [[100, 7, 1, 10_000_000, 4_000_000, "network", 3]])
    ended(w, pid=os.getpid())  # its process alive: read as journals, not compacted
    from_journals = load(w.path, tables=["spans", "samples"])
    ended(w, pid=2**22 + 1)
    finish_run(w.path)
    assert "Run directory" in capsys.readouterr().out
    assert not list(w.path.glob("*.jsonl")) and (w.path / "diagnosis.json").is_file()
    done = load(w.path, tables=["spans", "samples"])
    for table in ("spans", "samples"):
        pd.testing.assert_frame_equal(done.tables[table], from_journals.tables[table])


def test_a_table_whose_parquet_cannot_be_written_keeps_its_journal_and_the_verdict_comes(
    tmp_path, capsys
):
    from probe.reports.pipeline import finish_run

    w = new_run(tmp_path)
    w.append("spans", [span_record(i) for i in range(3)], prefix=(7,))
    w.append("samples", [[100, 7, 1, 10_000_000, 4_000_000, "network", 3]])
    ended(w, pid=2**22 + 1)
    (w.path / "samples.parquet").mkdir()  # nothing can replace a directory by a file
    (w.path / "samples.parquet" / "x").write_text("")
    finish_run(w.path)
    out, err = capsys.readouterr()
    assert "Run directory" in out and (w.path / "diagnosis.json").is_file()
    assert "could not write samples.parquet" in err and "journal is kept" in err
    assert (w.path / "samples.jsonl").is_file() and not (w.path / "spans.jsonl").exists()
    assert len(load(w.path, tables=["samples"]).samples) == 1


def test_journal_batches_become_columns_with_prefixes_repeated_and_short_rows_padded():
    from probe.rundir.journals import arrow_from_batches as _arrow_from_batches

    batches = [
        [[7], [[1, None, "a", "stage", 1, 2, "r1", None], [2, 1, "b", "stage", 3, 4, "r1", None]]],
        [[8], [[3, None, "c", "request", 5, 6]]],  # an older probe's: no request, no attrs
        [[9], [[4, None, "d", "stage", 7, 8, None, {"k": [1]}, "a newer column"]]],
        [None, [[10, 5, None, "e", "stage", 9, 10, "r2", '{"k": 2}']]],  # no prefix
        [[7], []],
    ]
    rows = _arrow_from_batches("spans", batches).to_pylist()
    assert [r["thread_id"] for r in rows] == [7, 7, 8, 9, 10]
    assert [r["span_id"] for r in rows] == [1, 2, 3, 4, 5]
    assert rows[2] == {
        "thread_id": 8,
        "span_id": 3,
        "parent_id": None,
        "name": "c",
        "category": "request",
        "start_ns": 5,
        "end_ns": 6,
        "request_id": None,
        "attrs": None,
    }
    assert [r["attrs"] for r in rows] == [None, None, None, '{"k": [1]}', '{"k": 2}']
    assert rows[4]["parent_id"] is None and rows[4]["name"] == "e" and rows[4]["end_ns"] == 10
