"""The run on one timeline and its exports: lanes, bounds, and each format's round trip.

Synthetic run directories (``tests.synthetic``) pin what a real run cannot: overlapping
requests, asyncio-interleaved spans on one thread, a run too long to export whole.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest
from perfetto.protos.perfetto.trace.perfetto_trace_pb2 import Trace

from probe.analyzers.analysis import analyze
from probe.analyzers.timeline import TimelineLimits, timeline
from probe.reports.chrome import ChromeTrace
from probe.reports.perfetto import PerfettoTrace
from probe.reports.speedscope import SpeedscopeProfile
from probe.rundir.reader import load
from tests.synthetic import RunBuilder


def _service(tmp_path: Path) -> Path:
    """Two overlapping requests on two threads, each with two stages; on a third thread
    two spans that overlap without nesting (two asyncio tasks interleaved); samples on
    CPU and waiting; resources and host CPU."""
    b = RunBuilder(duration_s=1.0)
    attrs = json.dumps({"method": "POST", "route": "/predict", "status": 200})
    r1 = b.span("POST /predict", 0, 100, thread=1, category="request", request="r1", attrs=attrs)
    b.span("preprocess", 0, 30, thread=1, parent=r1, request="r1")
    b.span("model", 30, 95, thread=1, parent=r1, request="r1")
    r2 = b.span("POST /predict", 50, 160, thread=2, category="request", request="r2", attrs=attrs)
    b.span("preprocess", 50, 80, thread=2, parent=r2, request="r2")
    b.span("model", 80, 150, thread=2, parent=r2, request="r2")
    b.span("fetch a", 200, 300, thread=3)
    b.span("fetch b", 250, 350, thread=3)  # overlaps "fetch a", not inside it
    work = b.stack("main", "handle", "model")
    wait = b.stack("main", "handle", "recv", leaf_call="socket.recv")
    for i in range(10):
        b.sample(thread=1, ts_ms=10 + 10 * i, stack=work)
        b.sample(thread=2, ts_ms=15 + 10 * i, stack=wait, cpu_ms=1, reason="network")
    for i in range(5):
        b.resources(100 * i, cpu_s=0.1 * i, rss_bytes=100_000_000 + i)
        b.system(100 * i, cpu_percent=40.0)
    return b.write(tmp_path / "run")


def test_overlapping_requests_get_lanes_of_their_own(tmp_path: Path) -> None:
    t = analyze(load(_service(tmp_path))).timeline
    requests = t.spans[t.spans["category"] == "request"].sort_values("start_ns")
    assert requests["lane"].tolist() == [0, 1]
    stages = t.spans[t.spans["request_id"].notna() & (t.spans["category"] == "stage")]
    assert len(stages) == 4 and set(stages["lane"]) == {0}  # nested on their own thread's track


def test_spans_that_overlap_without_nesting_go_to_another_lane_of_their_thread(
    tmp_path: Path,
) -> None:
    t = analyze(load(_service(tmp_path))).timeline
    on_three = t.spans[t.spans["thread_id"] == 3].set_index("name")["lane"]
    assert on_three.to_dict() == {"fetch a": 0, "fetch b": 1}


def test_a_run_under_the_limits_is_kept_whole_and_says_so(tmp_path: Path) -> None:
    t = analyze(load(_service(tmp_path))).timeline
    assert t.complete and not t.notes
    assert t.kept["spans"] == (8, 8) and t.kept["samples"] == (20, 20)


def test_thinned_spans_keep_whole_trees_and_the_slowest_requests() -> None:
    b = RunBuilder(duration_s=10.0)
    for i in range(300):
        dur = 500 if i == 137 else 10  # one outlier in the middle of the run
        r = b.span("GET /", i * 20, i * 20 + dur, category="request", request=f"r{i}")
        b.span("work", i * 20, i * 20 + dur // 2, parent=r, request=f"r{i}")
    t = timeline(b.tables(), root_pid=42, limits=TimelineLimits(spans=100))
    kept = t.spans
    assert len(kept) <= 100 and t.kept["spans"] == (len(kept), 600)
    # every kept stage has its request, and every kept request its stage
    by_request = Counter(kept["request_id"])
    assert set(by_request.values()) == {2}
    assert "r137" in by_request  # the slowest request is never thinned away
    starts = kept.loc[kept["category"] == "request", "start_ns"].sort_values()
    # spread over the whole run, not the first trees that fit
    assert starts.iloc[-1] - starts.iloc[0] > 0.8 * (299 * 20 * 1_000_000)
    assert any("kept" in n and "--full" in n for n in t.notes)


def test_thinned_samples_stay_spread_over_the_run() -> None:
    b = RunBuilder(duration_s=10.0)
    work = b.stack("main", "work")
    for i in range(1000):
        b.sample(thread=1, ts_ms=i * 10, stack=work)
    t = timeline(b.tables(), root_pid=42, limits=TimelineLimits(samples=100))
    assert len(t.samples) == 100
    gaps = t.samples["ts_ns"].diff().dropna().unique()
    assert len(gaps) == 1  # every tenth sample: evenly in time


def _decoded(blob: bytes) -> dict[str, Counter[int]]:
    trace = Trace.FromString(blob)
    out: dict[str, Counter[int]] = {"begin": Counter(), "end": Counter(), "counter": Counter()}
    out["samples"] = Counter()
    for p in trace.packet:
        if p.HasField("track_event"):
            kind = {1: "begin", 2: "end", 4: "counter"}.get(p.track_event.type)
            if kind:
                out[kind][p.track_event.track_uuid] += 1
        elif p.HasField("perf_sample"):
            out["samples"][p.perf_sample.tid] += 1
    return out


def test_the_perfetto_file_holds_every_span_sample_and_counter_point(tmp_path: Path) -> None:
    analysis = analyze(load(_service(tmp_path)))
    t = analysis.timeline
    decoded = _decoded(PerfettoTrace.from_analysis(analysis).render())
    assert sum(decoded["begin"].values()) == sum(decoded["end"].values()) == len(t.spans)
    assert decoded["begin"] == decoded["end"]  # each track's slices all close
    assert decoded["samples"] == Counter({1: 10, 2: 10})
    counted = sum(len(s.ts_ns) for s in t.counters)
    assert sum(decoded["counter"].values()) == counted > 0


def test_perfetto_slices_nest_properly_on_every_track(tmp_path: Path) -> None:
    blob = PerfettoTrace.from_analysis(analyze(load(_service(tmp_path)))).render()
    depth: Counter[int] = Counter()
    last: dict[int, int] = {}
    for p in Trace.FromString(blob).packet:
        e = p.track_event
        if p.HasField("track_event") and e.type in (1, 2):
            assert p.timestamp >= last.get(e.track_uuid, 0)  # in time order on its track
            last[e.track_uuid] = p.timestamp
            depth[e.track_uuid] += 1 if e.type == 1 else -1
            assert depth[e.track_uuid] >= 0  # never an end without its begin


def test_a_waiting_sample_ends_in_a_frame_naming_its_wait(tmp_path: Path) -> None:
    blob = PerfettoTrace.from_analysis(analyze(load(_service(tmp_path)))).render()
    packets = list(Trace.FromString(blob).packet)
    data = packets[0].interned_data
    names = {f.iid: f.str.decode() for f in data.function_names}
    frame_name = {f.iid: names[f.function_name_id] for f in data.frames}
    stacks = {c.iid: [frame_name[i] for i in c.frame_ids] for c in data.callstacks}
    by_tid = {p.perf_sample.tid: stacks[p.perf_sample.callstack_iid] for p in packets
              if p.HasField("perf_sample")}  # fmt: skip
    assert by_tid[1] == ["main", "handle", "model"]
    assert by_tid[2] == ["main", "handle", "recv", "[waiting: network]"]


def test_request_attributes_travel_as_debug_annotations(tmp_path: Path) -> None:
    blob = PerfettoTrace.from_analysis(analyze(load(_service(tmp_path)))).render()
    packets = list(Trace.FromString(blob).packet)
    keys = {k.iid: k.name for k in packets[0].interned_data.debug_annotation_names}
    seen = [
        {keys[a.name_iid]: a.string_value for a in p.track_event.debug_annotations}
        for p in packets
        if p.HasField("track_event") and p.track_event.debug_annotations
    ]
    assert {"request_id": "r1", "method": "POST", "route": "/predict", "status": "200"} in seen


def test_a_thinned_export_says_so_in_the_file() -> None:
    b = RunBuilder(duration_s=10.0)
    for i in range(50):
        b.span("GET /", i * 20, i * 20 + 10, category="request", request=f"r{i}")
    t = timeline(b.tables(), root_pid=42, limits=TimelineLimits(spans=10))
    blob = PerfettoTrace(t).render()
    instants = [p.track_event.name for p in Trace.FromString(blob).packet
                if p.HasField("track_event") and p.track_event.type == 3]  # fmt: skip
    assert any(n.startswith("spans: kept 10 of 50") for n in instants)


def test_the_chrome_trace_has_every_span_sample_and_counter(tmp_path: Path) -> None:
    analysis = analyze(load(_service(tmp_path)))
    doc = json.loads(ChromeTrace.from_analysis(analysis).render())
    phases = Counter(e["ph"] for e in doc["traceEvents"])
    # stages on their thread's own lane as complete events; requests and the
    # overlapping span as async begin/end pairs
    assert phases["X"] == 5 and phases["b"] == phases["e"] == 3
    assert len(doc["samples"]) == 20
    waiting = [s for s in doc["samples"] if s["name"] == "waiting"]
    assert doc["stackFrames"][waiting[0]["sf"]]["name"] == "[waiting: network]"
    assert phases["C"] == sum(len(s.ts_ns) for s in analysis.timeline.counters)


def test_speedscope_splits_each_thread_into_on_cpu_and_waiting(tmp_path: Path) -> None:
    doc = json.loads(SpeedscopeProfile.from_analysis(analyze(load(_service(tmp_path)))).render())
    names = [p["name"] for p in doc["profiles"]]
    assert names == [
        "thread-1 (1) · on-CPU",
        "thread-2 (2) · on-CPU",
        "thread-2 (2) · waiting",
    ]
    frames = [f["name"] for f in doc["shared"]["frames"]]
    on_cpu, _, waiting = doc["profiles"]
    assert sum(on_cpu["weights"]) == 10 * 10_000_000  # ten samples of 10 ms on CPU
    assert sum(waiting["weights"]) == 10 * 9_000_000  # 9 of each 10 ms waiting
    assert frames[waiting["samples"][0][-1]] == "[waiting: network]"
    # consecutive identical stacks are one entry: the time order stays the thread's
    assert len(on_cpu["samples"]) == 1


@pytest.mark.parametrize("renderer", [PerfettoTrace, ChromeTrace, SpeedscopeProfile])
def test_an_empty_run_exports_without_error(tmp_path: Path, renderer: type) -> None:
    run_dir = RunBuilder(duration_s=1.0).write(tmp_path / "empty")
    assert renderer.from_analysis(analyze(load(run_dir))).render()


def test_each_sample_is_labelled_with_the_stage_and_request_open_on_its_thread(
    tmp_path: Path,
) -> None:
    s = analyze(load(_service(tmp_path))).timeline.samples
    ms = (s["ts_ns"] - s["ts_ns"].min()) // 1_000_000 + 10  # the builder's milliseconds
    labelled = {
        (tid, int(t)): (stage, route)
        for tid, t, stage, route in zip(s["thread_id"], ms, s["stage"], s["route"], strict=True)
    }
    assert labelled[(1, 20)] == ("preprocess", "POST /predict")
    assert labelled[(1, 50)] == ("model", "POST /predict")
    assert labelled[(2, 25)] == ("", "")  # before its thread's request began
    assert labelled[(2, 65)] == ("preprocess", "POST /predict")
    assert labelled[(2, 95)] == ("model", "POST /predict")


def test_the_pprof_profile_has_every_sample_with_its_labels_and_the_cpu_it_used(
    tmp_path: Path,
) -> None:
    import gzip

    from probe.reports.pprof import PprofProfile, profile_message

    analysis = analyze(load(_service(tmp_path)))
    profile = profile_message().FromString(
        gzip.decompress(PprofProfile.from_analysis(analysis).render())
    )
    strings = list(profile.string_table)
    assert [strings[t.type] for t in profile.sample_type] == ["samples", "cpu", "wait"]
    assert strings[profile.default_sample_type] == "cpu"
    assert len(profile.sample) == 20
    assert sum(s.value[1] for s in profile.sample) == 10 * 10_000_000 + 10 * 1_000_000
    functions = {f.id: strings[f.name] for f in profile.function}
    location = {loc.id: functions[loc.line[0].function_id] for loc in profile.location}
    by_route: Counter[str] = Counter()
    for sample in profile.sample:
        labels = {strings[lb.key]: strings[lb.str] for lb in sample.label}
        by_route[labels.get("route", "")] += 1
        leaf_first = [location[i] for i in sample.location_id]
        if labels.get("wait"):
            assert leaf_first[0] == "[waiting: network]" and leaf_first[-1] == "main"
        else:
            assert leaf_first == ["model", "handle", "main"]
    # thread 1's ten samples fall in its request (the last at its very end), thread 2's
    # from 55 ms on: six of ten
    assert by_route == Counter({"POST /predict": 16, "": 4})
