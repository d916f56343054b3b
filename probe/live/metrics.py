"""Live metrics while a run goes on: what ``probe run --prometheus-port`` serves.

The sidecar (``probe.cli.sidecar``) owns it: once a second it reads what the target's
span journals gained since the last read (``spans.jsonl``, and each worker's under
``workers/<pid>/``, flushed at least once a second by the span recorder) and updates a
``prometheus_client`` registry, served over HTTP on 127.0.0.1 unless told otherwise.
The service's span hot path is untouched: nothing here runs in its process.

Metrics, in base units:

* ``probe_span_duration_seconds{name, category}``: a histogram of every finished span
  (the client's default buckets, 5 ms to 10 s) -- per endpoint for a served app's
  requests (``POST /predict``), per stage for the rest;
* ``probe_requests_total{name, status}``: requests finished, by status where the request
  came from a web app ("" otherwise): throughput is its rate;
* ``probe_collector_cpu_seconds_total``: CPU used by probe's helper processes (this
  sidecar and the finisher) -- the part of the collector's cost outside the service.

Not served (yet): the verdict, which needs the analysis (pandas) the sidecar does not
load; ``probe report`` gives it after the run.

Collection side: stdlib and prometheus_client only.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, start_http_server

__all__ = ["LiveMetrics"]

# the spans journal's row (probe.rundir.schema.COLUMNS["spans"]): the fields read here
_NAME, _CATEGORY, _START, _END, _ATTRS = 3, 4, 5, 6, 8


class _Tail:
    """What a journal gained since the last read: whole lines only (a batch being
    written stays for the next read)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.offset = 0
        self.partial = b""

    def new_lines(self) -> list[bytes]:
        try:
            with open(self.path, "rb") as f:
                f.seek(self.offset)
                data = f.read()
        except OSError:
            return []
        self.offset += len(data)
        data = self.partial + data
        lines = data.split(b"\n")
        self.partial = lines.pop()
        return [line for line in lines if line.strip()]


class LiveMetrics:
    def __init__(self, run_dir: Path, own_cpu: Callable[[], float]) -> None:
        self.run_dir = run_dir
        self.registry = CollectorRegistry()
        self.spans = Histogram(
            "probe_span_duration_seconds",
            "Finished spans: requests per endpoint, stages",
            ["name", "category"],
            registry=self.registry,
        )
        self.requests = Counter(
            "probe_requests", "Requests finished", ["name", "status"], registry=self.registry
        )
        cpu = Gauge(
            "probe_collector_cpu_seconds_total",
            "CPU seconds used by probe's helper processes (sidecar, finisher)",
            registry=self.registry,
        )
        cpu.set_function(own_cpu)
        self._tails: dict[Path, _Tail] = {}
        self._lock = threading.Lock()

    def serve(self, host: str, port: int) -> Any:
        """Serve the registry on ``host:port``; raises OSError when the port is taken."""
        server, _ = start_http_server(port, addr=host, registry=self.registry)
        return server

    def poll(self) -> int:
        """Read the journals' new spans into the metrics; returns how many were read."""
        with self._lock:
            journals = [self.run_dir / "spans.jsonl", *self.run_dir.glob("workers/*/spans.jsonl")]
            read = 0
            for path in journals:
                tail = self._tails.setdefault(path, _Tail(path))
                for line in tail.new_lines():
                    read += self._batch(line)
            return read

    def _batch(self, line: bytes) -> int:
        try:
            prefix, rows = json.loads(line)
        except (ValueError, TypeError):
            return 0  # a torn batch (a killed writer): its spans are lost to the live view
        for row in rows:
            span = [*prefix, *row]
            try:
                name, category = str(span[_NAME]), str(span[_CATEGORY])
                seconds = max(int(span[_END]) - int(span[_START]), 0) / 1e9
            except (IndexError, TypeError, ValueError):
                continue
            self.spans.labels(name, category).observe(seconds)
            if category == "request":
                attrs = span[_ATTRS] if len(span) > _ATTRS else None
                self.requests.labels(name, _status(attrs)).inc()
        return len(rows)


def _status(attrs: Any) -> str:
    if isinstance(attrs, str):
        try:
            attrs = json.loads(attrs)
        except ValueError:
            return ""
    status = attrs.get("status") if isinstance(attrs, dict) else None
    return str(status) if status is not None else ""
