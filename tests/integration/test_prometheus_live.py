"""`probe run --prometheus-port` as a user scrapes it: a real service under probe, its
metrics read over HTTP on 127.0.0.1 while it runs, and a port already taken."""

from __future__ import annotations

import json
import signal
import socket
import time
import urllib.request

import psutil
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.threads_corpus.drive import free_port

from .conftest import wait_until, write_script

pytestmark = pytest.mark.integration

SERVICE = """
import time
import probe

print("ready", flush=True)
end = time.monotonic() + 6
while time.monotonic() < end:
    with probe.request():
        with probe.span("work"):
            time.sleep(0.005)
"""


def scrape(port: int) -> dict[str, dict]:
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
    samples: dict[str, dict] = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            samples.setdefault(s.name, {})[tuple(sorted(s.labels.items()))] = s.value
    return samples


def requests_seen(port: int) -> float:
    try:
        counts = scrape(port).get("probe_requests_total", {})
    except OSError:
        return 0.0
    return sum(counts.values())


def test_live_metrics_are_served_while_the_service_runs(run_probe, tmp_path):
    port = free_port()
    script = write_script(tmp_path, SERVICE)
    proc = run_probe.spawn("--no-report", "--prometheus-port", str(port), script)
    assert proc.stdout.readline().strip() == "ready"
    wait_until(lambda: requests_seen(port) >= 50, timeout=30)
    first = requests_seen(port)
    time.sleep(1.5)
    samples = scrape(port)
    assert sum(samples["probe_requests_total"].values()) > first  # live: it grows
    work = samples["probe_span_duration_seconds_count"][(("category", "span"), ("name", "work"))]
    assert work >= first
    # each span slept 5 ms: the histogram's mean holds it
    total = samples["probe_span_duration_seconds_sum"][(("category", "span"), ("name", "work"))]
    assert 0.005 <= total / work < 0.05
    assert "probe_collector_cpu_seconds_total" in samples
    proc.communicate(timeout=60)
    assert proc.returncode == 0


# A service whose limit nobody can doubt, measured from outside while it runs (the test
# reads its CPU time with psutil over the same seconds): one thread spending ~all its
# time in a pure Python loop -- cpu/python, at ~1 core.
CPU_SERVICE = """
import probe

def tokenize(n):
    total = 0
    for i in range(n):
        total += (i * 7) % 13
    return total

print("ready", flush=True)
while True:
    with probe.request():
        with probe.span("tokenize"):
            tokenize(20_000)
"""


def verdict_labels(port: int) -> dict | None:
    try:
        samples = scrape(port)
    except OSError:
        return None
    if not samples.get("probe_verdict_timestamp_seconds", {}).get((), 0):
        return None
    (labels,) = samples["probe_verdict_share"]
    return dict(labels)


def test_the_verdict_on_the_run_so_far_is_served_while_it_runs(run_probe, tmp_path):
    port = free_port()
    script = write_script(tmp_path, CPU_SERVICE)
    proc = run_probe.spawn("--prometheus-port", str(port), script)
    assert proc.stdout.readline().strip() == "ready"
    target = psutil.Process(proc.pid)
    cpu_before, wall_before = sum(target.cpu_times()[:2]), time.monotonic()
    found: list[dict] = []
    wait_until(lambda: bool(found.append(verdict_labels(port)) or found[-1]), timeout=60)
    cores = (sum(target.cpu_times()[:2]) - cpu_before) / (time.monotonic() - wall_before)
    assert cores > 0.8  # the truth, from outside: it kept a core busy
    assert (found[-1]["kind"], found[-1]["subkind"]) == ("cpu", "python"), found[-1]
    assert (tmp_path / "run" / "live-verdict.json").is_file()
    proc.send_signal(signal.SIGINT)
    proc.communicate(timeout=120)
    assert proc.returncode in (0, 130)
    final = json.loads((tmp_path / "run" / "diagnosis.json").read_text())["primary"]
    assert (final["kind"], final["subkind"]) == ("cpu", "python")
    assert not (tmp_path / "run" / "live-verdict.json").exists()  # diagnosis.json supersedes


def test_a_port_already_taken_is_one_line_and_nothing_runs(run_probe, tmp_path):
    script = write_script(tmp_path, "print('ran')\n")
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = run_probe("--prometheus-port", str(port), script)
    assert result.returncode == 2 and "ran" not in result.stdout
    assert result.stderr.strip().startswith(f"probe: error: --prometheus-port {port}")
    assert len(result.stderr.strip().splitlines()) == 1
