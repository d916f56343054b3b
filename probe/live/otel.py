"""probe's spans as OpenTelemetry's: ids, attributes, resources and the SDK's span objects.

Pandas-free, shared by the live stream (``probe.live.traces``, in the sidecar) and the
export (``probe.reports.otlp``), so a run streamed and the same run exported later send
the same spans with the same ids:

* a trace is a span tree: its id is derived from the run's start and the tree's root span
  id (a span whose parent is missing -- still open when a killed run stopped -- is a
  root), a span's id from the run's start and its own id;
* a request that came from a web app (it carries ``method``/``route``/``status``:
  ``probe.serving``) is a SERVER span named ``METHOD route`` with the HTTP semantic
  conventions' attributes (``http.request.method``, ``http.route``,
  ``http.response.status_code``; ERROR status at 5xx or on an exception); other spans
  are INTERNAL, their own attributes under ``probe.``;
* times are the run's perf_counter clock turned to Unix time with the pair meta.json
  read together (``clock``).
"""

from __future__ import annotations

import hashlib
from typing import Any

from probe import __version__

__all__ = ["SpanMapper", "attributes", "otel_id"]

# the span attributes probe.serving records -> the HTTP semantic conventions' names
HTTP_ATTRIBUTES = {"method": "http.request.method", "route": "http.route"}


def otel_id(bits: int, *parts: object) -> int:
    """A stable id of ``bits`` bits from ``parts`` (never 0, OpenTelemetry's invalid id)."""
    digest = hashlib.blake2b(":".join(map(str, parts)).encode(), digest_size=bits // 8).digest()
    return int.from_bytes(digest, "big") or 1


def attributes(
    category: Any, request_id: Any, values: dict[str, Any]
) -> tuple[dict[str, Any], bool, bool]:
    """(OpenTelemetry attributes, whether it is an HTTP server request, whether it failed)
    of a span of ``category`` whose probe attributes are ``values``."""
    out: dict[str, Any] = {"probe.category": str(category)}
    if isinstance(request_id, str) and request_id:
        out["probe.request_id"] = request_id
    http = category == "request" and "route" in values and "method" in values
    for key, value in values.items():
        if key in HTTP_ATTRIBUTES:
            out[HTTP_ATTRIBUTES[key]] = str(value)
        elif key == "status" and isinstance(value, int):
            out["http.response.status_code"] = value
        elif isinstance(value, str | int | float | bool):
            out[f"probe.{key}"] = value
    status = values.get("status")
    failed = bool(values.get("error")) or (isinstance(status, int) and status >= 500)
    return out, http, failed


class SpanMapper:
    """Turns one run's spans into the SDK's ``ReadableSpan``s, ready for any span
    exporter. ``meta``: the run's meta.json (its start, clock pair, target and pid)."""

    def __init__(self, meta: dict[str, Any]) -> None:
        from opentelemetry.sdk.util.instrumentation import InstrumentationScope

        self.meta = meta
        clock = meta.get("clock") or {}
        self.shift_ns = int(clock.get("unix_ns") or 0) - int(clock.get("perf_ns") or 0)
        self.run = meta.get("start_unix_ns") or meta.get("start") or "run"
        self.scope = InstrumentationScope("probe", __version__)
        self.pid = int(meta.get("pid") or 0)
        self._resources: dict[int, Any] = {}

    def resource(self, pid: int | None = None) -> Any:
        """The resource of the process ``pid`` (the run's own by default)."""
        pid = self.pid if pid is None else pid
        found = self._resources.get(pid)
        if found is None:
            found = self._resources[pid] = self._new_resource(pid)
        return found

    def _new_resource(self, pid: int) -> Any:
        from opentelemetry.sdk.resources import Resource

        target = self.meta.get("target") or {}
        name = str(target.get("name") or "service").rsplit("/", 1)[-1]
        return Resource.create(
            {
                "service.name": name,
                "process.pid": pid,
                "telemetry.sdk.name": "probe",
                "probe.version": __version__,
            }
        )

    def span(
        self,
        *,
        span_id: int,
        parent_id: int | None,
        root_id: int,
        name: str,
        category: str,
        start_ns: int,
        end_ns: int,
        request_id: str | None,
        attrs: dict[str, Any],
        pid: int | None = None,
    ) -> Any:
        """One span; ``parent_id`` None where its parent is not in the trace sent."""
        from opentelemetry.sdk.trace import ReadableSpan
        from opentelemetry.trace import SpanContext, SpanKind, Status, StatusCode, TraceFlags

        trace_id = otel_id(128, self.run, root_id)
        context = SpanContext(trace_id, otel_id(64, self.run, span_id), False, TraceFlags(1))
        up = None
        if parent_id is not None:
            up = SpanContext(trace_id, otel_id(64, self.run, parent_id), False, TraceFlags(1))
        fields, http, failed = attributes(category, request_id, attrs)
        return ReadableSpan(
            name=name,
            context=context,
            parent=up,
            resource=self.resource(pid),
            attributes=fields,
            kind=SpanKind.SERVER if http else SpanKind.INTERNAL,
            status=Status(StatusCode.ERROR) if failed else Status(StatusCode.UNSET),
            start_time=start_ns + self.shift_ns,
            end_time=max(end_ns, start_ns) + self.shift_ns,
            instrumentation_scope=self.scope,
        )
