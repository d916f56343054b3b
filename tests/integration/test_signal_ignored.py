"""`probe run` started where SIGINT is ignored -- in the background from a script
(`probe run … &`, nohup), which a Python process then keeps -- or with a service that
swallows SIGINT: the stop probe planned (the load's end, ``--duration``) still ends the
run, by SIGTERM, instead of leaving `probe run` waiting for ever (before 2026-11-26 the
load's SIGINT was all it sent). Each run gets a ``--stop-grace`` longer than the test's
time limit, where the kernel says SIGINT is ignored: waiting it out fails the test."""

from __future__ import annotations

import json
import os
import signal
import subprocess

import pytest

from probe.rundir import load
from tests.threads_corpus.drive import free_port

from .conftest import probe_cmd, write_script

pytestmark = pytest.mark.integration

SERVICE = """\
import http.server, signal, sys

class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = b"ok"
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass

if "--swallow-sigint" in sys.argv:
    signal.signal(signal.SIGINT, lambda *a: None)  # Ctrl-C does nothing here
http.server.ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), Handler).serve_forever()
"""

LIMIT_S = 45


def ignore_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # as `&` in a non-interactive shell


def probe_run(tmp_path, *args: str, sigint_ignored: bool) -> subprocess.CompletedProcess[str]:
    """`probe run --out tmp_path/run ARGS`, its process group ended whatever happens."""
    proc = subprocess.Popen(
        probe_cmd("run", "--out", tmp_path / "run", *args),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path,
        start_new_session=True, preexec_fn=ignore_sigint if sigint_ignored else None,
    )  # fmt: skip
    try:
        out, err = proc.communicate(timeout=LIMIT_S)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        pytest.fail(f"`probe run` still running after {LIMIT_S} s:\n{err[-2000:]}")
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)  # the service's helpers, if any are left
        except ProcessLookupError:
            pass
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def load_spec(tmp_path, port: int) -> str:
    path = tmp_path / "spec.toml"
    path.write_text(
        f'url = "http://127.0.0.1:{port}"\nconcurrency = 2\nduration = 1\n'
        '[[request]]\npath = "/items/7"\n'
    )
    return str(path)


def test_a_load_run_started_with_sigint_ignored_stops_its_service_with_sigterm(tmp_path):
    port = free_port()
    script = write_script(tmp_path, SERVICE)
    r = probe_run(
        tmp_path, "--load", load_spec(tmp_path, port), "--stop-grace", "600", script, str(port),
        sigint_ignored=True,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr  # the stop was the load's own
    assert "the load stopped it with SIGTERM" in r.stderr
    figures = json.loads((tmp_path / "run" / "load" / "figures.json").read_text())
    assert figures["stopped_with"] == "SIGTERM" and figures["total"]["answered"] > 0
    assert load(tmp_path / "run").meta["exit"]["ended_by"] == "SIGTERM"


def test_a_service_that_swallows_the_load_s_sigint_gets_sigterm_after_the_grace(tmp_path):
    port = free_port()
    script = write_script(tmp_path, SERVICE)
    r = probe_run(
        tmp_path, "--load", load_spec(tmp_path, port), "--stop-grace", "1", script, str(port),
        "--swallow-sigint", sigint_ignored=False,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    figures = json.loads((tmp_path / "run" / "load" / "figures.json").read_text())
    assert figures["stopped_with"] == "SIGTERM"
    assert load(tmp_path / "run").meta["exit"]["ended_by"] == "SIGTERM"


def test_a_duration_with_sigint_ignored_goes_straight_to_sigterm(tmp_path):
    script = write_script(tmp_path, "import time\nwhile True:\n    time.sleep(0.01)\n")
    r = probe_run(tmp_path, "--duration", "1", "--stop-grace", "600", script, sigint_ignored=True)
    run = load(tmp_path / "run")
    assert run.meta["exit"]["ended_by"] == "duration-sigterm", (run.meta["exit"], r.stderr)
    assert run.meta["duration_s"] >= 1
