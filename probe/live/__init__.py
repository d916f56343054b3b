"""What a run shows while it goes on: ``probe run --prometheus-port`` and ``--otlp``.

Both are fed by the sidecar (``probe.cli.sidecar``), outside the service, from the span
journals the recorder flushes once a second (``journals``): the service's span hot path
is the same with them as without. ``metrics`` is the Prometheus registry, ``traces`` the
OTLP span stream, ``otel`` the OpenTelemetry mapping the stream shares with
``probe export --format otlp``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from probe.live.journals import LiveSpan, SpanJournals

__all__ = ["LIVE_VERDICT_FILE", "LiveOutputs", "LiveSpan", "SpanJournals"]

# in the run directory while the run goes on: the finisher's latest diagnosis of the run
# so far (probe.reports.pipeline.write_live_verdict), served by the live metrics
LIVE_VERDICT_FILE = "live-verdict.json"


class LiveOutputs:
    """The journals read once a second, their new spans handed to each live output
    (objects with ``observe(spans)`` or ``add(spans)``; ``close()`` where they have it)."""

    def __init__(self, run_dir: Path, pid: int, metrics: Any = None, traces: Any = None) -> None:
        self.journals = SpanJournals(run_dir, pid)
        self.metrics = metrics
        self.traces = traces

    def poll(self) -> int:
        """Read what the journals gained into the outputs; how many spans."""
        spans = self.journals.poll()
        if self.metrics is not None:
            self.metrics.observe(spans)
        if spans and self.traces is not None:
            self.traces.add(spans)
        return len(spans)

    def close(self) -> dict[str, Any]:
        """The run ended (the last poll done): the figures to keep in meta.json."""
        figures: dict[str, Any] = {}
        if self.traces is not None:
            figures["otlp"] = self.traces.close()
        return figures
