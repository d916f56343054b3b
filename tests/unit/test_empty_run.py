"""The quick verdict of a run with nothing to judge (analyzers.empty_run over
probe.rundir.glance): on what it declines, and a journal it cannot read plainly.
Equality with the full analysis is held on real runs (tests/integration/
test_nothing_to_judge.py)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from probe.analyzers.empty_run import NOTHING_TO_JUDGE, nothing_to_judge
from probe.rundir.glance import GLANCE_MAX_BYTES, glance, may_be_empty

META = {
    "end": "2026-12-02T21:00:00Z",
    "duration_s": 0.0213,
    "exit": {"status": 0, "ended_by": "completed"},
    "host": {"cpu_count": 2, "cores_allowed": 2.0, "cpu_limit": ""},
    "collector": {"full_collection_at_end": {"at_ns": 2_000}},
}
# one reading of the root process, after the session's full collection (at 2,000 ns)
READING = [3_000, 10, 1, True, 0.08, 0.02, 21_000_000, 1.3e7, 0.0, 0.0, 9, 3, 1, 6.0, 1.0, 0.0]


def test_an_empty_run_gets_the_none_verdict_and_an_undetermined_leak():
    d = nothing_to_judge(META, {"resources": [READING], "system": [[1, 2.0]]}, [])
    assert d is not None
    assert d["primary"]["kind"] == "none" and d["primary"]["summary"] == NOTHING_TO_JUDGE
    assert d["run"]["wall_s"] == 0.0213 and d["run"]["cores_allowed"] == 2.0
    assert d["leak"]["state"] == "undetermined" and d["leak"]["points"] == 0
    before = {**META, "collector": {"full_collection_at_end": {"at_ns": 5_000}}}
    assert nothing_to_judge(before, {"resources": [READING]}, [])["leak"]["points"] == 1
    limited = {**META, "host": {"cpu_count": 2, "cores_allowed": 1.0, "cpu_limit": "affinity"}}
    assert nothing_to_judge(limited, {}, [])["run"]["cores_allowed"] == 1.0
    # the collector's pauses make a finding only beside stages: a 0.02-s script makes some
    collected = {"gc_pauses": [[1_500, 2, 1, 900_000, 900_000, 77]]}
    assert nothing_to_judge(META, collected, []) is not None


@pytest.mark.parametrize(
    "meta, rows, entries",
    [
        (META, {"samples": [[1]]}, []),  # a stack sample
        (META, {"spans": [[1]]}, []),  # a span
        (META, {"gpu": [[1]]}, []),
        (META, {"gc_types": [[1]]}, []),  # --memory's census
        (META, {"resources": [READING, [4_000, *READING[1:]]]}, []),  # two readings
        (META, {}, ["workers"]),  # a child's shard
        (META, {}, ["torch"]),
        (META, {}, ["diagnosis.json"]),  # anything it does not know
        ({k: v for k, v in META.items() if k != "end"}, {}, []),  # not finished
        ({**META, "cpu_throttling": {"periods": 10, "throttled_periods": 2}}, {}, []),
        ({**META, "collector": {"http_spans": {"notes": ["patched late"]}}}, {}, []),
        ({**META, "collector": {"torch": {"windows": [{"file": "torch/window-1.json"}]}}}, {}, []),
    ],
)
def test_anything_the_analysis_would_read_beyond_the_counts_declines(meta, rows, entries):
    assert nothing_to_judge(meta, rows, entries) is None


def _run_dir(tmp_path: Path, journals: dict[str, bytes]) -> Path:
    (tmp_path / "meta.json").write_text(json.dumps(META))
    for table, raw in journals.items():
        (tmp_path / f"{table}.jsonl").write_bytes(raw)
    return tmp_path


def test_a_glance_gives_each_journals_rows_with_their_prefix(tmp_path):
    run = _run_dir(tmp_path, {"system": b"[[7], [[1, 2], [3, 4]]]\n[null, [[7, 5, 6]]]\n"})
    (run / "stray.txt").write_text("")
    meta, rows, others = glance(run)
    assert meta == META and others == ["stray.txt"]
    assert rows == {"system": [[7, 1, 2], [7, 3, 4], [7, 5, 6]]}


@pytest.mark.parametrize(
    "raw",
    [
        b"[[], [[1, 2]]]\n[[], [[3",  # torn last batch: the loader would note it
        b"not json\n",
        b'{"a": 1}\n',
        b"[[], [[1]]]\n" * (GLANCE_MAX_BYTES // 10),  # more than a run with nothing
    ],
)
def test_a_journal_not_read_plainly_is_left_to_the_loader(tmp_path, raw):
    assert glance(_run_dir(tmp_path, {"resources": raw})) is None


def test_a_meta_json_that_is_not_an_object_is_left_to_the_loader(tmp_path):
    (tmp_path / "meta.json").write_text("[1, 2]")  # and no journal at all
    assert glance(tmp_path) is None


def test_a_run_whose_samples_or_spans_journal_holds_a_batch_is_not_glanced_at(tmp_path):
    run = _run_dir(tmp_path, {"system": b"[[], [[1, 2]]]\n", "samples": b""})
    assert may_be_empty(run)
    (run / "spans.jsonl").write_bytes(b"[[1], [[2]]]\n")
    assert not may_be_empty(run)


def test_the_quick_verdict_imports_no_analysis_stack():
    # what `probe run` imports to tell a run with nothing to judge (a fresh interpreter)
    code = (
        "import sys, probe.reports.empty_run; "
        "print(sorted(m for m in ('numpy', 'pandas', 'pyarrow', 'plotly') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
