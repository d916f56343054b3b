"""Spans streamed to an OpenTelemetry collector while the run goes on: ``probe run --otlp``.

The sidecar feeds it once a second with the spans the run's journals gained
(``probe.live.journals``). A trace is a span tree, and its id comes from the tree's root
(``probe.live.otel``: the same ids ``probe export --format otlp`` sends later); a span
ends before its parent, so a span is held until its tree's root has ended, then the tree
goes out at once -- a request's tree a second or so after the request. A span whose
parent ended long before (a task outliving the request that started it) goes out with
the tree it belongs to, looked up among recently sent spans.

Bounded: at most ``max_held`` spans wait for their roots (past that the oldest waiting
subtrees go out as traces of their own, said in the figures); a thread posts batches to
the collector with the SDK's OTLP/HTTP exporter, which retries with back-off; at most
``max_batches`` batches queue behind a slow or unreachable collector, and a batch that
finds the queue full is dropped and counted. Nothing here runs in the service: an
unreachable collector costs the sidecar a thread, never the service a stall. Failures
are said once per streak on stderr ("cannot deliver ... retrying"), and again when the
collector takes spans again; ``close()`` returns the figures (sent, failed, dropped),
which the sidecar keeps in meta.json.
"""

from __future__ import annotations

import json
import logging
import queue
import sys
import threading
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from probe.live.journals import LiveSpan

__all__ = ["LiveTraces", "SpanTrees"]

# Spans waiting for their roots before the oldest go out without them: a request tree
# waits about a second, so this is a long-lived root's subtree (a batch job's `run` span
# around everything) -- 100k spans hold ~40 MB of tuples in the sidecar.
MAX_HELD = 100_000
# Recently sent spans remembered for children that end after their parent: the same
# bound, trimmed by half when reached.
MAX_REMEMBERED = 100_000
# Batches waiting for the collector: at about one a second, two minutes of an outage.
MAX_BATCHES = 120
# How long the run's end waits for the collector to take what is left: the sidecar's
# end holds up `probe run`'s (its verdict, its exit), and a collector that has not taken
# a second's spans in this long is not about to.
CLOSE_TIMEOUT_S = 3.0
# Spans per OTLP request: the SDK's batch processor's default export size is 512; a
# request tree is never split, so a batch can exceed it by one tree.
BATCH_SPANS = 512


