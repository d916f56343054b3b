"""probe run --prometheus-port's metrics, read from span journals as the recorder writes
them (``RunWriter``, the session's own call), a batch at a time."""

from __future__ import annotations

import json
from pathlib import Path

from probe.livemetrics import LiveMetrics
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
    live = LiveMetrics(tmp_path, own_cpu=lambda: 1.5)
    assert live.poll() == 2
    labels = {"name": "POST /predict", "category": "request"}
    assert value(live, "probe_span_duration_seconds_count", **labels) == 1
    assert value(live, "probe_span_duration_seconds_sum", **labels) == 0.03
    assert value(live, "probe_requests_total", name="POST /predict", status="200") == 1
    assert value(live, "probe_collector_cpu_seconds_total") == 1.5

    error = {**HTTP, "status": 500}
    writer.append("spans", [_span(3, "POST /predict", "request", 5, error)], prefix=(7,))
    writer.flush()
    assert live.poll() == 1  # only what the journal gained
    assert value(live, "probe_requests_total", name="POST /predict", status="500") == 1
    assert value(live, "probe_span_duration_seconds_count", **labels) == 2
    writer.close()


def test_a_batch_half_written_waits_for_its_end_and_workers_journals_count(
    tmp_path: Path,
) -> None:
    line = json.dumps([[7], [_span(1, "request", "request", 10)]])
    (tmp_path / "spans.jsonl").write_text(line[:20])  # the writer is mid-line
    worker = tmp_path / "workers" / "4242"
    worker.mkdir(parents=True)
    (worker / "spans.jsonl").write_text(json.dumps([[9], [_span(5, "GET /", "request", 1)]]) + "\n")
    live = LiveMetrics(tmp_path, own_cpu=lambda: 0.0)
    assert live.poll() == 1  # the worker's span; the half line waits
    with open(tmp_path / "spans.jsonl", "a") as f:
        f.write(line[20:] + "\n")
    assert live.poll() == 1
    assert value(live, "probe_requests_total", name="request", status="") == 1
    assert value(live, "probe_requests_total", name="GET /", status="") == 1
