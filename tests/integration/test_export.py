"""`probe export` as users run it: a served app's run, a killed run, bad input, and an
hour-long run's bound.

The truth each export is held to is the run directory itself, read back with the
reader: every span, stack sample and counter reading recorded is in the file (counts
equal), decoded with Perfetto's own protobuf definitions. No trace processor binary is
installed on these machines (the ``perfetto`` package downloads one), so decoding is the
check.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from collections import Counter
from pathlib import Path

import pytest
from perfetto.protos.perfetto.trace.perfetto_trace_pb2 import Trace

from probe.rundir.reader import load
from tests.synthetic import hour_long_run

from .conftest import probe_cmd, sidecar_alive, wait_until, write_script
from .test_http_spans import CORPUS, CPU_ROUTE, SLEEP_ROUTE, served

pytestmark = pytest.mark.integration


def export(*args: str | os.PathLike[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(probe_cmd("export", *args), capture_output=True, text=True, timeout=300)


def served_fastapi(run_probe, tmp_path):
    """The FastAPI sample under uvicorn, driven and stopped (test_http_spans.served)."""
    return served(
        run_probe, tmp_path,
        "-m", "uvicorn", "shop_api:app", "--app-dir", str(CORPUS), "--port", "PORT",
        "--log-level", "critical",
    )[:3]  # fmt: skip


def expected_counter_points(run_dir: Path) -> int:
    """Readings in the run directory: RSS at every resource reading of each process, CPU
    as a rate between consecutive readings, host CPU and the GPUs at every reading."""
    t = load(run_dir).tables
    rss = len(t["resources"])
    cpu = sum(int((rows["ts_ns"].diff() > 0).sum()) for _, rows in t["resources"].groupby("pid"))
    host = int(t["system"]["cpu_percent"].notna().sum())
    gpu = int(t["gpu"]["util_percent"].notna().sum() + t["gpu"]["mem_used_bytes"].notna().sum())
    return rss + cpu + host + gpu


def decoded(path: Path) -> dict[str, int]:
    counts: Counter[str] = Counter()
    for p in Trace.FromString(path.read_bytes()).packet:
        if p.HasField("track_event"):
            counts[{1: "begin", 2: "end", 3: "instant", 4: "counter"}[p.track_event.type]] += 1
        elif p.HasField("perf_sample"):
            counts["samples"] += 1
    return counts


def test_a_served_apps_run_exports_every_span_sample_and_counter(run_probe, tmp_path):
    pytest.importorskip("fastapi")
    answers, _, d = served_fastapi(run_probe, tmp_path)
    run_dir = tmp_path / "run"
    run = load(run_dir)
    spans, samples = run.tables["spans"], run.tables["samples"]
    requests = spans[spans["category"] == "request"]
    assert len(requests) == d["run"]["requests"] > 0

    done = export(run_dir)
    assert done.returncode == 0, done.stderr
    trace_file = run_dir / "trace.perfetto-trace"
    assert "trace.perfetto-trace" in done.stdout
    counts = decoded(trace_file)
    assert counts["begin"] == counts["end"] == len(spans)
    assert counts["samples"] == len(samples) > 0
    assert counts["counter"] == expected_counter_points(run_dir) > 0

    # the requests of an async app overlap on the event loop: they are drawn on request
    # lanes, never mis-nested on the loop thread's track
    trace = Trace.FromString(trace_file.read_bytes())
    names = {n.iid: n.name for n in trace.packet[0].interned_data.event_names}
    begun = Counter(
        names[p.track_event.name_iid]
        for p in trace.packet
        if p.HasField("track_event") and p.track_event.type == 1
    )
    assert begun == Counter(spans["name"])
    routes = {r: begun[r] for r in (CPU_ROUTE, SLEEP_ROUTE)}
    assert sum(routes.values()) == sum(n for (_, status), n in answers.items() if status)

    chrome = export(run_dir, "--format", "chrome", "-o", tmp_path / "trace.json")
    assert chrome.returncode == 0, chrome.stderr
    doc = json.loads((tmp_path / "trace.json").read_text())
    spans_out = sum(1 for e in doc["traceEvents"] if e["ph"] in ("X", "b"))
    assert spans_out == len(spans) and len(doc["samples"]) == len(samples)

    scope = export(run_dir, "--format", "speedscope", "-o", tmp_path / "profile.json")
    assert scope.returncode == 0, scope.stderr
    profile = json.loads((tmp_path / "profile.json").read_text())
    on_cpu = sum(sum(p["weights"]) for p in profile["profiles"] if "on-CPU" in p["name"])
    # the analysis's attribution keeps each thread's CPU exact (up to a nanosecond a
    # sample of rounding, and where a thread's CPU exceeds its sampled wall time)
    cpu = sum(
        min(rows["cpu_ns"].sum(), rows["wall_ns"].sum()) for _, rows in samples.groupby("thread_id")
    )
    assert on_cpu == pytest.approx(cpu, abs=len(samples))


KILLED = """
import time
import probe
print("ready", flush=True)
while True:
    with probe.request():
        with probe.span("work"):
            time.sleep(0.01)
