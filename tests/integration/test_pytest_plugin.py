"""The pytest plugin as a user's test suite meets it: a real pytest session in a
subprocess, whose tests run a service under probe with the ``probe_run`` fixture and
assert on the gate; the gates show in pytest's summary."""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.integration

SERVICE = """
import sys, time
import probe

@probe.stage("score")
def score(ms):
    end = time.perf_counter() + ms / 1000
    while time.perf_counter() < end:
        pass

for _ in range(int(sys.argv[1])):
    with probe.request():
        score(float(sys.argv[2]))
"""

TESTS = """
def test_fast_enough(probe_run):
    gate = probe_run("service.py", "100", "2", asserts=["p50(request) < 1s", "no leak"])
    assert gate.passed, gate.text


def test_too_slow_for_its_budget(probe_run):
    gate = probe_run("service.py", "100", "2", asserts=["p50(request) < 1ms"])
    assert gate.passed, gate.text


def test_a_slowdown_against_a_baseline(probe_run):
    before = probe_run("service.py", "150", "2", asserts=["requests >= 150"])
    after = probe_run("service.py", "150", "3", baseline=before.run_dir)
    assert not after.passed and "REGRESSED" in after.text
"""


def test_the_probe_run_fixture_gates_a_service_and_reports_in_the_summary(tmp_path):
    (tmp_path / "service.py").write_text(textwrap.dedent(SERVICE))
    (tmp_path / "test_service.py").write_text(textwrap.dedent(TESTS))
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_service.py"],
        cwd=tmp_path, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    out = done.stdout
    assert done.returncode == 1, out  # one test fails: the one over its budget
    assert "1 failed, 2 passed" in out, out
    assert "test_too_slow_for_its_budget" in out and "p50(request) < 1ms" in out
    summary = re.split(r"=+ probe check =+", out)[1]  # pytest's summary section
    assert "test_service.py::test_fast_enough" in summary
    assert "probe check: passed" in summary and "probe check: FAILED" in summary
    assert "REGRESSED" in summary
