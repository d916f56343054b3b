"""Per-endpoint figures from request spans and samples built by hand: counts, errors and
percentiles from the spans; a sample's endpoint from its handler's frame or its worker
span; the loop's samples between handlers are the server's; the limiting endpoint is
the one that needs the most CPU."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from probe.analyzers.endpoints import endpoints
from probe.analyzers.spantree import index_spans, request_mask

LOOP, WORKER = 1, 2
MS = 1_000_000


def span(sid, thread, name, start_ms, end_ms, *, category="request", parent=None, **attrs):
    return {
        "thread_id": thread, "span_id": sid, "parent_id": parent, "name": name,
        "category": category, "start_ns": start_ms * MS, "end_ns": end_ms * MS,
        "request_id": f"r{sid}", "attrs": json.dumps({"served": True, **attrs}),
    }  # fmt: skip


def http(sid, name, start_ms, end_ms, status=200, handler="app.py:10", thread=LOOP):
    method, route = name.split(" ", 1)
    return span(
        sid, thread, name, start_ms, end_ms, method=method, route=route, status=status,
        error=status >= 500, handler=handler, handler_name=handler,
    )  # fmt: skip


def indexed(rows):
    table = index_spans(pd.DataFrame(rows).astype({"parent_id": "Int64"}))
    table["is_request"] = request_mask(table)
    return table


# frames: 1 the server's loop, 2 the async handler (app.py:10), 3 the sync handler
# (app.py:20), 4 its helper; stacks root first
FRAMES = pd.DataFrame(
    {
        "frame_id": [1, 2, 3, 4],
        "function": ["run_forever", "item", "predict", "crunch"],
        "filename": ["uvicorn/server.py", "app.py", "app.py", "app.py"],
        "first_line": [5, 10, 20, 30],
    }
)
STACKS = pd.DataFrame(
    {"stack_id": [1, 2, 3, 4], "frame_ids": ["1", "1;2", "3;4", "9"], "leaf_line": [0] * 4,
     "leaf_call": [""] * 4}
)  # fmt: skip


def sample(ts_ms, thread, stack, cpu_ms, wait_ms=0.0, reason="", function="<library>"):
    return {
        "ts_ns": ts_ms * MS, "thread_id": thread, "stack_id": stack, "cpu_ns": cpu_ms * MS,
        "wait_ns": wait_ms * MS, "reason": reason, "user_function": function,
    }  # fmt: skip


def test_counts_errors_and_percentiles_come_from_the_request_spans():
    rows = [http(i, "GET /items/{item_id}", i * 10, i * 10 + 5 + i) for i in range(1, 11)]
    rows.append(http(20, "GET /items/{item_id}", 200, 230, status=500))
    rows.append(http(21, "POST /predict", 240, 242, status=404, handler="app.py:20"))
    figures = endpoints(indexed(rows), pd.DataFrame(), STACKS, FRAMES)
    t = figures.table
    assert list(t.index) == ["GET /items/{item_id}", "POST /predict"]  # most requests first
    assert t.loc["GET /items/{item_id}", "requests"] == 11
    assert t.loc["GET /items/{item_id}", "errors"] == 1  # the 500, not the 404
    assert t.loc["POST /predict", "errors"] == 0
    durations = [5 + i for i in range(1, 11)] + [30]
    assert t.loc["GET /items/{item_id}", "p50_ms"] == pytest.approx(np.median(durations))
    assert figures.window_s == pytest.approx(0.232)
    assert t.loc["POST /predict", "throughput_per_s"] == pytest.approx(1 / 0.232)


def test_a_sample_is_its_handler_s_endpoint_and_the_loop_s_other_work_is_the_server_s():
    rows = [
        http(1, "GET /items/{item_id}", 0, 100),  # async: on the loop
        http(2, "POST /predict", 0, 100, handler="app.py:20"),  # sync: worker span below
        span(3, WORKER, "predict", 10, 90, category="span", parent=2),
    ]
    samples = pd.DataFrame(
        [
            sample(20, LOOP, 2, 1.0, 9.0, "sleep", "item"),  # the async handler, awaiting
            sample(30, LOOP, 1, 10.0),  # the loop parsing HTTP for both: the server's
            sample(40, WORKER, 3, 10.0, function="crunch"),  # the sync handler's frame
            sample(50, WORKER, 4, 4.0, 6.0, "gil", "crunch"),  # no handler frame, in its span
            sample(95, WORKER, 4, 5.0),  # outside any span: nobody's
        ]
    )
    figures = endpoints(indexed(rows), samples, STACKS, FRAMES)
    t = figures.table
    assert t.loc["POST /predict", "cpu_s"] == pytest.approx(0.014)
    assert t.loc["POST /predict", "gil_s"] == pytest.approx(0.006)
    assert t.loc["GET /items/{item_id}", "wait_sleep_s"] == pytest.approx(0.009)
    assert t.loc["GET /items/{item_id}", "cpu_s"] == pytest.approx(0.001)
    assert figures.server_s == pytest.approx(0.010)
    assert figures.limiting == "POST /predict"
    assert t.loc["POST /predict", "top_frames"] == [("crunch", 0.02)]


def test_the_slowest_endpoint_is_named_apart_from_the_one_that_limits_throughput():
    rows = [
        http(1, "GET /items/{item_id}", 0, 100),
        http(2, "POST /predict", 0, 5, handler="app.py:20"),
    ]
    samples = pd.DataFrame([sample(50, LOOP, 2, 0.0, 10.0, "sleep"), sample(3, WORKER, 3, 5.0)])
    figures = endpoints(indexed(rows), samples, STACKS, FRAMES)
    assert figures.limiting == "POST /predict" and figures.slowest == "GET /items/{item_id}"


def test_requests_that_are_not_http_ones_give_no_endpoints():
    rows = [span(1, LOOP, "request", 0, 10)]  # a probe.request of the user's: no method
    assert endpoints(indexed(rows), pd.DataFrame(), STACKS, FRAMES) is None
    assert endpoints(pd.DataFrame(), pd.DataFrame(), STACKS, FRAMES) is None


def test_requests_are_counted_per_worker_process_and_an_idle_worker_is_named():
    # threads 11 and 12 in worker 100, 21 in worker 200; worker 300 served nothing
    spans = indexed(
        [http(1, "GET /a", 0, 10, thread=11), http(2, "GET /a", 5, 25, thread=12),
         http(3, "POST /b", 0, 40, status=500, thread=21), http(4, "GET /a", 50, 52, thread=21)]
    )  # fmt: skip
    threads = pd.DataFrame({"thread_id": [11, 12, 21], "pid": pd.array([100, 100, 200], "Int64")})
    samples = pd.DataFrame([sample(5, 11, 2, 4.0), sample(30, 21, 2, 2.0)])
    e = endpoints(spans, samples, STACKS, FRAMES, threads, worker_pids=(100, 200, 300))
    assert e is not None and e.workers is not None
    w = e.workers
    assert w.loc[100, "requests"] == 2 and w.loc[200, "requests"] == 2
    assert w.loc[200, "errors"] == 1 and w.loc[300, "requests"] == 0
    assert w.loc[200, "routes"] == {"POST /b": 1, "GET /a": 1}
    assert w.loc[100, "p50_ms"] == pytest.approx(15.0)
    assert w.loc[100, "cpu_s"] == pytest.approx(0.004) and w.loc[200, "cpu_s"] == pytest.approx(
        0.002
    )
    assert int(w["requests"].sum()) == int(e.table["requests"].sum())
    assert any("300 served no request of the 4" in n for n in e.notes)


def test_a_single_process_server_has_no_worker_table():
    spans = indexed([http(1, "GET /a", 0, 10, thread=11), http(2, "GET /a", 5, 25, thread=12)])
    threads = pd.DataFrame({"thread_id": [11, 12], "pid": pd.array([100, 100], "Int64")})
    e = endpoints(spans, pd.DataFrame([sample(5, 11, 2, 4.0)]), STACKS, FRAMES, threads)
    assert e is not None and e.workers is None


def measured(sid, name, start_ms, end_ms, cpu_ms, thread):
    row = http(sid, name, start_ms, end_ms, handler="app.py:20", thread=thread)
    attrs = json.loads(row["attrs"])
    if cpu_ms is not None:
        attrs["cpu_ns"] = int(cpu_ms * MS)
    return {**row, "attrs": json.dumps(attrs)}


def test_measured_request_cpu_replaces_what_sparse_samples_saw():
    # thread-per-request: each request's short-lived thread; the sampler caught the light
    # route's thread once and the heavy route's never
    rows = [measured(i, "POST /predict", i * 10, i * 10 + 3, 2.0, 100 + i) for i in range(10)]
    rows += [measured(20 + i, "GET /items/{item_id}", 200 + i * 10, 205 + i * 10, 0.1, 200 + i)
             for i in range(10)]  # fmt: skip
    samples = pd.DataFrame([sample(202, 200, 3, 1.0)])
    figures = endpoints(indexed(rows), samples, STACKS, FRAMES)
    t = figures.table
    assert t.loc["POST /predict", "cpu_s"] == pytest.approx(0.020)
    assert t.loc["POST /predict", "cpu_ms_per_request"] == pytest.approx(2.0)
    assert t.loc["GET /items/{item_id}", "cpu_s"] == pytest.approx(0.001)
    assert set(t["cpu_source"]) == {"measured"}
    assert figures.limiting == "POST /predict"


def test_an_endpoint_with_a_request_unmeasured_keeps_its_sampled_cpu():
    rows = [measured(1, "POST /predict", 0, 3, 2.0, 101), measured(2, "POST /predict", 10, 13,
            None, 102)]  # fmt: skip
    samples = pd.DataFrame([sample(12, 102, 3, 5.0)])
    t = endpoints(indexed(rows), samples, STACKS, FRAMES).table
    assert t.loc["POST /predict", "cpu_source"] == "sampled"
    assert t.loc["POST /predict", "cpu_s"] == pytest.approx(0.005)


def phased(sid, start_ms, end_ms, **offsets_ms):
    row = http(sid, "GET /items/{item_id}", start_ms, end_ms)
    attrs = json.loads(row["attrs"])
    attrs.update({k: int(v * MS) for k, v in offsets_ms.items()})
    return {**row, "attrs": json.dumps(attrs)}


def test_latency_ends_at_the_answer_and_the_phases_split_the_request():
    # each request: 1 ms waiting for the loop, 10 ms to its response's start, 2 ms
    # sending, answered at 12 ms; then 8 ms of the app's clean-up before its span ends
    rows = [
        phased(i, i * 30, i * 30 + 20, queued_ns=1, first_byte_ns=10, answered_ns=12)
        for i in range(10)
    ]
    t = endpoints(indexed(rows), pd.DataFrame(), STACKS, FRAMES).table
    row = t.loc["GET /items/{item_id}"]
    assert row["p50_ms"] == pytest.approx(12.0) and row["p99_ms"] == pytest.approx(12.0)
    assert row["queued_p50_ms"] == pytest.approx(1.0)
    assert row["handler_p50_ms"] == pytest.approx(10.0)
    assert row["send_p50_ms"] == pytest.approx(2.0)
    assert row["after_p50_ms"] == pytest.approx(8.0)


def test_a_server_that_gives_no_instants_has_no_phases_and_its_spans_are_the_latency():
    rows = [http(i, "GET /items/{item_id}", i * 30, i * 30 + 20) for i in range(10)]
    t = endpoints(indexed(rows), pd.DataFrame(), STACKS, FRAMES).table
    row = t.loc["GET /items/{item_id}"]
    assert row["p50_ms"] == pytest.approx(20.0)
    assert all(np.isnan(row[f"{p}_p50_ms"]) for p in ("queued", "handler", "send", "after"))


def test_a_worker_whose_requests_carry_their_measured_cpu_gets_it_in_its_row():
    # two WSGI workers, each request's CPU measured on its thread; the sampler saw none
    spans = indexed(
        [measured(1, "POST /predict", 0, 10, 2.0, 11), measured(2, "POST /predict", 5, 25, 3.0, 12),
         measured(3, "POST /predict", 0, 40, 4.0, 21)]
    )  # fmt: skip
    threads = pd.DataFrame({"thread_id": [11, 12, 21], "pid": pd.array([100, 100, 200], "Int64")})
    e = endpoints(spans, pd.DataFrame(), STACKS, FRAMES, threads, worker_pids=(100, 200))
    assert e is not None and e.workers is not None
    assert e.workers.loc[100, "cpu_s"] == pytest.approx(0.005)
    assert e.workers.loc[200, "cpu_s"] == pytest.approx(0.004)