"""


def test_a_killed_run_exports_what_it_recorded(run_probe, tmp_path):
    script = write_script(tmp_path, KILLED)
    proc = run_probe.spawn("--no-report", script)
    assert proc.stdout.readline().strip() == "ready"
    time.sleep(1.5)  # a few flushes of the journals (at least once a second)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    run_dir = tmp_path / "run"
    wait_until(lambda: not sidecar_alive(run_dir), timeout=60)  # its salvage, done
    out = tmp_path / "killed.perfetto-trace"
    done = export(run_dir, "-o", out)
    assert done.returncode == 0, done.stderr
    counts = decoded(out)
    spans = load(run_dir).tables["spans"]
    assert counts["begin"] == len(spans) > 0


def test_bad_input_gets_one_line_and_exit_status_2(tmp_path):
    missing = export(tmp_path / "nowhere")
    assert missing.returncode == 2 and len(missing.stderr.strip().splitlines()) == 1
    assert "nowhere" in missing.stderr

    run_dir = hour_long_run(tmp_path / "run", spans=1000, samples=1000, seconds=10)
    blocked = tmp_path / "blocked"
    blocked.write_text("a file where a folder should be")
    unwritable = export(run_dir, "-o", blocked / "trace.perfetto-trace")
    assert unwritable.returncode == 2, unwritable.stderr
    assert unwritable.stderr.startswith("probe: error: cannot write")
    assert len(unwritable.stderr.strip().splitlines()) == 1

    wrong = export(run_dir, "--format", "svg")
    assert wrong.returncode == 2 and "svg" in wrong.stderr


@pytest.mark.parametrize("fmt", ["perfetto", "chrome", "speedscope", "pprof", "otlp"])
def test_an_hour_long_run_exports_under_ten_megabytes_unless_full_is_asked(tmp_path, fmt):
    run_dir = hour_long_run(tmp_path / "hour")  # 1 M spans, 360 k samples
    out = tmp_path / f"hour.{fmt}"
    done = export(run_dir, "--format", fmt, "-o", out)
    assert done.returncode == 0, done.stderr
    assert out.stat().st_size <= 10 * 1024 * 1024
    if fmt != "speedscope":  # a profile aggregates; it thins nothing away
        assert "kept" in done.stderr and "--full keeps all" in done.stderr


def test_a_fastapi_apps_requests_reach_a_collector_as_server_spans_named_by_route(
    run_probe, tmp_path, receiver
):
    pytest.importorskip("fastapi")
    answers, _, _ = served_fastapi(run_probe, tmp_path)
    done = export(tmp_path / "run", "--format", "otlp", "--endpoint", receiver.url)
    assert done.returncode == 0, done.stderr
    assert f"Sent {len(load(tmp_path / 'run').tables['spans']):,} spans" in done.stdout
    server = [s for s in receiver.spans if s.kind == s.SPAN_KIND_SERVER]
    assert len(server) == sum(n for (_, status), n in answers.items() if status)
    for span in server:
        attrs = {a.key: a.value for a in span.attributes}
        route = attrs["http.route"].string_value
        assert span.name == f"{attrs['http.request.method'].string_value} {route}"
        assert span.name in (CPU_ROUTE, SLEEP_ROUTE)
        assert attrs["http.response.status_code"].int_value >= 200
        assert span.end_time_unix_nano > span.start_time_unix_nano > 1_700_000_000 * 10**9
    errors = [s for s in server if s.status.code == s.status.STATUS_CODE_ERROR]
    assert len(errors) == sum(n for (_, status), n in answers.items() if status >= 500)
    names = {m.name for m in receiver.metrics}
    assert {"http.server.request.duration", "probe.verdict.share"} <= names
    histogram = next(m for m in receiver.metrics if m.name == "http.server.request.duration")
    counted = sum(p.count for p in histogram.histogram.data_points)
    assert counted == len(server)


def test_an_unreachable_collector_is_retried_then_reported_in_one_line(tmp_path):
    pytest.importorskip("opentelemetry.sdk")
    from tests.threads_corpus.drive import free_port

    run_dir = hour_long_run(tmp_path / "run", spans=100, samples=100, seconds=10)
    port = free_port()  # nothing listens there
    started = time.monotonic()
    done = export(run_dir, "--format", "otlp", "--endpoint", f"http://127.0.0.1:{port}",
                  "--timeout", "2")  # fmt: skip
    assert done.returncode == 1
    *retries, last = done.stderr.strip().splitlines()
    assert last.startswith("probe: error: the collector at"), done.stderr
    # each retry logged on a line of its own, the exporter's back-off between them
    assert all(line.startswith("probe: otlp: ") for line in retries), done.stderr
    assert time.monotonic() - started < 60  # gave up, bounded by --timeout's retries

    offline = export(run_dir, "--format", "otlp", "-o", tmp_path / "spans.pb")
    assert offline.returncode == 0, offline.stderr
    from opentelemetry.proto.collector.trace.v1 import trace_service_pb2

    request = trace_service_pb2.ExportTraceServiceRequest.FromString(
        (tmp_path / "spans.pb").read_bytes()
    )
    sent = sum(len(ss.spans) for rs in request.resource_spans for ss in rs.scope_spans)
    assert sent == len(load(run_dir).tables["spans"]) > 0
