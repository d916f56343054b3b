"""Kineto traces read into tables (``probe.rundir.kineto``): each kind of event to its
table on fixtures whose content is declared here, both schemas (torch 1.8's capitalised
categories and today's), traces cut short or corrupt. The real GPU traces recorded by
other projects: ``tests/integration/test_gpu_traces.py``."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from probe.errors import ProbeError
from probe.rundir.kineto import KINETO_COLUMNS, read_kineto


def kernel(ts: float, dur: float, correlation: int, name: str = "void gemm_bf16") -> dict:
    return {
        "ph": "X", "cat": "kernel", "name": name, "pid": 0, "tid": 7, "ts": ts, "dur": dur,
        "args": {"External id": 3, "device": 0, "stream": 7, "correlation": correlation,
                 "grid": [64, 1, 1], "block": [128, 1, 1]},
    }  # fmt: skip


def launch(ts: float, correlation: int) -> dict:
    return {
        "ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 11, "tid": 11,
        "ts": ts, "dur": 4.5, "args": {"cbid": 211, "correlation": correlation,
                                       "External id": 3},
    }  # fmt: skip


# a declared scenario: one op that launches one kernel and copies its result back
SCENARIO = [
    {"name": "process_name", "ph": "M", "ts": 0, "pid": 11, "tid": 0, "args": {"name": "python"}},
    {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#3", "pid": 11, "tid": 11,
     "ts": 1000.0, "dur": 500.0, "args": {"External id": 1}},
    {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 11, "tid": 11, "ts": 1010.25,
     "dur": 40.0, "args": {"External id": 3, "Input Dims": [[16, 64], [64, 64]],
                           "Input type": ["c10::BFloat16", "c10::BFloat16"]}},
    launch(1020.0, 77),
    {"ph": "s", "id": 77, "pid": 11, "tid": 11, "ts": 1020.0, "cat": "ac2g", "name": "ac2g"},
    kernel(1030.5, 12.0, 77),
    {"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy DtoH (Device -> Pageable)", "pid": 0,
     "tid": 7, "ts": 1050.0, "dur": 3.0, "args": {"device": 0, "stream": 7, "correlation": 78,
                                                  "bytes": 4096, "External id": 4}},
    {"ph": "X", "cat": "cuda_sync", "name": "Stream Sync", "pid": 0, "tid": 7, "ts": 1053.0,
     "dur": 2.0, "args": {"stream": 7, "correlation": 79, "device": 0}},
    {"ph": "i", "s": "t", "name": "[memory]", "pid": 11, "tid": 11, "ts": 1011.0,
     "args": {"Device Type": 1, "Device Id": 0, "Bytes": 2048, "Total Allocated": 8192,
              "Total Reserved": 2097152}},
    {"ph": "X", "cat": "python_function", "name": "model.py(12): forward", "pid": 11,
     "tid": 11, "ts": 1005.0, "dur": 60.0, "args": {"Python id": 2, "Python parent id": 1}},
]  # fmt: skip


def write_trace(path: Path, events: list, *, gz: bool = False, **top: object) -> Path:
    document = {"schemaVersion": 1, **top, "traceEvents": events, "traceName": str(path)}
    data = json.dumps(document).encode()
    path.write_bytes(gzip.compress(data) if gz else data)
    return path


def test_each_kind_of_event_lands_in_its_table_with_its_ids(tmp_path):
    trace = read_kineto(write_trace(tmp_path / "t.json", SCENARIO))
    t = trace.tables
    assert set(t) == set(KINETO_COLUMNS) and trace.events == len(SCENARIO)
    assert t["kernels"].loc[0, "correlation"] == 77 and t["kernels"].loc[0, "grid"] == "64,1,1"
    assert t["runtime"].loc[0, "correlation"] == 77  # the launch that made the kernel
    assert t["kernels"].loc[0, "ts_ns"] == 1_030_500 and t["kernels"].loc[0, "dur_ns"] == 12_000
    assert t["copies"].loc[0, "bytes"] == 4096 and "Pageable" in t["copies"].loc[0, "name"]
    assert t["syncs"].loc[0, "name"] == "Stream Sync"
    op = t["ops"].loc[0]
    assert op["name"] == "aten::mm" and json.loads(op["input_dims"]) == [[16, 64], [64, 64]]
    assert json.loads(op["input_types"]) == ["c10::BFloat16", "c10::BFloat16"]
    assert list(t["annotations"]["name"]) == ["ProfilerStep#3"]
    assert t["memory"].loc[0, "total_allocated"] == 8192
    assert t["python"].loc[0, "parent_id"] == 1
    assert t["threads"].loc[0, "label"] == "python"
    assert trace.has_gpu and trace.notes == []


def test_the_top_level_keys_are_read_before_and_after_the_events(tmp_path):
    path = write_trace(
        tmp_path / "t.json", SCENARIO, deviceProperties=[{"name": "NVIDIA H100", "numSms": 132}]
    )
    meta = read_kineto(path).meta
    assert meta["deviceProperties"][0]["numSms"] == 132  # written before traceEvents
    assert meta["traceName"] == str(path)  # written after
    assert "traceEvents" not in meta


def test_the_older_schema_s_capitalised_categories_are_read_alike(tmp_path):
    # torch 1.8-1.9: "Operator", "Runtime", "Kernel", "Memcpy"; "external id"; tids as strings
    old = [
        {"ph": "X", "cat": "Operator", "name": "aten::conv2d", "pid": 5, "tid": "5", "ts": 10,
         "dur": 30, "args": {"External id": 9, "Input Dims": [[32, 3, 224, 224]]}},
        {"ph": "X", "cat": "Runtime", "name": "cudaLaunchKernel", "pid": 5, "tid": "5",
         "ts": 12, "dur": 5, "args": {"cbid": 211, "correlation": 40, "external id": 9}},
        {"ph": "X", "cat": "Kernel", "name": "implicit_convolve_sgemm", "pid": 0,
         "tid": "stream 7", "ts": 20, "dur": 100,
         "args": {"device": 0, "stream": 7, "correlation": 40, "external id": 9}},
        {"ph": "f", "id": 40, "pid": 0, "tid": "stream 7", "ts": 20, "cat": "async",
         "name": "launch", "bp": "e"},
    ]  # fmt: skip
    trace = read_kineto(write_trace(tmp_path / "old.json", old, gz=True))
    t = trace.tables
    assert len(t["ops"]) == len(t["runtime"]) == len(t["kernels"]) == 1
    assert t["runtime"].loc[0, "external_id"] == 9 and t["runtime"].loc[0, "tid"] == 5
    assert t["kernels"].loc[0, "stream"] == 7
    assert trace.notes == []


def test_epoch_microseconds_become_exact_nanoseconds(tmp_path):
    events = [kernel(1623142623531625, 2, 1), kernel(1419247333430.849, 3.136, 2)]
    ts = list(read_kineto(write_trace(tmp_path / "t.json", events)).tables["kernels"]["ts_ns"])
    assert ts == [1419247333430849, 1623142623531625000]


def test_a_trace_cut_short_keeps_what_came_before_the_cut_and_says_so(tmp_path):
    whole = json.dumps({"traceEvents": [launch(10.0 * i, i) for i in range(100)]})
    path = tmp_path / "cut.json"
    path.write_text(whole[: len(whole) * 2 // 3])
    trace = read_kineto(path)
    assert 50 <= len(trace.tables["runtime"]) < 100
    assert len(trace.notes) == 1 and "cut short after" in trace.notes[0]


def test_a_gzip_stream_broken_midway_keeps_what_came_before_the_break(tmp_path):
    data = gzip.compress(json.dumps({"traceEvents": [launch(i, i) for i in range(5000)]}).encode())
    path = tmp_path / "broken.json.gz"
    path.write_bytes(data[: len(data) // 2])
    trace = read_kineto(path)
    assert 0 < len(trace.tables["runtime"]) < 5000 and trace.notes


@pytest.mark.parametrize(
    ("content", "says"),
    [
        (b"\x1f\x8b\x08\x00garbage", "cannot be read as a trace"),
        (b"not json at all", "is not a Chrome/Kineto trace"),
        (b'{"schemaVersion": 1, "other": []}', 'no "traceEvents"'),
    ],
    ids=["corrupt-gzip", "not-json", "no-events"],
)
def test_what_is_not_a_trace_is_one_clear_line_with_exit_status_2(tmp_path, content, says):
    path = tmp_path / "bad.json"
    path.write_bytes(content)
    with pytest.raises(ProbeError, match=says) as e:
        read_kineto(path)
    assert e.value.exit_code == 2 and "\n" not in str(e.value)
    with pytest.raises(ProbeError, match="no such trace") as missing:
        read_kineto(tmp_path / "absent.json")
    assert missing.value.exit_code == 2


def test_events_of_an_unknown_category_are_counted_not_fatal(tmp_path):
    events = [*SCENARIO, {"ph": "X", "cat": "gpu_future_thing", "name": "x", "pid": 0,
                          "tid": 0, "ts": 1.0, "dur": 1.0}]  # fmt: skip
    trace = read_kineto(write_trace(tmp_path / "t.json", events))
    assert trace.notes == ["events of categories this reader does not know were skipped: "
                           "gpu_future_thing (1)"]  # fmt: skip
    assert len(trace.tables["kernels"]) == 1


def test_a_trace_without_gpu_events_reads_as_cpu_only(tmp_path):
    cpu_only = [e for e in SCENARIO if e.get("cat") in ("cpu_op", "user_annotation", None)]
    trace = read_kineto(write_trace(tmp_path / "cpu.json", cpu_only))
    assert not trace.has_gpu and len(trace.tables["ops"]) == 1 and trace.notes == []
