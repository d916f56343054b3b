"""An OTLP/HTTP collector on 127.0.0.1 for the tests: what `probe export --format otlp`
and `probe run --otlp` post, decoded with OpenTelemetry's own protobuf definitions."""

from __future__ import annotations


class Collector:
    """An OTLP/HTTP collector on 127.0.0.1: decodes what is posted to /v1/traces and
    /v1/metrics with OpenTelemetry's own protobuf definitions."""

    def __init__(self) -> None:
        import threading
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        from opentelemetry.proto.collector.metrics.v1 import metrics_service_pb2
        from opentelemetry.proto.collector.trace.v1 import trace_service_pb2

        self.spans: list = []
        self.metrics: list = []
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                body = self.rfile.read(int(self.headers["Content-Length"]))
                if self.path == "/v1/traces":
                    request = trace_service_pb2.ExportTraceServiceRequest.FromString(body)
                    for rs in request.resource_spans:
                        for ss in rs.scope_spans:
                            receiver.spans.extend(ss.spans)
                elif self.path == "/v1/metrics":
                    request = metrics_service_pb2.ExportMetricsServiceRequest.FromString(body)
                    for rm in request.resource_metrics:
                        for sm in rm.scope_metrics:
                            receiver.metrics.extend(sm.metrics)
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(10)
