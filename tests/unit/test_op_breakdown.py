"""The host's ops by self time and its threads' time between ops, on declared traces: each
op's self time is its time less its children's and the profiler's cost per op, a
recursive op's inclusive time counts once, an op cut by the profiler's stop does not
read as the stop's wait, and the first input's element type reads in torch's names."""

from __future__ import annotations

import pandas as pd
import pytest

from probe.analyzers.op_breakdown import (
    PAID_OVER_GAP,
    op_breakdown,
    ops_in_ranges,
    profiler_op_cost_ns,
)


def ops(rows: list[tuple[str, int, int, int, str]]) -> pd.DataFrame:
    """(name, tid, start, duration, input types) per op, in any order."""
    frame = pd.DataFrame(rows, columns=["name", "tid", "ts_ns", "dur_ns", "input_types"])
    frame["name"] = frame["name"].astype("category")
    return frame


# thread 1: a linear holding a transpose and an addmm (which holds a copy), 50 ns of
# Python, an add, a cat holding a cat, then an mm still running when the profiler
# stopped (written as ending at the stop, 10 us later); thread 2: one relu
TRACE = ops([
    ("aten::linear", 1, 0, 100, '["float","float","float"]'),
    ("aten::t", 1, 5, 10, '["float"]'),
    ("aten::addmm", 1, 20, 70, '["float","float","float","Scalar","Scalar"]'),
    ("aten::copy_", 1, 30, 10, '["float","float",""]'),
    ("aten::add", 1, 150, 20, '["c10::BFloat16","c10::BFloat16","Scalar"]'),
    ("aten::cat", 1, 200, 60, '["TensorList",""]'),
    ("aten::cat", 1, 210, 20, '["TensorList",""]'),
    ("aten::mm", 1, 300, 10_000, '["float","float"]'),
    ("aten::relu", 2, 0, 50, '["long int"]'),
])  # fmt: skip


def by_name(frame: pd.DataFrame) -> dict[str, dict]:
    return {r["name"]: r for r in frame.to_dict("records")}


def test_self_time_is_an_op_s_time_less_its_children_s_and_ranks_the_ops():
    b = op_breakdown(TRACE)
    table = by_name(b.ops)
    assert table["aten::linear"]["self_ns"] == 100 - 10 - 70
    assert table["aten::addmm"]["self_ns"] == 70 - 10
    assert table["aten::addmm"]["total_ns"] == 70 and table["aten::linear"]["total_ns"] == 100
    assert list(b.ops["name"][:2]) == ["aten::addmm", "aten::cat"]  # self 60 each, by name
    assert b.ops["self_share"].sum() == pytest.approx(1.0)


def test_a_recursive_op_s_inclusive_time_counts_once_and_its_self_time_whole():
    table = by_name(op_breakdown(TRACE).ops)
    assert table["aten::cat"]["calls"] == 2
    assert table["aten::cat"]["total_ns"] == 60  # the outer call's, which holds the inner
    assert table["aten::cat"]["self_ns"] == (60 - 20) + 20
    assert table["aten::cat"]["mean_ns"] == 30


def test_the_profiler_s_cost_per_op_comes_off_the_self_times_where_it_falls_never_below_zero():
    table = by_name(op_breakdown(TRACE, op_cost_ns=6).ops)
    # 6 ns an op: a gap's worth (6 / PAID_OVER_GAP) lies outside each op's interval, in
    # its parent's; the rest inside its own. addmm holds its own and its copy's gap
    between = 6 / PAID_OVER_GAP
    # (the table's self times are whole ns)
    assert table["aten::addmm"]["self_ns"] == pytest.approx(
        70 - 10 - (6 - between) - between, abs=0.5
    )
    # linear holds its own part and the gaps of its t and its addmm
    assert table["aten::linear"]["self_ns"] == pytest.approx(
        100 - 80 - (6 - between) - 2 * between, abs=0.5
    )
    assert table["aten::linear"]["total_ns"] == 100  # inclusive time is as traced
    # 40 ns an op: t's 10 ns hold less than its own part of that
    assert by_name(op_breakdown(TRACE, op_cost_ns=40).ops)["aten::t"]["self_ns"] == 0


