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
