"""probe run --otlp's stream: span trees released when their roots end, mapped as the
export maps them, posted on a thread that a failing or hanging collector never blocks."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("opentelemetry.sdk")

from opentelemetry.sdk.trace.export import SpanExportResult  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import (  # noqa: E402
    InMemorySpanExporter,
)
from opentelemetry.trace import SpanKind  # noqa: E402

from probe.live.journals import LiveSpan  # noqa: E402
from probe.live.otel import otel_id  # noqa: E402
from probe.live.traces import LiveTraces, SpanTrees  # noqa: E402

MS = 1_000_000
META = {"pid": 100, "start_unix_ns": 1_700_000_000 * 10**9,
        "clock": {"perf_ns": 0, "unix_ns": 1_700_000_000 * 10**9}}  # fmt: skip


def span(sid: int, parent: int | None, name: str = "s", category: str = "stage", **attrs: Any):
    return LiveSpan(100, 7, sid, parent, name, category, sid * MS, sid * MS + MS, None, attrs)


def ids(released: list[tuple[LiveSpan, int]]) -> list[tuple[int, int]]:
    return [(s.span_id, root) for s, root in released]


def test_children_wait_for_their_root_and_go_out_with_its_id() -> None:
    trees = SpanTrees()
    assert trees.add([span(3, 2), span(2, 1)]) == []  # grandchild, child: the root is open
    assert sorted(ids(trees.add([span(1, None)]))) == [(1, 1), (2, 1), (3, 1)]
    assert trees.held == 0
    # a task that outlived its request still joins the request's trace
    assert ids(trees.add([span(4, 2)])) == [(4, 1)]


def test_held_spans_past_the_bound_go_out_as_trees_of_their_own() -> None:
    trees = SpanTrees(max_held=2)
    released = trees.add([span(10, 1), span(11, 10), span(20, 2)])  # roots 1 and 2 are open
    # the oldest group whose parent is not itself held went out: 10 (and 11 under it)
    assert ids(released) == [(10, 10), (11, 10)] and trees.released_early == 2
    assert trees.held == 1
    # the run ended with root 2 still open: its child is a root, as readers take it
    assert ids(trees.rest()) == [(20, 20)]


def test_streamed_spans_are_server_spans_in_the_trace_of_their_root(tmp_path: Path) -> None:
    (tmp_path / "meta.json").write_text(json.dumps(META))
    exporter = InMemorySpanExporter()
    traces = LiveTraces(tmp_path, "http://127.0.0.1:1", exporter=exporter, say=lambda _: None)
    http = {"method": "POST", "route": "/predict", "status": 200}
    traces.add([span(2, 1, "model"), span(1, None, "POST /predict", "request", **http)])
    figures = traces.close()
    assert figures == {"sent": 2, "failed": 0, "dropped": 0, "without_root": 0}
    sent = {s.name: s for s in exporter.get_finished_spans()}
    request, stage = sent["POST /predict"], sent["model"]
    run = META["start_unix_ns"]
    assert request.context.trace_id == stage.context.trace_id == otel_id(128, run, 1)
    assert stage.parent.span_id == request.context.span_id == otel_id(64, run, 1)
    assert request.kind is SpanKind.SERVER and stage.kind is SpanKind.INTERNAL
    assert request.attributes["http.route"] == "/predict"
    assert request.start_time == META["clock"]["unix_ns"] + 1 * MS


def test_spans_wait_for_the_runs_meta_before_they_are_timed(tmp_path: Path) -> None:
    exporter = InMemorySpanExporter()
    traces = LiveTraces(tmp_path, None, exporter=exporter, say=lambda _: None)
    traces.add([span(1, None)])  # no meta.json yet: no clock to turn times into Unix time
    (tmp_path / "meta.json").write_text(json.dumps(META))
    traces.add([span(2, None)])
    assert traces.close()["sent"] == 2


class FailingThenWorking:
    def __init__(self, failures: int) -> None:
        self.failures = failures
        self.calls = 0

    def export(self, batch: list[Any]) -> SpanExportResult:
        self.calls += 1
        return SpanExportResult.FAILURE if self.calls <= self.failures else SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        pass


def test_a_failing_collector_is_said_once_per_streak_and_counted(tmp_path: Path) -> None:
    (tmp_path / "meta.json").write_text(json.dumps(META))
    said: list[str] = []
    traces = LiveTraces(tmp_path, "http://127.0.0.1:9", exporter=FailingThenWorking(2),
                        say=said.append)  # fmt: skip
    for sid in (1, 2, 3):  # one batch a poll
        traces.add([span(sid, None)])
    figures = traces.close()
    assert figures["sent"] == 1 and figures["failed"] == 2
    assert [line.split(" ", 2)[:2] for line in said] == [
        ["cannot", "deliver"], ["delivering", "spans"], ["2", "of"]]  # fmt: skip
    assert "probe export" in said[-1]


class HangingCollector:
    """An export that blocks until shutdown, as a black-holed endpoint does."""

    def __init__(self) -> None:
        self.released = threading.Event()

    def export(self, batch: list[Any]) -> SpanExportResult:
        self.released.wait(30)
        return SpanExportResult.FAILURE

    def shutdown(self) -> None:
        self.released.set()


def test_a_hanging_collector_drops_past_the_queue_and_never_holds_the_end(tmp_path: Path) -> None:
    (tmp_path / "meta.json").write_text(json.dumps(META))
    collector = HangingCollector()
    traces = LiveTraces(tmp_path, "http://10.255.255.1", exporter=collector, max_batches=1,
                        say=lambda _: None)  # fmt: skip
    for sid in range(1, 6):
        traces.add([span(sid, None)])  # the poster holds one, the queue one, the rest drop
    figures = traces.close(timeout_s=0.2)
    assert collector.released.is_set()  # close() shut the exporter down
    assert not traces._thread.is_alive()
    assert figures["sent"] == 0 and figures["dropped"] >= 3
    assert figures["failed"] + figures["dropped"] == 5
