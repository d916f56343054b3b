"""`probe analyze` and `probe diff` as users run them, on real and damaged run directories."""

from __future__ import annotations

import json
import shutil
import subprocess

import pytest

from tests.synthetic import RunBuilder

from .conftest import probe_cmd, write_script

pytestmark = pytest.mark.integration

SERVICE = """
import sys, time
import probe

@probe.stage("work")
def work(n):
    end = time.perf_counter() + n
    while time.perf_counter() < end:
        pass

@probe.stage("wait")
def wait(n):
    time.sleep(n)

for i in range(int(sys.argv[1])):
    with probe.request():
        work(0.01)
        wait(float(sys.argv[2]))
"""


def probe(*args, cwd=None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(probe_cmd(*args), capture_output=True, text=True, timeout=120, cwd=cwd)


@pytest.fixture
def slow_run(tmp_path, run_probe):
    script = write_script(tmp_path, SERVICE)
    r = run_probe(script, "20", "0.04", out=tmp_path / "slow")
    assert r.returncode == 0, r.stderr
    return r.run_dir, script


def test_analyze_rewrites_the_same_diagnosis_and_prints_the_verdict(slow_run):
    run_dir, _ = slow_run
    first = (run_dir / "diagnosis.json").read_text()
    (run_dir / "diagnosis.json").unlink()
    r = probe("analyze", run_dir)
    assert r.returncode == 0, r.stderr
    assert "I/O-bound in `wait`" in r.stdout and "io/sleep" in r.stdout
    assert (run_dir / "diagnosis.json").read_text() == first  # deterministic
    as_json = probe("analyze", "--json", "--no-write", run_dir)
    assert json.loads(as_json.stdout)["primary"]["stage"] == "wait"


def test_diff_shows_realized_beside_predicted(slow_run, tmp_path, run_probe):
    run_a, script = slow_run
    b = run_probe(script, "20", "0.004", out=tmp_path / "fast")
    assert b.returncode == 0
    r = probe("diff", run_a, b.run_dir)
    assert r.returncode == 0, r.stderr
    assert "realized" in r.stdout and "throughput" in r.stdout and "wait" in r.stdout
    data = json.loads(probe("diff", "--json", run_a, b.run_dir).stdout)
    assert data["throughput"]["speedup"] > 2.0
    assert data["stages"][0]["stage"] in ("request", "wait", "work")
    unknown = probe("diff", run_a, b.run_dir, "--applied", "fp16")
    assert unknown.returncode == 2
    assert unknown.stderr.count("\n") == 1 and "no recommendation fp16" in unknown.stderr


def test_missing_run_dir_is_one_line_and_exit_2(tmp_path):
    r = probe("analyze", tmp_path / "nope")
    assert r.returncode == 2
    assert r.stderr.strip() == f"probe: error: {tmp_path / 'nope'}: no such run directory"
    d = probe("diff", tmp_path / "nope", tmp_path / "nope2")
    assert d.returncode == 2 and "no such run directory" in d.stderr


def test_corrupt_meta_is_one_line_and_exit_2(tmp_path):
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "meta.json").write_text("{not json")
    r = probe("analyze", bad)
    assert r.returncode == 2 and r.stderr.count("\n") == 1
    assert "unreadable" in r.stderr and "Traceback" not in r.stderr


def test_damaged_tables_are_salvaged_with_a_note(slow_run, tmp_path):
    run_dir, _ = slow_run
    damaged = tmp_path / "damaged"
    shutil.copytree(run_dir, damaged)
    (damaged / "resources.parquet").write_bytes(b"PAR1 garbage")
    r = probe("analyze", damaged)
    assert r.returncode == 0, r.stderr
    assert "resources: unreadable Parquet dropped" in r.stdout
    assert "`wait`" in r.stdout  # the spans and samples still judge the run


def test_run_with_nothing_recorded_says_so(tmp_path):
    empty = RunBuilder(duration_s=0.0).write(tmp_path / "empty")
    r = probe("analyze", empty)
    assert r.returncode == 0
    assert "Nothing to judge" in r.stdout


def test_verbs_have_help():
    for verb in ("analyze", "diff"):
        r = probe(verb, "--help")
        assert r.returncode == 0 and "Example" in r.stdout
    top = probe("--help")
    assert "analyze" in top.stdout and "diff" in top.stdout


def test_analyze_diagnoses_a_kineto_trace_recorded_anywhere(tmp_path):
    from tests.unit.test_kineto_reader import write_trace
    from tests.unit.test_trace_diagnosis import host_bound_trace

    trace = write_trace(tmp_path / "worker0.pt.trace.json.gz", host_bound_trace(), gz=True)
    r = probe("analyze", trace)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("probe: Host-bound") and "GPU idle by cause" in r.stdout
    doc = json.loads(probe("analyze", "--json", trace).stdout)
    assert doc["source"] == "kineto" and doc["primary"]["subkind"] == "launch_bound"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["worker0.pt.trace.json.gz"]


def test_a_trace_that_is_not_one_is_one_line_and_exit_2(tmp_path):
    broken = tmp_path / "trace.json.gz"
    broken.write_bytes(b"\x1f\x8b\x08\x00garbage")
    r = probe("analyze", broken)
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "Traceback" not in r.stderr
    assert "cannot be read as a trace" in r.stderr