class SpanTrees:
    """Holds each span until the root of its tree has ended; ``add`` returns the spans
    released, each with its tree's root id."""

    def __init__(self, max_held: int = MAX_HELD, max_remembered: int = MAX_REMEMBERED) -> None:
        self.max_held = max_held
        self.max_remembered = max_remembered
        self._held: dict[int, list[LiveSpan]] = {}  # parent id -> children that ended
        self._held_ids: set[int] = set()
        self._sent: dict[int, int] = {}  # span id -> root id, recently released
        self.held = 0
        self.released_early = 0  # spans sent without their root (max_held reached)

    def add(self, spans: Iterable[LiveSpan]) -> list[tuple[LiveSpan, int]]:
        out: list[tuple[LiveSpan, int]] = []
        for span in spans:
            parent = span.parent_id
            if parent is None:
                self._release(span, span.span_id, out)
            elif parent in self._sent:
                self._release(span, self._sent[parent], out)
            else:
                self._held.setdefault(parent, []).append(span)
                self._held_ids.add(span.span_id)
                self.held += 1
        while self.held > self.max_held:
            self.released_early += self._release_oldest(out)
        return out

    def rest(self) -> list[tuple[LiveSpan, int]]:
        """Every span still held (the run ended): a span whose parent never ended is the
        root of its tree, as the run directory's readers take it."""
        out: list[tuple[LiveSpan, int]] = []
        while self._held:
            self._release_oldest(out)
        return out

    def _release_oldest(self, out: list[tuple[LiveSpan, int]]) -> int:
        """Release the oldest group of held spans whose parent is not held itself."""
        parent = next(p for p in self._held if p not in self._held_ids)
        before = len(out)
        for child in self._held.pop(parent):
            self._held_ids.discard(child.span_id)
            self.held -= 1
            self._release(child, child.span_id, out)
        return len(out) - before

    def _release(self, span: LiveSpan, root: int, out: list[tuple[LiveSpan, int]]) -> None:
        stack = [span]
        while stack:
            s = stack.pop()
            out.append((s, root))
            self._remember(s.span_id, root)
            for child in self._held.pop(s.span_id, ()):
                self._held_ids.discard(child.span_id)
                self.held -= 1
                stack.append(child)

    def _remember(self, span_id: int, root: int) -> None:
        if len(self._sent) >= self.max_remembered:
            for old in list(self._sent)[: self.max_remembered // 2]:
                del self._sent[old]
        self._sent[span_id] = root


class _LastMessage(logging.Handler):
    """Keeps the exporter's last log line: the reason a failed export gives."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.last = ""

    def emit(self, record: logging.LogRecord) -> None:
        message = record.getMessage().strip()
        # the give-up and shutdown lines say no more than the result does
        if message and not message.startswith(("Failed to export", "Shutdown in progress")):
            self.last = message.splitlines()[0]


def _say_on_stderr(line: str) -> None:
    from probe.printable import printable

    print(printable(f"probe: otlp: {line}"), file=sys.stderr, flush=True)


class LiveTraces:
    """Streams the run's finished spans to an OTLP/HTTP collector.

    ``endpoint``: the collector's base URL (``/v1/traces`` is added); None: the SDK's
    standard resolution (``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``, else
    ``OTEL_EXPORTER_OTLP_ENDPOINT`` + ``/v1/traces``, else localhost:4318).
    ``exporter``: any span exporter (tests pass an in-memory one)."""

    def __init__(
        self,
        run_dir: Path,
        endpoint: str | None,
        *,
        exporter: Any = None,
        timeout_s: float = 10.0,
        max_batches: int = MAX_BATCHES,
        trees: SpanTrees | None = None,
        say: Callable[[str], None] = _say_on_stderr,
    ) -> None:
        self.run_dir = run_dir
        self.endpoint = endpoint
        self.trees = trees or SpanTrees()
        self.say = say
        self.sent = self.failed = self.dropped = 0
        self._mapper: Any = None
        self._waiting: list[tuple[LiveSpan, int]] = []  # released before meta.json was read
        self._queue: queue.Queue[list[Any]] = queue.Queue(max_batches)
        self._closing = threading.Event()  # drain the queue, then end
        self._abandon = False  # count what is queued as failed instead of sending it
        self._log = _LastMessage()
        self._failing = False
        if exporter is None:
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

            url = None if endpoint is None else f"{endpoint.rstrip('/')}/v1/traces"
            exporter = OTLPSpanExporter(endpoint=url, timeout=timeout_s)
            logging.getLogger("opentelemetry.exporter.otlp").addHandler(self._log)
            logging.getLogger("opentelemetry.exporter.otlp").propagate = False
        self._exporter = exporter
        self._thread = threading.Thread(target=self._post, name="probe-otlp", daemon=True)
        self._thread.start()

    def add(self, spans: Iterable[LiveSpan]) -> None:
        """Finished spans from the journals: their trees go out once their roots ended."""
        self._enqueue(self.trees.add(spans))

    def close(self, timeout_s: float = CLOSE_TIMEOUT_S) -> dict[str, int]:
        """Send what is held and queued, waiting at most ``timeout_s`` for the collector
        (what is left then counts as failed); returns the figures: spans sent, failed,
        dropped, and sent without their root."""
        self._enqueue(self.trees.rest(), final=True)
        self._closing.set()
        self._thread.join(timeout_s)
        self._abandon = True  # what is still queued is counted, not sent
        self._exporter.shutdown()  # ends a retry's back-off wait at once
        self._thread.join(timeout_s)
        figures = {
            "sent": self.sent,
            "failed": self.failed,
            "dropped": self.dropped,
            "without_root": self.trees.released_early,
        }
        lost = self.failed + self.dropped
        if lost:
            self.say(
                f"{lost:,} of {lost + self.sent:,} spans not delivered to {self._where()}; "
                f"the run directory has them all (probe export {self.run_dir} --format otlp "
                f"--endpoint URL sends them again)"
            )
        return figures

    def _where(self) -> str:
        return self.endpoint or "the collector (OTEL_EXPORTER_OTLP_ENDPOINT)"

    def _enqueue(self, released: list[tuple[LiveSpan, int]], *, final: bool = False) -> None:
        mapper = self._mapper or self._read_meta()
        if mapper is None:
            if final:  # the run's meta never came: nothing can be timed
                self.dropped += len(self._waiting) + len(released)
                self._waiting.clear()
            else:
                self._waiting.extend(released)
            return
        released, self._waiting = self._waiting + released, []
        for i in range(0, len(released), BATCH_SPANS):
            batch = [
                mapper.span(
                    span_id=s.span_id,
                    parent_id=s.parent_id if s.span_id != root else None,
                    root_id=root,
                    name=s.name,
                    category=s.category,
                    start_ns=s.start_ns,
                    end_ns=s.end_ns,
                    request_id=s.request_id,
                    attrs=s.attrs,
                    pid=s.pid,
                )
                for s, root in released[i : i + BATCH_SPANS]
            ]
            try:
                self._queue.put_nowait(batch)
            except queue.Full:
                self.dropped += len(batch)

    def _read_meta(self) -> Any:
        from probe.live.otel import SpanMapper

        try:
            meta = json.loads((self.run_dir / "meta.json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        if not isinstance(meta, dict) or "clock" not in meta:
            return None
        self._mapper = SpanMapper(meta)
        return self._mapper

    def _post(self) -> None:
        while True:
            try:
                batch = self._queue.get(timeout=0.1)
            except queue.Empty:
                if self._closing.is_set():
                    return
                continue
            if self._abandon:
                self.failed += len(batch)
            elif self._export(batch):
                self.sent += len(batch)
                if self._failing:
                    self.say(f"delivering spans to {self._where()} again")
                self._failing = False
            else:
                self.failed += len(batch)
                if not self._failing:
                    why = f" ({self._log.last})" if self._log.last else ""
                    self.say(
                        f"cannot deliver spans to {self._where()}{why}; retrying with "
                        "back-off, the service is not held up"
                    )
                self._failing = True

    def _export(self, batch: list[Any]) -> bool:
        from opentelemetry.sdk.trace.export import SpanExportResult

        try:
            return bool(self._exporter.export(batch) is SpanExportResult.SUCCESS)
        except Exception as e:  # an exporter must not end the stream
            self._log.last = str(e)
            return False
