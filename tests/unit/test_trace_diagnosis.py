"""The diagnosis of a Kineto trace (``analyzers.trace_diagnosis``) and its terminal verdict
(``reports.trace``), on a trace declared here: a host-bound window of small kernels."""

from __future__ import annotations

import json

import pytest

from probe.analyzers.op_breakdown import PAID_OVER_GAP
from probe.analyzers.trace_diagnosis import diagnose_trace
from probe.reports.json import DiagnosisJson, json_safe
from probe.reports.terminal import span_time_lines
from probe.reports.trace import TraceVerdict
from probe.rundir.kineto import read_kineto
from tests.unit.test_kineto_reader import write_trace


def host_bound_trace(kernel_name: str = "void at::native::vectorized_elementwise_kernel<4>"):
    """A step of 20 ops 50 us apart, each launching a 5-us kernel: the GPU idles while the
    host dispatches the next op."""
    events = [
        {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 1, "tid": 1,
         "ts": 0.0, "dur": 1_100.0, "args": {"External id": 1}},
    ]  # fmt: skip
    for i in range(20):
        at = 10.0 + 50.0 * i
        events.append(
            {"ph": "X", "cat": "cpu_op", "name": "aten::add", "pid": 1, "tid": 1, "ts": at,
             "dur": 45.0, "args": {"External id": 10 + i}}
        )  # fmt: skip
        events.append(
            {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1,
             "ts": at + 35.0, "dur": 5.0, "args": {"correlation": 100 + i}}
        )  # fmt: skip
        events.append(
            {"ph": "X", "cat": "kernel", "name": kernel_name, "pid": 0, "tid": 7,
             "ts": at + 42.0, "dur": 5.0,
             "args": {"device": 0, "stream": 7, "correlation": 100 + i}}
        )  # fmt: skip
    return events


def test_a_host_bound_trace_is_said_to_be_host_bound_with_its_numbers(tmp_path):
    # each gap is spent dispatching the next op that launches (eager mode's per-op cost)
    path = write_trace(tmp_path / "t.json", host_bound_trace(),
                       deviceProperties=[{"name": "NVIDIA Test GPU"}])  # fmt: skip
    d = diagnose_trace(read_kineto(path))
    assert d.primary["subkind"] == "launch_bound" and d.primary["summary"].startswith("Host-bound")
    assert d.primary["summary"].count("dispatching") == 1
    assert [r.id for r in d.recommendations] == ["cuda_graphs"]
    doc = json.loads(DiagnosisJson(json_safe(d.to_dict())).render())
    assert doc["schema"] == "probe.diagnosis/1" and doc["source"] == "kineto"
    assert doc["run"]["gpus"] == ["NVIDIA Test GPU"] and doc["run"]["kernels"] == 20
    assert doc["leak"]["state"] == "undetermined" and doc["leak"]["settle"]
    (step,) = doc["stages"]
    assert step["name"] == "ProfilerStep#1" and step["device_ns"] == 20 * 5_000
    assert doc["gpu"]["kernels"][0]["family"] == "elementwise"
    text = TraceVerdict.from_trace_diagnosis(d).render()
    assert "Host-bound" in text and "ProfilerStep#1" in text and "NVIDIA Test GPU" in text


def test_a_trace_s_spans_are_shown_a_call_as_the_run_s_verdict_shows_them(tmp_path):
    # the same span twice: each call held 1.1 ms of host time and launched 20 5-us kernels
    events = []
    for k, shift in enumerate((0.0, 2_000.0)):
        for e in host_bound_trace():
            moved = {**e, "ts": e["ts"] + shift}
            if e["cat"] == "user_annotation":
                moved["name"] = "forward"
            for key in ("correlation", "External id"):
                if key in e.get("args", {}):
                    moved["args"] = {**e["args"], key: e["args"][key] + 1_000 * k}
            events.append(moved)
    path = write_trace(tmp_path / "t.json", events, deviceProperties=[{"name": "NVIDIA Test GPU"}])
    d = diagnose_trace(read_kineto(path))
    text = TraceVerdict.from_trace_diagnosis(d).render()
    (line,) = [x for x in text.splitlines() if x.strip().startswith("forward")]
    assert "x2" in line and "host    1.100 ms" in line and "GPU    0.100 ms" in line
    assert span_time_lines(d.stages.to_dict("records")) == [line]


