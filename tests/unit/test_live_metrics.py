"""probe run --prometheus-port's metrics, read from span journals as the recorder writes
them (``RunWriter``, the session's own call), a batch at a time."""

from __future__ import annotations

import json
import os
from pathlib import Path

from probe.live import LiveOutputs
from probe.live.journals import SpanJournals
from probe.live.metrics import LiveMetrics
from probe.rundir.writer import RunWriter

MS = 1_000_000
HTTP = {"method": "POST", "route": "/predict", "status": 200}


def _span(sid: int, name: str, category: str, dur_ms: float, attrs: dict | None = None) -> list:
    return [sid, None, name, category, 1000 * MS, 1000 * MS + int(dur_ms * MS), f"r{sid}", attrs]


def value(live: LiveMetrics, metric: str, **labels: str) -> float:
    return live.registry.get_sample_value(metric, labels) or 0.0


def test_new_spans_in_the_journals_become_histograms_and_request_counts(tmp_path: Path) -> None:
    writer = RunWriter(tmp_path)
    writer.append("spans", [_span(1, "POST /predict", "request", 30, HTTP),
                            _span(2, "model", "stage", 20)], prefix=(7,))  # fmt: skip
    writer.flush()
    metrics = LiveMetrics(own_cpu=lambda: 1.5)
    live = LiveOutputs(tmp_path, pid=1, metrics=metrics)
    assert live.poll() == 2
    labels = {"name": "POST /predict", "category": "request"}
    assert value(metrics, "probe_span_duration_seconds_count", **labels) == 1
    assert value(metrics, "probe_span_duration_seconds_sum", **labels) == 0.03
    assert value(metrics, "probe_requests_total", name="POST /predict", status="200") == 1
    assert value(metrics, "probe_collector_cpu_seconds_total") == 1.5

    error = {**HTTP, "status": 500}
    writer.append("spans", [_span(3, "POST /predict", "request", 5, error)], prefix=(7,))
    writer.flush()
    assert live.poll() == 1  # only what the journal gained
    assert value(metrics, "probe_requests_total", name="POST /predict", status="500") == 1
    assert value(metrics, "probe_span_duration_seconds_count", **labels) == 2
    writer.close()


def test_a_batch_half_written_waits_for_its_end_and_workers_journals_count(
    tmp_path: Path,
) -> None:
    line = json.dumps([[7], [_span(1, "request", "request", 10)]])
    (tmp_path / "spans.jsonl").write_text(line[:20])  # the writer is mid-line
    worker = tmp_path / "workers" / "4242"
    worker.mkdir(parents=True)
    (worker / "spans.jsonl").write_text(json.dumps([[9], [_span(5, "GET /", "request", 1)]]) + "\n")
    metrics = LiveMetrics(own_cpu=lambda: 0.0)
    live = LiveOutputs(tmp_path, pid=1, metrics=metrics)
    assert live.poll() == 1  # the worker's span; the half line waits
    with open(tmp_path / "spans.jsonl", "a") as f:
        f.write(line[20:] + "\n")
    assert live.poll() == 1
    assert value(metrics, "probe_requests_total", name="request", status="") == 1
    assert value(metrics, "probe_requests_total", name="GET /", status="") == 1


def test_journal_spans_carry_their_process_and_a_torn_batch_is_skipped(tmp_path: Path) -> None:
    worker = tmp_path / "workers" / "4242"
    worker.mkdir(parents=True)
    (worker / "spans.jsonl").write_text(
        '[[9], [[5, 3, "GET /"\n'
        + json.dumps([[9], [_span(6, "GET /", "request", 2, HTTP)]])
        + "\n"
    )
    (tmp_path / "spans.jsonl").write_text(json.dumps([[7], [_span(1, "x", "stage", 1)]]) + "\n")
    spans = sorted(SpanJournals(tmp_path, pid=100).poll(), key=lambda s: s.span_id)
    assert [(s.pid, s.thread_id, s.span_id, s.name) for s in spans] == [
        (100, 7, 1, "x"),
        (4242, 9, 6, "GET /"),
    ]
    assert spans[1].attrs == HTTP and spans[1].end_ns - spans[1].start_ns == 2 * MS


def verdict_file(run_dir: Path, kind: str, stage: str, share: float, leak: str, at: int) -> None:
    document = {"unix_ns": at * 10**9, "leak": {"state": leak},
                "primary": {"kind": kind, "subkind": "", "stage": stage, "share": share,
                            "confidence": 0.8}}  # fmt: skip
    path = run_dir / "live-verdict.json"
    path.write_text(json.dumps(document))
    os.utime(path, ns=(at * 10**9, at * 10**9))


def test_the_live_verdict_is_served_and_a_changed_one_replaces_it(tmp_path: Path) -> None:
    metrics = LiveMetrics(own_cpu=lambda: 0.0, verdicts=tmp_path)
    metrics.observe([])
    assert value(metrics, "probe_leak", probe_leak="unknown") == 1  # none yet
    assert value(metrics, "probe_verdict_timestamp_seconds") == 0
    verdict_file(tmp_path, "cpu", "postprocess", 0.7, "undetermined", at=1_700_000_000)
    metrics.observe([])
    cpu = {"kind": "cpu", "subkind": "", "stage": "postprocess"}
    assert value(metrics, "probe_verdict_share", **cpu) == 0.7
    assert value(metrics, "probe_verdict_confidence", **cpu) == 0.8
    assert value(metrics, "probe_leak", probe_leak="undetermined") == 1
    assert value(metrics, "probe_verdict_timestamp_seconds") == 1_700_000_000

    verdict_file(tmp_path, "io", "download", 0.6, "leak", at=1_700_000_030)
    metrics.observe([])
    assert metrics.registry.get_sample_value("probe_verdict_share", cpu) is None  # replaced
    assert value(metrics, "probe_verdict_share", kind="io", subkind="", stage="download") == 0.6
    assert value(metrics, "probe_leak", probe_leak="leak") == 1
    assert value(metrics, "probe_leak", probe_leak="undetermined") == 0