def test_an_op_cut_by_the_profiler_s_stop_does_not_count_the_stop_s_wait():
    b = op_breakdown(TRACE)
    assert by_name(b.ops)["aten::mm"]["self_ns"] == 0  # it started last: nothing is known
    thread = b.threads.set_index("tid").loc[1]
    # the thread's span ends at the mm's start; 180 ns of it in ops, 120 between them
    assert thread["span_ns"] == 300 and thread["in_ops_ns"] == 180
    assert thread["gap_share"] == pytest.approx(0.4)
    assert thread["top_level_ops"] == 4  # linear, add, cat, mm


def test_a_thread_whose_last_op_ended_before_the_stop_keeps_it_whole():
    b = op_breakdown(TRACE)
    assert by_name(b.ops)["aten::relu"]["self_ns"] == 50
    assert list(b.threads["tid"]) == [1, 2]  # by time inside ops


def test_the_first_input_s_element_type_reads_in_torch_s_names_and_never_a_scalar():
    table = by_name(op_breakdown(TRACE).ops)
    assert table["aten::addmm"]["dtype"] == "float32"
    assert table["aten::add"]["dtype"] == "bfloat16"
    assert table["aten::relu"]["dtype"] == "int64"
    assert table["aten::cat"]["dtype"] == ""  # a list of tensors: no one element type


def test_a_trace_without_ops_gives_empty_tables():
    b = op_breakdown(TRACE.iloc[:0])
    assert b.empty and b.threads.empty and list(b.ops.columns)[0] == "name"


def test_ranges_the_older_schema_records_as_ops_are_not_ops_and_hold_no_op():
    old_schema = ops([
        ("ProfilerStep#5", 1, 0, 1_000, ""),
        ("enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", 1, 10, 300, ""),
        ("aten::empty", 1, 20, 30, '["ScalarList"]'),
        ("aten::conv2d", 1, 400, 500, '["float"]'),
        ("aten::add", 1, 990, 5, '["float"]'),
    ])  # fmt: skip
    b = op_breakdown(old_schema)
    assert set(b.ops["name"]) == {"aten::empty", "aten::conv2d", "aten::add"}
    # the ops under the step are the thread's top level: 535 of its 975 ns are in ops
    [thread] = b.threads.to_dict("records")
    assert thread["top_level_ops"] == 3 and thread["in_ops_ns"] == 30 + 500 + 5


def test_a_range_s_time_inside_ops_counts_top_level_ops_on_its_thread_cut_at_its_edges():
    top = op_breakdown(TRACE).top_level  # thread 1: 0-100, 150-170, 200-260, 300 (cut)
    ranges = pd.DataFrame(
        {"name": ["infer", "infer", "request", "idle"], "tid": [1, 1, 1, 2],
         "ts_ns": [0, 150, 50, 100], "dur_ns": [100, 30, 180, 20]}
    )  # fmt: skip
    table = ops_in_ranges(ranges, top).set_index("name")
    assert table.loc["infer", "spans"] == 2 and table.loc["infer", "range_ns"] == 130
    assert table.loc["infer", "in_ops_ns"] == 100 + 20  # the linear whole, the add whole
    # 50-230: the linear's last 50, the add, the cat's first 30
    assert table.loc["request", "in_ops_ns"] == 50 + 20 + 30
    assert table.loc["idle", "in_ops_ns"] == 0  # thread 2's relu ended at 50
    # the top-level ops that started inside: the linear and the add; the add and the cat
    assert list(table.loc[["infer", "request", "idle"], "top_ops"]) == [2, 2, 0]


def test_a_range_on_several_threads_is_read_on_the_thread_that_held_most_of_it():
    top = op_breakdown(TRACE).top_level  # thread 1: 0-100, 150-170, 200-260, 300 (cut)
    # a request span on two pool threads at once: summed, 300 ns of a 300-ns window
    ranges = pd.DataFrame(
        {"name": ["handle", "handle", "handle"], "tid": [1, 2, 2],
         "ts_ns": [0, 0, 100], "dur_ns": [100, 90, 110]}
    )  # fmt: skip
    [row] = ops_in_ranges(ranges, top).to_dict("records")
    assert row["tid"] == 2 and row["spans"] == 2 and row["range_ns"] == 200
    # thread 2's ops alone: its relu, 0-50
    assert row["in_ops_ns"] == 50


