"""`probe check` as a CI job runs it: real runs of a small service, before and after a
20% slowdown, a saved diagnosis as the baseline, and bad input.

Truth: the service's requests each busy-wait a fixed time (``--work-ms``), so a run with
1.2x the work is 1.2x slower per request by construction; the wall clocks of the requests
(the request spans) are what the gate reads. 10 ms of work a request, so that the loop's
own time between requests (0.1 ms on a quiet machine; 1.2 ms in the CI run of 2026-12-03
that failed an unchanged pair of 3-ms requests on throughput, -23.5%, p50 unchanged)
stays a small part of what throughput reads.

With ``--clock cpu`` a request burns a fixed CPU time instead: beside two CPU-bound
processes on 2 cores it waits for a core and its wall time stretches by that wait -- the
machine's, not the service's. Measured (2026-12-03, 300 requests of 3 ms): p50 +77%,
throughput -42%; with the wait the kernel counted (schedstat) taken out, +3% and +5%.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.threads_corpus.drive import free_port

from .conftest import REPO, probe_cmd, write_script

pytestmark = pytest.mark.integration

CORPUS = REPO / "tests" / "serving_corpus"

SERVICE = """
import argparse, time
import probe

parser = argparse.ArgumentParser()
parser.add_argument("--requests", type=int, default=200)
parser.add_argument("--work-ms", type=float, default=10.0)
parser.add_argument("--clock", choices=("wall", "cpu"), default="wall")
args = parser.parse_args()
clock = time.perf_counter if args.clock == "wall" else time.thread_time

@probe.stage("score")
def score(ms):
    end = clock() + ms / 1000
    while clock() < end:
        pass

for i in range(args.requests):
    with probe.request():
        score(args.work_ms)
"""


@contextmanager
def cpu_hogs(count: int) -> Iterator[None]:
    """``count`` CPU-bound processes for the block, each in a session of its own, as
    another tenant's service would be: the kernel shares the cores between sessions
    (autogroup) before it shares them between tasks."""
    hogs = [
        subprocess.Popen([sys.executable, "-c", "while True: pass"], start_new_session=True)
        for _ in range(count)
    ]
    try:
        yield
    finally:
        for hog in hogs:
            hog.kill()
            hog.wait()


def check(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(probe_cmd("check", *args), capture_output=True, text=True, timeout=300)


@pytest.fixture
def runs(run_probe, tmp_path):
    """(baseline, the same service again, the service 20% slower)."""
    script = write_script(tmp_path, SERVICE, "service.py")
    made = {}
    for name, work in (("before", "10"), ("again", "10"), ("slower", "12")):
        result = run_probe(script, "--work-ms", work, out=tmp_path / name)
        assert result.returncode == 0, result.stderr
        made[name] = result.run_dir
    return made


def test_a_twenty_percent_slowdown_fails_the_gate_and_an_unchanged_run_passes(runs):
    same = check(runs["again"], "--baseline", runs["before"], "--max-regression", "10%")
    assert same.returncode == 0, same.stdout + same.stderr
    assert same.stdout.startswith("probe check: passed")

    slower = check(runs["slower"], "--baseline", runs["before"], "--max-regression", "10%")
    assert slower.returncode == 1, slower.stdout + slower.stderr
    assert "REGRESSED" in slower.stdout and "p50(request)" in slower.stdout

    verdict = json.loads(
        check(runs["slower"], "--baseline", runs["before"], "--json").stdout
    )  # fmt: skip
    p50 = next(r for r in verdict["regressions"] if r["figure"] == "p50(request)")
    assert p50["regressed"] and 1.1 < p50["slowdown"] < 1.35
    assert p50["interval"][0] > 1.0


def test_a_run_slowed_by_other_processes_on_its_cores_is_inconclusive_not_a_regression(
    run_probe, tmp_path
):
    # a fixed CPU time a request: beside four CPU hogs it waits for a core, and each
    # request's wall time stretches by that wait
    script = write_script(tmp_path, SERVICE, "service.py")
    cpu_bound = ("--clock", "cpu", "--work-ms", "3", "--requests", "300")
    quiet = run_probe(script, *cpu_bound, out=tmp_path / "quiet")
    with cpu_hogs(4):
        crowded = run_probe(script, *cpu_bound, out=tmp_path / "crowded")
    assert quiet.returncode == 0 and crowded.returncode == 0, crowded.stderr
    waited = json.loads((crowded.run_dir / "diagnosis.json").read_text())["run"]["waited_for_cpu"]
    assert waited["others_held_cores"] and waited["queued_s"] > 0.1, waited

    gate = check(crowded.run_dir, "--baseline", quiet.run_dir, "--max-regression", "10%")
    assert gate.returncode == 0, gate.stdout + gate.stderr
    verdict = json.loads(check(crowded.run_dir, "--baseline", quiet.run_dir, "--json").stdout)
    figures = {r["figure"]: r for r in verdict["regressions"]}
    # the hogs took its cores: throughput fell 2.6-3.4x in four runs; the p50 of a 3-ms
    # request is the scheduler's to decide (+0.4% to +170%: CFS may let most run whole)
    assert figures["throughput"]["slowdown"] > 1.2, figures["throughput"]
    for figure in ("p50(request)", "throughput"):
        r = figures[figure]
        assert r["state"] != "regressed", r
        if r["slowdown"] > 1.1:
            assert r["state"] == "inconclusive", r
            assert any("other processes held" in n for n in r["notes"]), r
        # its wait for a CPU taken out, it is within what the gate allows
        assert r["without_the_machine"]["slowdown"] < 1.1, r


def _served(run_probe, tmp_path, name: str, n: int):
    """shop_api (tests/serving_corpus: an undecorated FastAPI app) under uvicorn, driven
    for 4 s by 4 clients on its sync route, ``n`` rounds of arithmetic a request."""
    pytest.importorskip("fastapi")
    pytest.importorskip("uvicorn")
    port = free_port()
    spec = tmp_path / f"{name}.toml"
    spec.write_text(
        f'url = "http://127.0.0.1:{port}"\nconcurrency = 4\nduration = 4\nwarmup = 1\n'
        f'[[request]]\nmethod = "POST"\npath = "/predict"\njson = {{ n = {n} }}\n'
    )
    return run_probe(
        "--load", spec, "-m", "uvicorn", "shop_api:app", "--app-dir", str(CORPUS),
        "--port", str(port), "--log-level", "critical", out=tmp_path / name,
    )  # fmt: skip


def test_a_served_app_slower_beside_other_processes_is_inconclusive_with_no_figure_it_cannot_read(
    run_probe, tmp_path
):
    # Its sync route runs on AnyIO's worker threads, its request span on the event loop's
    # thread, which waits on the GIL the workers hold: no wait of the machine's can be
    # read from the span's thread. Taken for the machine's, it made a real 30% slowdown
    # beside four hogs read "without it 75% faster" (2026-12-04).
    quiet = _served(run_probe, tmp_path, "quiet", 40_000)
    with cpu_hogs(4):
        slower = _served(run_probe, tmp_path, "slower", 52_000)  # 30% more work a request
    assert quiet.returncode == 0 and slower.returncode == 0, slower.stderr
    waited = json.loads((slower.run_dir / "diagnosis.json").read_text())["run"]["waited_for_cpu"]
    assert waited["others_held_cores"], waited

    gate = check(slower.run_dir, "--baseline", quiet.run_dir)
    assert gate.returncode == 0, gate.stdout + gate.stderr
    verdict = json.loads(check(slower.run_dir, "--baseline", quiet.run_dir, "--json").stdout)
    figures = {r["figure"]: r for r in verdict["regressions"]}
    for r in figures.values():
        assert r["state"] != "regressed" and r["without_the_machine"] is None, r
    # measured, the work and the hogs together regress it (three runs: throughput
    # 1.31-1.50x slower, p99 1.54-1.89x; p50 1.08-1.27x in six, at times within the
    # noise): those figures are inconclusive, and say why there is no figure without it
    unread = [r for r in figures.values() if any("threads did other work" in n for n in r["notes"])]
    assert all(r["state"] == "inconclusive" for r in unread), figures
    # how much slower it was, by the load driver's own count from outside the server: in
    # one clean-clone CI run (2026-12-05) only 1.09x (230.5 -> 211.8/s), within the
    # gate's 10%, and probe read throughput "ok" and p99 inconclusive. Where the driver
    # saw it plainly slower, probe must say it cannot tell whose slowdown it is
    driven = slowdown_by_the_driver(quiet.run_dir, slower.run_dir)
    if driven > 1.2:
        assert figures["throughput"] in unread, (driven, figures["throughput"])


def slowdown_by_the_driver(before: Path, after: Path) -> float:
    """The throughput ratio ``probe run --load``'s driver measured (``load/figures.json``)."""

    def rate(run_dir: Path) -> float:
        figures = json.loads((run_dir / "load" / "figures.json").read_text())
        return float(figures["total"]["throughput_per_s"])

    return rate(before) / rate(after)