def test_a_cpu_only_trace_names_no_gpu_limit(tmp_path):
    cpu_only = [e for e in host_bound_trace() if e["cat"] in ("cpu_op", "user_annotation")]
    d = diagnose_trace(read_kineto(write_trace(tmp_path / "cpu.json", cpu_only)))
    assert d.primary["kind"] == "none" and d.findings == [] and d.run["gpu"] is False
    assert "No GPU work" in TraceVerdict.from_trace_diagnosis(d).render()


def test_names_from_the_traced_program_cannot_drive_the_terminal(tmp_path):
    events = host_bound_trace()
    events[0] = {**events[0], "name": "evil\x1b[2J\u202estep"}  # a span the verdict lists
    text = TraceVerdict.from_trace_diagnosis(
        diagnose_trace(read_kineto(write_trace(tmp_path / "t.json", events)))
    ).render()
    assert "evil" in text and "\x1b" not in text and "\u202e" not in text


def test_the_html_report_of_a_trace_shows_its_verdict_and_escapes_the_program_s_names(tmp_path):
    from probe.reports.trace_html import TraceHtmlReport

    events = host_bound_trace()
    events[0] = {**events[0], "name": "<img src=x onerror=alert(1)>"}
    d = diagnose_trace(read_kineto(write_trace(tmp_path / "t.json", events)))
    report = TraceHtmlReport.from_trace_diagnosis(d)
    assert set(report.figures) == {"kernels", "idle", "stages"}
    page = report.render(plotly_js="")
    assert "Host-bound" in page and "<img src=x" not in page
    # in the span chart's labels: entity-escaped, then \\u-escaped inside the JSON
    assert "\\u0026lt;img src=x onerror=alert(1)\\u0026gt;" in page


def test_kernels_without_correlation_ids_are_said_to_be_untied(tmp_path):
    events = host_bound_trace()
    for e in events:
        if e["cat"] in ("kernel", "cuda_runtime"):
            e["args"] = {k: v for k, v in e["args"].items() if k != "correlation"}
    d = diagnose_trace(read_kineto(write_trace(tmp_path / "t.json", events)))
    assert any("no correlation ids" in n for n in d.notes)
    assert set(d.idle["cause"]) == {"unknown"}  # no gap's cause can be told


def test_a_trace_s_document_has_its_host_ops_and_threads_beside_its_gpu_tables(tmp_path):
    d = diagnose_trace(read_kineto(write_trace(tmp_path / "t.json", host_bound_trace())))
    cpu = d.to_dict()["cpu"]
    [add] = cpu["ops"]  # the step is an annotation (a stage), not an op
    assert add["name"] == "aten::add" and add["calls"] == 20
    # 20 ops of 45 us, 50 us apart; the last ends the trace, so it is taken as cut there
    [thread] = cpu["threads"]
    assert thread["top_level_ops"] == 20 and thread["span_ns"] == 19 * 50_000
    assert thread["in_ops_ns"] == 19 * 45_000
    assert cpu["growing_prefix"] is None


def test_a_trace_from_elsewhere_has_its_profiler_s_cost_read_off_its_own_ops(tmp_path):
    # 30 linears, each an aten::t and an aten::addmm 0.8 us apart (the profiler's
    # bookkeeping between them), 40 us of Python between the linears
    events = []
    for i in range(30):
        at = 50.0 * i
        for name, ts, dur in (("aten::linear", at, 6.0), ("aten::t", at + 0.5, 1.0),
                              ("aten::addmm", at + 2.3, 3.0)):  # fmt: skip
            events.append(
                {"ph": "X", "cat": "cpu_op", "name": name, "pid": 1, "tid": 1, "ts": ts,
                 "dur": dur, "args": {"Input Dims": [[1, 4]], "Input type": ["float"]}}
            )  # fmt: skip
    trace = read_kineto(write_trace(tmp_path / "t.json", events))
    read = diagnose_trace(trace).to_dict()["cpu"]["profiler_op_cost_ns"]
    assert read == pytest.approx(PAID_OVER_GAP * 800, abs=0.1)
    # a cost given (a run's, or none) is the one taken off
    assert diagnose_trace(trace, op_cost_ns=0.0).to_dict()["cpu"]["profiler_op_cost_ns"] == 0


