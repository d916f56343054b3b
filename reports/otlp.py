"""OTLP renderer: the run's spans as OpenTelemetry traces, and its figures as metrics.

Built with the OpenTelemetry SDK and its OTLP/HTTP exporters (the field's standard;
nothing hand-encoded). From the run's timeline (``probe.analyzers.timeline``):

* each span tree is one trace, mapped as ``probe.live.otel`` says (shared with
  ``probe run --otlp``'s live stream): a request from a web app is a SERVER span named
  ``METHOD route`` with the HTTP semantic conventions' attributes, its stages INTERNAL
  children; trace and span ids are derived from the run's start and the span ids, so
  exporting a run twice, or exporting a run that was streamed, sends the same ids;
* metrics (``send`` only): ``http.server.request.duration`` (a histogram, seconds, per
  route and method) from every request span, and gauges ``probe.throughput`` (requests
  a second) and ``probe.verdict.share`` (the limit's share, labelled with its kind,
  subkind and stage).

``render()`` is the traces' OTLP/protobuf payload (``ExportTraceServiceRequest``), which
any collector accepts on ``/v1/traces``: ``probe export --format otlp -o spans.pb``
then ``curl --data-binary @spans.pb -H 'Content-Type: application/x-protobuf' ...``.
``send(endpoint, ...)`` posts traces and metrics; the exporter retries with back-off up
to its timeout, and a failure comes back as a message, never an exception.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, Any, ClassVar

import pandas as pd

from probe import __version__
from probe.analyzers.spantree import span_attrs
from probe.analyzers.timeline import TimelineLimits
from probe.live.otel import HTTP_ATTRIBUTES, SpanMapper, attributes

if TYPE_CHECKING:
    from probe.analyzers.analysis import Analysis
    from probe.analyzers.timeline import Timeline

__all__ = ["OtlpExport"]

# spans a request to the collector (and a chunk of the file): a few MB of protobuf
_CHUNK = 10_000


@dataclass(frozen=True)
class OtlpExport:
    format: ClassVar[str] = "otlp"
    filename: ClassVar[str] = "spans.otlp.pb"
    # a span takes ~150 bytes of OTLP protobuf with its ids and attributes (12.2 MB for
    # 80,000 on the hour-long synthetic run, benchmarks/export_bounds.py): 60,000 keep
    # the payload under 10 MB
    limits: ClassVar[TimelineLimits] = TimelineLimits(spans=60_000)

    timeline: Timeline
    meta: dict[str, Any]
    verdict: dict[str, Any] | None = None  # the diagnosis's primary limit, when sending

    @classmethod
    def from_analysis(cls, analysis: Analysis) -> OtlpExport:
        return cls(analysis.timeline, analysis.meta)

    def with_verdict(self, analysis: Analysis) -> OtlpExport:
        return OtlpExport(self.timeline, self.meta, {**analysis.diagnosis.primary,
                                                     **analysis.diagnosis.run})  # fmt: skip

    def render(self) -> bytes:
        from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

        # one request per chunk; concatenated, they are one ExportTraceServiceRequest
        return b"".join(
            bytes(encode_spans(self.spans(chunk)).SerializeToString()) for chunk in self.chunks()
        )

    def chunks(self) -> list[Any]:
        """The spans in chunks of ``_CHUNK`` rows: the SDK's span objects take ~4 KB each,
        so a million at once would take gigabytes."""
        spans = self.timeline.spans
        return [spans.iloc[i : i + _CHUNK] for i in range(0, len(spans), _CHUNK)] or [spans]

    @cached_property
    def mapper(self) -> SpanMapper:
        return SpanMapper(self.meta)

    def spans(self, spans: pd.DataFrame | None = None) -> list[Any]:
        """The run's spans (or a chunk of them) as the SDK's ReadableSpans, ready for any
        span exporter."""
        kept = set(self.timeline.spans["span_id"].tolist())
        spans = self.timeline.spans if spans is None else spans
        columns = ["span_id", "parent_id", "root_id", "name", "category", "start_ns", "end_ns",
                   "request_id", "attrs", "pid"]  # fmt: skip
        return [
            self.mapper.span(
                span_id=int(sid),
                parent_id=None if pd.isna(parent) or int(parent) not in kept else int(parent),
                root_id=int(root),
                name=str(name),
                category=str(category),
                start_ns=int(start),
                end_ns=int(end),
                request_id=rid if isinstance(rid, str) else None,
                attrs=span_attrs(attrs),
                pid=None if pd.isna(pid) else int(pid),
            )
            for sid, parent, root, name, category, start, end, rid, attrs, pid in spans[
                columns
            ].itertuples(index=False)
        ]

    def metrics(self) -> Any:
        """The figures as OTLP metrics data (the SDK's, collected once)."""
        from opentelemetry.sdk.metrics import MeterProvider
        from opentelemetry.sdk.metrics.export import InMemoryMetricReader

        reader = InMemoryMetricReader()
        meter = MeterProvider(resource=self.mapper.resource(), metric_readers=[reader]).get_meter(
            "probe", __version__
        )
        duration = meter.create_histogram("http.server.request.duration", unit="s")
        spans = self.timeline.spans
        requests = spans[spans["category"] == "request"]
        for name, start, end, attrs in requests[["name", "start_ns", "end_ns", "attrs"]].itertuples(
            index=False
        ):
            fields, _, _ = attributes("request", None, span_attrs(attrs))
            labels = {k: v for k, v in fields.items() if k in HTTP_ATTRIBUTES.values()}
            duration.record(max(int(end) - int(start), 0) / 1e9, labels or {"probe.request": name})
        if self.verdict:
            v = self.verdict
            if v.get("throughput_per_s"):
                meter.create_gauge("probe.throughput", unit="{request}/s").set(
                    float(v["throughput_per_s"])
                )
            labels = {k: str(v.get(k) or "") for k in ("kind", "subkind", "stage")}
            meter.create_gauge("probe.verdict.share", unit="1").set(
                float(v.get("share") or 0), labels
            )
        return reader.get_metrics_data()

    def send(self, endpoint: str, *, timeout_s: float) -> str | None:
        """Post the traces and metrics to the OTLP/HTTP collector at ``endpoint`` (its base
        URL); None when both were accepted, else what went wrong."""
        from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk.metrics.export import MetricExportResult
        from opentelemetry.sdk.trace.export import SpanExportResult

        base = endpoint.rstrip("/")
        traces = OTLPSpanExporter(endpoint=f"{base}/v1/traces", timeout=timeout_s)
        metrics = OTLPMetricExporter(endpoint=f"{base}/v1/metrics", timeout=timeout_s)
        try:
            for chunk in self.chunks():
                if traces.export(self.spans(chunk)) is not SpanExportResult.SUCCESS:
                    return f"the collector at {base} did not accept the spans"
            if metrics.export(self.metrics()) is not MetricExportResult.SUCCESS:
                return f"the collector at {base} did not accept the metrics"
        finally:
            traces.shutdown()
            metrics.shutdown()
        return None
