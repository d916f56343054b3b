"""Live metrics while a run goes on: what ``probe run --prometheus-port`` serves.

The sidecar (``probe.cli.sidecar``) feeds it once a second with the spans the run's
journals gained (``probe.live.journals``) and serves its ``prometheus_client`` registry
over HTTP, on 127.0.0.1 unless told otherwise. The service's span hot path is untouched:
nothing here runs in its process.

Metrics, in base units:

* ``probe_span_duration_seconds{name, category}``: a histogram of every finished span
  (the client's default buckets, 5 ms to 10 s) -- per endpoint for a served app's
  requests (``POST /predict``), per stage for the rest;
* ``probe_requests_total{name, status}``: requests finished, by status where the request
  came from a web app ("" otherwise): throughput is its rate;
* ``probe_collector_cpu_seconds_total``: CPU used by probe's helper processes (this
  sidecar and the finisher) -- the part of the collector's cost outside the service;
* the current verdict, where the finisher diagnoses the run as it goes
  (``probe.cli.finisher``; not with ``--no-report``): ``probe_verdict_share{kind,
  subkind, stage}`` (the limit's share of the work; one series, replaced when the
  verdict changes), ``probe_verdict_confidence{...}``, ``probe_leak_state{state}``
  (leak / no_leak / undetermined, a state set) and ``probe_verdict_timestamp_seconds``
  (when it was made: a dashboard shows its age). Read from ``LIVE_VERDICT_FILE`` in the
  run directory each second, when it changed.

Stdlib and prometheus_client only.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Enum,
    Gauge,
    Histogram,
    start_http_server,
)

from probe.live import LIVE_VERDICT_FILE

if TYPE_CHECKING:
    from probe.live.journals import LiveSpan

__all__ = ["LiveMetrics"]

_LEAK_STATES = ["leak", "no_leak", "undetermined", "unknown"]


class LiveMetrics:
    """``own_cpu``: probe's helper CPU seconds so far; ``verdicts``: the run directory
    whose live verdict to serve (None: none)."""

    def __init__(self, own_cpu: Callable[[], float], verdicts: Path | None = None) -> None:
        self.registry = CollectorRegistry()
        self.verdicts = verdicts
        self._verdict_mtime = 0
        self._verdict_labels: tuple[str, str, str] | None = None
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
        limit = ["kind", "subkind", "stage"]
        self.share = Gauge(
            "probe_verdict_share",
            "The current verdict: the limit's share of the work (diagnosis primary.share)",
            limit,
            registry=self.registry,
        )
        self.confidence = Gauge(
            "probe_verdict_confidence",
            "The current verdict's confidence, 0-1",
            limit,
            registry=self.registry,
        )
        self.leak = Enum(
            "probe_leak", "The leak verdict's state", states=_LEAK_STATES, registry=self.registry
        )
        self.leak.state("unknown")
        self.verdict_at = Gauge(
            "probe_verdict_timestamp_seconds",
            "When the current verdict was made (Unix time; 0: none yet)",
            registry=self.registry,
        )

    def serve(self, host: str, port: int) -> Any:
        """Serve the registry on ``host:port``; raises OSError when the port is taken."""
        server, _ = start_http_server(port, addr=host, registry=self.registry)
        return server

    def observe(self, spans: Iterable[LiveSpan]) -> None:
        """Count finished spans into the metrics (and take a new verdict, if made)."""
        self.refresh_verdict()
        for span in spans:
            seconds = (span.end_ns - span.start_ns) / 1e9
            self.spans.labels(span.name, span.category).observe(seconds)
            if span.category == "request":
                status = span.attrs.get("status")
                self.requests.labels(span.name, "" if status is None else str(status)).inc()

    def refresh_verdict(self) -> None:
        """Serve the live verdict file's verdict, if it changed since the last read."""
        if self.verdicts is None:
            return
        path = self.verdicts / LIVE_VERDICT_FILE
        try:
            mtime = path.stat().st_mtime_ns
            if mtime == self._verdict_mtime:
                return
            document = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return  # none yet (or being replaced: the next read takes it)
        self._verdict_mtime = mtime
        primary = document.get("primary") or {}
        labels = tuple(str(primary.get(k) or "") for k in ("kind", "subkind", "stage"))
        if self._verdict_labels is not None and self._verdict_labels != labels:
            self.share.remove(*self._verdict_labels)
            self.confidence.remove(*self._verdict_labels)
        self._verdict_labels = labels  # type: ignore[assignment]
        self.share.labels(*labels).set(float(primary.get("share") or 0.0))
        self.confidence.labels(*labels).set(float(primary.get("confidence") or 0.0))
        state = str((document.get("leak") or {}).get("state") or "unknown").replace(" ", "_")
        self.leak.state(state if state in _LEAK_STATES else "unknown")
        self.verdict_at.set(int(document.get("unix_ns") or 0) / 1e9)
