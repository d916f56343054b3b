"""A run's torch.profiler window read back: probe's spans, which torch's fast range
files as CPU ops named ``probe: NAME``, are the window's ranges under their own names,
and the ranges still open when probe closed the window (written as ending at the stop)
are dropped and counted."""

from __future__ import annotations

import pandas as pd

from probe.rundir.kineto import KINETO_COLUMNS
from probe.rundir.reader import _drop_ranges_cut_by_the_stop, _spans_to_ranges


def table(name: str, rows: list[dict]) -> pd.DataFrame:
    columns = ["ts_ns", "dur_ns", *KINETO_COLUMNS[name]]
    return pd.DataFrame([{c: r.get(c) for c in columns} for r in rows], columns=columns)


def window() -> dict[str, pd.DataFrame]:
    return {
        "ops": table("ops", [
            {"name": "probe: infer", "ts_ns": 100, "dur_ns": 50, "tid": 1, "pid": 1},
            {"name": "aten::addmm", "ts_ns": 110, "dur_ns": 30, "tid": 1, "pid": 1},
            {"name": "probe: post", "ts_ns": 200, "dur_ns": 9_800, "tid": 1, "pid": 1},
            {"name": "aten::softmax", "ts_ns": 210, "dur_ns": 5, "tid": 1, "pid": 1},
        ]),
        "annotations": table("annotations", [
            {"name": "user_block", "side": "cpu", "ts_ns": 90, "dur_ns": 70, "tid": 1},
            {"name": "user_block", "side": "gpu", "ts_ns": 120, "dur_ns": 9_880, "tid": 7},
        ]),
    }  # fmt: skip


def test_probe_s_spans_leave_the_ops_for_the_ranges_under_their_own_names():
    tables = window()
    _spans_to_ranges(tables)
    assert list(tables["ops"]["name"]) == ["aten::addmm", "aten::softmax"]
    ranges = tables["annotations"]
    assert list(ranges["name"]) == ["user_block", "infer", "user_block", "post"]  # by start
    assert set(ranges[ranges["name"].isin(["infer", "post"])]["side"]) == {"cpu"}


def test_a_range_open_at_the_stop_is_dropped_and_counted_its_gpu_mirror_and_the_rest_kept():
    tables = window()
    _spans_to_ranges(tables)
    # probe closed the window at 9,000; "post" ends at 10,000: open when torch stopped
    assert _drop_ranges_cut_by_the_stop(tables, 9_000) == 1
    ranges = tables["annotations"]
    assert list(ranges["name"]) == ["user_block", "infer", "user_block"]
    assert list(ranges["side"]) == ["cpu", "cpu", "gpu"]  # the GPU mirror is not host time


def test_a_window_without_ranges_is_left_as_it_was():
    tables = window()
    tables["annotations"] = tables["annotations"].iloc[:0]
    tables["ops"] = tables["ops"][~tables["ops"]["name"].str.startswith("probe: ")]
    before = tables["ops"].copy()
    _spans_to_ranges(tables)
    assert _drop_ranges_cut_by_the_stop(tables, 9_000) == 0
    pd.testing.assert_frame_equal(tables["ops"], before)


def test_a_range_that_ended_last_but_before_the_close_is_kept():
    tables = window()
    _spans_to_ranges(tables)
    # nothing was open when probe closed the window at 20,000: "post" ended last, whole
    assert _drop_ranges_cut_by_the_stop(tables, 20_000) == 0
    assert "post" in set(tables["annotations"]["name"])
