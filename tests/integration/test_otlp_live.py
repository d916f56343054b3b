"""`probe run --otlp` as users run it: a FastAPI app under uvicorn streams its requests to
a collector on 127.0.0.1 while it serves, with the ids a later `probe export` sends; an
unreachable collector is said and counted, and the run is whole; a bad URL is refused."""

from __future__ import annotations

import json
import signal
import subprocess
import threading

import pytest

from probe.rundir.reader import load
from tests.serving_corpus.drive import drive
from tests.threads_corpus.drive import free_port, wait_for_port

from .conftest import probe_cmd, wait_until, write_script
from .test_http_spans import CORPUS, CPU_ROUTE, SLEEP_ROUTE

pytestmark = pytest.mark.integration

UVICORN = ["-m", "uvicorn", "shop_api:app", "--app-dir", str(CORPUS), "--log-level", "critical"]


def server_spans(collector) -> list:
    return [s for s in list(collector.spans) if s.kind == s.SPAN_KIND_SERVER]


def test_a_fastapi_apps_requests_stream_to_the_collector_while_it_serves(
    run_probe, tmp_path, receiver
):
    pytest.importorskip("fastapi")
    port = free_port()
    server = run_probe.spawn("--otlp-endpoint", receiver.url, *UVICORN, "--port", str(port))
    output: list[str] = []
    drain = threading.Thread(target=output.extend, args=(server.stderr,), daemon=True)
    drain.start()
    wait_for_port(port)
    answers, _ = drive(port, clients=4, per_client=50)
    answered = sum(n for (_, status), n in answers.items() if status)
    # live: every answered request reaches the collector while the service still runs
    wait_until(lambda: len(server_spans(receiver)) >= answered, timeout=30)
    assert server.poll() is None
    server.send_signal(signal.SIGINT)
    server.communicate(timeout=120)
    drain.join(10)
    assert server.returncode in (0, 130), "".join(output)[-3000:]

    streamed = server_spans(receiver)
    assert len(streamed) == answered
    for span in streamed:
        attrs = {a.key: a.value for a in span.attributes}
        assert span.name == f"{attrs['http.request.method'].string_value} " + (
            attrs["http.route"].string_value
        )
        assert span.name in (CPU_ROUTE, SLEEP_ROUTE)
        assert attrs["http.response.status_code"].int_value >= 200
    # every span of the run directory, once, with the ids the export gives them
    run_dir = tmp_path / "run"
    recorded = len(load(run_dir).tables["spans"])
    ids = {(s.trace_id, s.span_id) for s in receiver.spans}
    assert len(receiver.spans) == len(ids) == recorded
    from opentelemetry.proto.collector.trace.v1 import trace_service_pb2

    out = tmp_path / "spans.pb"
    subprocess.run(probe_cmd("export", run_dir, "--format", "otlp", "--full", "-o", out),
                   check=True, capture_output=True, timeout=300)  # fmt: skip
    exported = trace_service_pb2.ExportTraceServiceRequest.FromString(out.read_bytes())
    exported_ids = {
        (s.trace_id, s.span_id)
        for rs in exported.resource_spans
        for ss in rs.scope_spans
        for s in ss.spans
    }
    assert exported_ids == ids
    figures = json.loads((run_dir / "meta.json").read_text())["collector"]["otlp"]
    assert figures == {"sent": recorded, "failed": 0, "dropped": 0, "without_root": 0}


SERVICE = """
import time
import probe

end = time.monotonic() + 2
while time.monotonic() < end:
    with probe.request():
        with probe.span("work"):
            time.sleep(0.01)
"""


def test_an_unreachable_collector_is_said_and_counted_and_the_run_is_whole(run_probe, tmp_path):
    pytest.importorskip("opentelemetry.sdk")
    script = write_script(tmp_path, SERVICE)
    nothing = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    result = run_probe("--otlp-endpoint", nothing, script)
    assert result.returncode == 0, result.stderr
    said = [line for line in result.stderr.splitlines() if line.startswith("probe: otlp:")]
    # one line when delivery starts failing, one summing up at the end: not one a retry
    assert len(said) == 2, result.stderr
    assert said[0].startswith(f"probe: otlp: cannot deliver spans to {nothing}")
    run_dir = tmp_path / "run"
    recorded = len(load(run_dir).tables["spans"])
    assert said[1].startswith(f"probe: otlp: {recorded:,} of {recorded:,} spans not delivered")
    figures = json.loads((run_dir / "meta.json").read_text())["collector"]["otlp"]
    assert figures["sent"] == 0 and figures["failed"] + figures["dropped"] == recorded
    assert (run_dir / "diagnosis.json").is_file()


@pytest.mark.parametrize("url", ["ftp://collector:4318", "127.0.0.1:4318", "http://:4318"])
def test_a_collector_url_that_cannot_be_posted_to_is_refused_before_the_run(
    run_probe, tmp_path, url
):
    script = write_script(tmp_path, "print('ran')")
    result = run_probe("--otlp-endpoint", url, script)
    assert result.returncode == 2
    assert "ran" not in result.stdout
    assert "is not an http(s)://HOST[:PORT] URL" in result.stderr.strip().splitlines()[-1]
