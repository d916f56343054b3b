"""OTLP renderer: the run's spans as OpenTelemetry traces, and its figures as metrics.

Built with the OpenTelemetry SDK and its OTLP/HTTP exporters (the field's standard;
nothing hand-encoded). From the run's timeline (``probe.analyzers.timeline``):

* each request tree is one trace; a request that came from a web app (it carries
  ``method``/``route``/``status``: ``probe.serving``) is a SERVER span named
  ``METHOD route`` with the HTTP semantic conventions' attributes (``http.request.method``,
  ``http.route``, ``http.response.status_code``; ERROR status at 5xx or on an exception),
  its stages INTERNAL children; other spans INTERNAL. Trace and span ids are derived from
  the run's start and the span ids, so exporting a run twice sends the same ids;
* times are the run's clock turned to Unix time with the pair meta.json read together;
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

import hashlib
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

import pandas as pd

from probe import __version__
from probe.analyzers.spantree import span_attrs
from probe.analyzers.timeline import TimelineLimits

if TYPE_CHECKING:
    from probe.analyzers.analysis import Analysis
    from probe.analyzers.timeline import Timeline

__all__ = ["OtlpExport"]

# spans a request to the collector (and a chunk of the file): a few MB of protobuf
_CHUNK = 10_000
# the span attributes probe.serving records -> the HTTP semantic conventions' names
_HTTP = {"method": "http.request.method", "route": "http.route"}


def _id(bits: int, *parts: object) -> int:
    digest = hashlib.blake2b(":".join(map(str, parts)).encode(), digest_size=bits // 8).digest()
    return int.from_bytes(digest, "big") or 1  # 0 is OpenTelemetry's invalid id


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

    def _resource(self) -> Any:
        from opentelemetry.sdk.resources import Resource

        target = self.meta.get("target") or {}
        name = str(target.get("name") or "service").rsplit("/", 1)[-1]
        return Resource.create(
            {
                "service.name": name,
                "process.pid": int(self.meta.get("pid") or 0),
                "telemetry.sdk.name": "probe",
                "probe.version": __version__,
            }
        )

    def spans(self, spans: pd.DataFrame | None = None) -> list[Any]:
        """The run's spans (or a chunk of them) as the SDK's ReadableSpans, ready for any
        span exporter."""
        from opentelemetry.sdk.trace import ReadableSpan
        from opentelemetry.sdk.util.instrumentation import InstrumentationScope
        from opentelemetry.trace import SpanContext, SpanKind, Status, StatusCode, TraceFlags

        resource, scope = self._resource(), InstrumentationScope("probe", __version__)
        clock = self.meta.get("clock") or {}
        shift = int(clock.get("unix_ns") or 0) - int(clock.get("perf_ns") or 0)
        run = self.meta.get("start_unix_ns") or self.meta.get("start") or "run"
        kept = set(self.timeline.spans["span_id"].tolist())
        spans = self.timeline.spans if spans is None else spans
        out = []
        columns = ["span_id", "parent_id", "root_id", "name", "category", "start_ns", "end_ns",
                   "request_id", "attrs"]  # fmt: skip
        for sid, parent, root, name, category, start, end, rid, attrs in spans[columns].itertuples(
            index=False
        ):
            trace_id = _id(128, run, root)
            context = SpanContext(trace_id, _id(64, run, sid), False, TraceFlags(1))
            up = None
            if not pd.isna(parent) and int(parent) in kept:
                up = SpanContext(trace_id, _id(64, run, int(parent)), False, TraceFlags(1))
            fields, http, failed = _attributes(category, rid, attrs)
            out.append(
                ReadableSpan(
                    name=str(name),
                    context=context,
                    parent=up,
                    resource=resource,
                    attributes=fields,
                    kind=SpanKind.SERVER if http else SpanKind.INTERNAL,
                    status=Status(StatusCode.ERROR) if failed else Status(StatusCode.UNSET),
                    start_time=int(start) + shift,
                    end_time=max(int(end), int(start)) + shift,
                    instrumentation_scope=scope,
                )
            )
        return out

    def metrics(self) -> Any:
        """The figures as OTLP metrics data (the SDK's, collected once)."""
        from opentelemetry.sdk.metrics import MeterProvider
        from opentelemetry.sdk.metrics.export import InMemoryMetricReader

        reader = InMemoryMetricReader()
        meter = MeterProvider(resource=self._resource(), metric_readers=[reader]).get_meter(
            "probe", __version__
        )
        duration = meter.create_histogram("http.server.request.duration", unit="s")
        spans = self.timeline.spans
        requests = spans[spans["category"] == "request"]
        for name, start, end, attrs in requests[["name", "start_ns", "end_ns", "attrs"]].itertuples(
            index=False
        ):
            fields, _, _ = _attributes("request", None, attrs)
            labels = {k: v for k, v in fields.items() if k in _HTTP.values()}
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


def _attributes(category: Any, request_id: Any, attrs: Any) -> tuple[dict[str, Any], bool, bool]:
    """(OpenTelemetry attributes, whether it is an HTTP server request, whether it failed)."""
    values = span_attrs(attrs)
    out: dict[str, Any] = {"probe.category": str(category)}
    if isinstance(request_id, str) and request_id:
        out["probe.request_id"] = request_id
    http = category == "request" and "route" in values and "method" in values
    for key, value in values.items():
        if key in _HTTP:
            out[_HTTP[key]] = str(value)
        elif key == "status" and isinstance(value, int):
            out["http.response.status_code"] = value
        elif isinstance(value, str | int | float | bool):
            out[f"probe.{key}"] = value
    status = values.get("status")
    failed = bool(values.get("error")) or (isinstance(status, int) and status >= 500)
    return out, http, failed