def test_assertions_hold_or_fail_on_a_real_run_and_a_saved_diagnosis_is_a_baseline(runs):
    ok = check(runs["before"], "--assert", "p50(request) < 1s", "--assert", "no leak",
               "--assert", "requests >= 200")  # fmt: skip
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert ok.stdout.count("held") == 3

    # repeats of a run: each run's assertions, labelled; the comparison pools them
    both = check(runs["before"], runs["again"], "--baseline", runs["before"],
                 "--assert", "requests >= 200")  # fmt: skip
    assert both.returncode == 0, both.stdout + both.stderr
    assert "requests >= 200  [before]" in both.stdout and "[again]" in both.stdout

    too_strict = check(runs["before"], "--assert", "p50(request) < 1ms")
    assert too_strict.returncode == 1 and "FAILED" in too_strict.stdout

    saved = runs["before"] / "diagnosis.json"
    against_json = check(runs["slower"], "--baseline", saved)
    assert against_json.returncode == 1, against_json.stdout + against_json.stderr
    assert "threshold alone" in against_json.stdout


def test_bad_input_is_one_line_and_exit_status_2(runs, tmp_path):
    unparsable = check(runs["before"], "--assert", "p99(request) < 200xs")
    assert unparsable.returncode == 2
    assert unparsable.stderr.strip() == (
        "probe: error: cannot parse --assert 'p99(request) < 200xs' at column 19: "
        "unknown unit 'xs' for p99 (units: 'ns', 'us', 'µs', 'ms', 's')"
    )

    other_schema = tmp_path / "other.json"
    other_schema.write_text(json.dumps({"schema": "someone.else/3"}))
    wrong = check(runs["before"], "--baseline", other_schema)
    assert wrong.returncode == 2 and "not a probe diagnosis" in wrong.stderr
    assert len(wrong.stderr.strip().splitlines()) == 1

    other_source = "import probe\nwith probe.span('other'):\n    pass\n"
    other = write_script(tmp_path, other_source, "other.py")
    other_run = subprocess.run(
        probe_cmd("run", "--out", tmp_path / "other", other), capture_output=True, timeout=120
    )
    assert other_run.returncode == 0
    unrelated = check(runs["before"], "--baseline", tmp_path / "other")
    assert unrelated.returncode == 2 and "another service" in unrelated.stderr

    nothing = check(runs["before"])
    assert nothing.returncode == 2 and "nothing to check" in nothing.stderr