def test_a_cpu_trace_with_python_between_ops_and_no_span_says_what_would_tell_the_model_s(
    tmp_path,
):
    # 20 ops of 10 us, 50 us apart on one thread: 80% of its time outside any op
    events = [
        {"ph": "X", "cat": "cpu_op", "name": "aten::addmm", "pid": 1, "tid": 1,
         "ts": 50.0 * i, "dur": 10.0, "args": {"External id": i + 1}}
        for i in range(20)
    ]  # fmt: skip
    d = diagnose_trace(read_kineto(write_trace(tmp_path / "t.json", events)))
    [note] = [n for n in d.notes if "outside any op" in n]
    assert note.startswith("80% of thread 1's") and "@probe.stage on the model call" in note
    assert not [r for r in d.recommendations if r.id == "inference_runtime"]  # no estimate


def test_a_served_request_s_span_is_no_model_stage_for_a_compiled_graph(tmp_path):
    # 20 ops of 10 us, 50 us apart, all inside the handler span probe made around an
    # undecorated route: its time outside ops holds the route's own pre-processing too
    # (named as a run's reader hands the window's spans over: without probe's prefix)
    ops = [
        {"ph": "X", "cat": "cpu_op", "name": "aten::addmm", "pid": 1, "tid": 1,
         "ts": 50.0 * i, "dur": 10.0, "args": {"External id": i + 1}}
        for i in range(20)
    ]  # fmt: skip
    handler = {"ph": "X", "cat": "user_annotation", "name": "predict", "pid": 1, "tid": 1,
               "ts": 0.0, "dur": 1000.0, "args": {"External id": 99}}  # fmt: skip
    trace = read_kineto(write_trace(tmp_path / "t.json", [handler, *ops]))
    as_a_stage = diagnose_trace(trace)
    assert [r for r in as_a_stage.recommendations if r.id == "inference_runtime"]
    served = diagnose_trace(trace, server_spans=frozenset({"predict"}))
    assert not [r for r in served.recommendations if r.id == "inference_runtime"]
    assert [n for n in served.notes if "@probe.stage on the model call" in n], served.notes


def test_a_collection_the_trace_recorded_is_not_the_model_stage_s_python(tmp_path):
    # 20 ops of 10 us, 50 us apart, in an "infer" range, and a 480-us gap after the
    # tenth that torch recorded as a collection (record_python_gc_info, with_stack)
    ops = [
        {"ph": "X", "cat": "cpu_op", "name": "aten::addmm", "pid": 1, "tid": 1,
         "ts": 50.0 * i + (500.0 if i >= 10 else 0.0), "dur": 10.0,
         "args": {"External id": i + 1}}
        for i in range(20)
    ]  # fmt: skip
    infer = {"ph": "X", "cat": "user_annotation", "name": "infer", "pid": 1, "tid": 1,
             "ts": 0.0, "dur": 1500.0, "args": {"External id": 99}}  # fmt: skip
    gc = {"ph": "X", "cat": "python_function", "name": "Python GC", "pid": 1, "tid": 1,
          "ts": 470.0, "dur": 480.0, "args": {}}  # fmt: skip
    told = diagnose_trace(read_kineto(write_trace(tmp_path / "told.json", [infer, gc, *ops])))
    untold = diagnose_trace(read_kineto(write_trace(tmp_path / "untold.json", [infer, *ops])))
    [a] = [r for r in told.recommendations if r.id == "inference_runtime"]
    [b] = [r for r in untold.recommendations if r.id == "inference_runtime"]
    assert a.evidence["collections_ms"] == 0.48 and b.evidence["collections_ms"] == 0
    # 1,500 us, 190 in ops (the last, ending last, read as cut by the profiler's stop):
    # 1,310 outside them, of which 480 the collection's
    assert a.evidence["stage_glue_share"] == round(830 / 1020, 4)
    assert b.evidence["stage_glue_share"] == round(1310 / 1500, 4)
    # over the host's span (0-1,450 us) less the collection: 830 of 970
    assert a.p == pytest.approx(830 / 970)