def test_a_collection_holds_a_range_s_python_but_not_an_op_its_thread_ran_meanwhile():
    top = op_breakdown(TRACE).top_level  # thread 1: 0-100, 150-170, 200-260, 300 (cut)
    ranges = pd.DataFrame(
        {"name": ["infer", "infer", "idle"], "tid": [1, 1, 2],
         "ts_ns": [0, 150, 100], "dur_ns": [140, 120, 20]}
    )  # fmt: skip
    # a collection 90-160 (made on thread 2: a collection stops every thread's Python)
    # and one 230-280 on thread 1
    pauses = pd.DataFrame({"tid": [2, 1], "ts_ns": [90, 230], "dur_ns": [70, 50]})
    table = ops_in_ranges(ranges, top, pauses).set_index("name")
    # infer 0-140: 100-140 of the first, outside the linear (0-100); infer 150-270:
    # 150-160 of the first (the add, 150-170, ran on), 260-270 of the second (the cat ran
    # to 260)
    assert table.loc["infer", "paused_ns"] == 40 + 10
    assert table.loc["infer", "in_ops_ns"] == 100 + 20 + 60
    assert table.loc["idle", "paused_ns"] == 20  # 100-120, thread 2 in no op
    # no collections: none paused
    assert (ops_in_ranges(ranges, top)["paused_ns"] == 0).all()


def nested_calls(tid: int, calls: int, gaps: list[int], start: int = 0) -> list[tuple]:
    """``calls`` linears on ``tid``, 50 us of Python apart, each holding len(gaps) + 1
    children of 100 ns separated by ``gaps`` (the profiler's bookkeeping between them)."""
    rows, at = [], start
    for _ in range(calls):
        child, children = at + 200, []
        for gap in [*gaps, 0]:
            children.append(("aten::t", tid, child, 100, '["float"]'))
            child += 100 + gap
        rows += [("aten::linear", tid, at, child - at + 200, '["float"]'), *children]
        at += child - at + 200 + 50_000
    return rows


def test_the_profiler_s_cost_per_op_is_read_off_the_gaps_between_an_op_s_children():
    # 40 calls of 4 children 400, 500 and 600 ns apart: the median gap 500, the cost per
    # op twice it (PAID_OVER_GAP); the 50 us of Python between the calls are not its
    frame = ops(nested_calls(1, 40, [400, 500, 600]))
    assert profiler_op_cost_ns(frame) == PAID_OVER_GAP * 500


def test_the_gaps_are_siblings_on_one_thread_even_where_threads_run_at_once():
    # thread 2's calls start 150 ns after thread 1's: by time their children interleave
    frame = ops(nested_calls(1, 20, [300, 300]) + nested_calls(2, 20, [300, 300], start=150))
    assert profiler_op_cost_ns(frame) == PAID_OVER_GAP * 300


def test_a_trace_with_too_few_nested_ops_gives_no_profiler_cost():
    assert profiler_op_cost_ns(ops(nested_calls(1, 5, [400]))) is None  # 5 gaps
    flat = ops([("aten::add", 1, i * 1000, 100, '["float"]') for i in range(100)])
    assert profiler_op_cost_ns(flat) is None
    assert profiler_op_cost_ns(flat.iloc[:0]) is None


def test_gaps_inside_a_compiled_region_or_around_a_cuda_call_are_not_the_profiler_s():
    # 40 linears with children 500 ns apart; inside a compiled region (generated code
    # between its ops) and around a kernel launch between two children, 20 us gaps
    plain = nested_calls(1, 40, [500])
    region = [("Torch-Compiled Region: 0/0", 2, 0, 10_000_000, "[]")] + [
        ("aten::mm", 2, 100 + 20_100 * i, 100, '["float"]') for i in range(100)
    ]
    frame = ops(plain + region)
    assert profiler_op_cost_ns(frame) == PAID_OVER_GAP * 500
    # thread 3: 40 cudnn ops, each two children 20 us apart with a launch between them
    cudnn = nested_calls(3, 40, [20_000])
    launches = [
        {"tid": 3, "ts_ns": r[2] + 200 + 100 + 5_000, "dur_ns": 3_000}
        for r in cudnn
        if r[0] == "aten::linear"
    ]
    runtime = pd.DataFrame(launches)
    frame = ops(plain + cudnn)
    assert profiler_op_cost_ns(frame) > PAID_OVER_GAP * 500  # the median: half are 20 us
    assert profiler_op_cost_ns(frame, runtime) == PAID_OVER_GAP * 500
