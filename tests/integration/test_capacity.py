"""Capacity predicted from one profiled run, held to the throughput measured in
the same test (``probe load --sweep`` on the same service started plainly, no probe):
a CPU-bound route (FastAPI under uvicorn, the GIL its limit) and an I/O-bound one (Flask
under gunicorn with two sync workers, a 10-ms sleep a request: the workers' slots its
limit). The truth the bar rests on, measured with an outside load generator as well:
``tests/serving_corpus/capacity.truth.md``."""

from __future__ import annotations

import json
import math
import os
import signal
import statistics
import subprocess
import sys

import pytest

from tests.threads_corpus.drive import free_port, wait_for_port

from .conftest import REPO, probe_cmd

pytestmark = pytest.mark.integration

CORPUS = REPO / "tests" / "serving_corpus"
# the bar: the predicted ceiling within 15% of the measured one
WITHIN = 0.15


def write_spec(tmp_path, port: int, route: str, concurrency: int) -> str:
    method, path = route.split(" ", 1)
    body = "\njson = { n = 40000 }" if method == "POST" else ""
    spec = tmp_path / "spec.toml"
    spec.write_text(
        f'url = "http://127.0.0.1:{port}"\nconcurrency = {concurrency}\nduration = 5\n'
        f'warmup = 1\n[[request]]\nmethod = "{method}"\npath = "{path}"{body}\n'
    )
    mix = tmp_path / "mix.toml"
    mix.write_text(f'[[request]]\nmethod = "{method}"\npath = "{path}"{body}\n')
    return str(spec)


def serve_plainly(argv: list[str], port: int) -> subprocess.Popen[bytes]:
    server = subprocess.Popen(
        [sys.executable, "-m", *argv], cwd=CORPUS, stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL, start_new_session=True,
    )  # fmt: skip
    try:
        wait_for_port(port)
    except BaseException:
        stop(server)
        raise
    return server


def stop(server: subprocess.Popen[bytes]) -> None:
    """The server and its workers: gunicorn's outlive an arbiter killed alone."""
    try:
        os.killpg(server.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    server.wait()


def sweep(tmp_path, port: int, steps: str, run_dir) -> dict:
    result = subprocess.run(
        probe_cmd(
            "load", f"http://127.0.0.1:{port}", "--mix", str(tmp_path / "mix.toml"),
            "--sweep", steps, "-d", "4", "--warmup", "1", "--against", str(run_dir), "--json",
        ),
        capture_output=True, text=True, timeout=120, cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def measured_plateau(swept: dict, saturated_from: int) -> float:
    """The throughput the sweep levels off at: the median of its steps with at least
    ``saturated_from`` clients, each of which the service's truth file measured at its
    ceiling (capacity.truth.md). Not a step short of it: shop_api's plain throughput still
    climbs from 1 to 8 clients (2026-12-06, seven sweeps 1-32: 1-4 clients 5-10% under
    8-32), and a median over 2, 8 and 32 clients was the lower of the two saturated
    readings whenever the 2-client step came last, reading the ceiling low and the
    prediction high. Not their maximum either: the highest of three noisy measurements of
    one level reads above it (in nine sweeps of shop_api on 2026-11-26 the steps of one
    sweep were 4-34% apart, and over three alternated pairs the maxima's geometric mean
    read 5%, 16% and 9% above the medians')."""
    at_ceiling = [
        s["total"]["throughput_per_s"] for s in swept["steps"] if s["concurrency"] >= saturated_from
    ]
    assert at_ceiling, f"no step of {swept['steps']} has {saturated_from} clients or more"
    return statistics.median(at_ceiling)


def figures(pairs, saturated_from: int) -> list[dict]:
    """Each pair's figures the bars rest on, for a failure to say which pair strayed and
    through which of the model's terms (the pairs' own repr is cut short by pytest)."""
    return [
        {
            "measured_per_s": c["measured_per_s"],
            "latency_ms": c["latency_ms"],
            "beyond_server_ms": c["beyond_server_ms"],
            "delay_ms": c["delay_ms"],
            "ceiling_per_s": c["ceiling_per_s"],
            "plateau_per_s": measured_plateau(s, saturated_from),
            "steps": [(x["predicted_per_s"], x["total"]["throughput_per_s"]) for x in s["steps"]],
        }
        for c, s, _ in pairs
    ]


def geomean(values: list[float]) -> float:
    return math.exp(sum(math.log(v) for v in values) / len(values))


# A profiled run and a plain sweep, alternated: this machine class's speed moves by 10-15%
# between two 5-s measurements of the same thing (shop_api at 4 clients, plain: 247, 282,
# 289 requests/s in one sitting), so one pair would judge the host as much as the model.
PAIRS = 3


def predicted_and_measured(run_probe, tmp_path, argv, route, steps, **run_args):
    """PAIRS (the capacity a profiled run predicted, the sweep of the plain service)."""
    pairs = []
    for k in range(PAIRS):
        port = free_port()
        spec = write_spec(tmp_path, port, route, concurrency=4)
        served = [a.replace("{port}", str(port)) for a in argv]
        r = run_probe(
            "--load", spec, *run_args.get("flags", ()), "-m", *served,
            out=tmp_path / f"run{k}", cwd=CORPUS, timeout=180,
        )  # fmt: skip
        assert r.returncode == 0, r.stderr
        capacity = json.loads((r.run_dir / "diagnosis.json").read_text())["capacity"]
        server = serve_plainly(served, port)
        try:
            swept = sweep(tmp_path, port, steps, r.run_dir)
        finally:
            stop(server)
        pairs.append((capacity, swept, r))
    return pairs


def test_a_cpu_bound_route_s_predicted_ceiling_is_the_throughput_it_reaches(run_probe, tmp_path):
    pytest.importorskip("fastapi")
    pytest.importorskip("uvicorn")
    argv = ["uvicorn", "shop_api:app", "--port", "{port}", "--log-level", "critical"]
    pairs = predicted_and_measured(
        run_probe, tmp_path, argv, "POST /predict", "8,16,32", flags=("--sla", "100ms")
    )
    capacity, _, r = pairs[0]
    assert capacity["bound_by"] == "gil", capacity  # one interpreter, Python in the handler
    assert capacity["slots"] is None  # uvicorn takes whatever arrives
    assert "Capacity (bottleneck law and MVA" in r.stdout
    assert capacity["within_sla"] is not None and capacity["goodput_from"] == "clients"
    predicted = geomean([c["ceiling_per_s"] for c, _, _ in pairs])
    saturated = 8  # its plain throughput levels off by 8 clients (capacity.truth.md)
    measured = geomean([measured_plateau(s, saturated) for _, s, _ in pairs])
    assert predicted == pytest.approx(measured, rel=WITHIN), figures(pairs, saturated)
    # past the knee the clients add latency, not throughput
    assert all(c["knee_in_flight"] < 8 for c, _, _ in pairs)


def test_an_io_bound_route_under_two_sync_workers_is_held_to_the_workers_slots(run_probe, tmp_path):
    pytest.importorskip("gunicorn")
    pytest.importorskip("flask")
    argv = ["gunicorn", "-w", "2", "-b", "127.0.0.1:{port}", "shop_flask:app"]
    pairs = predicted_and_measured(run_probe, tmp_path, argv, "GET /items/7", "1,4,16")
    capacity, _, _ = pairs[0]
    assert capacity["slots"] == 2 and capacity["bound_by"] == "server slots", capacity
    predicted = geomean([c["ceiling_per_s"] for c, _, _ in pairs])
    saturated = 4  # 4 clients keep both slots busy (capacity.truth.md)
    measured = geomean([measured_plateau(s, saturated) for _, s, _ in pairs])
    assert predicted == pytest.approx(measured, rel=WITHIN), figures(pairs, saturated)
    # one client keeps one worker of two busy, for its span and its time on the wire
    one_predicted = geomean([s["steps"][0]["predicted_per_s"] for _, s, _ in pairs])
    one_measured = geomean([s["steps"][0]["total"]["throughput_per_s"] for _, s, _ in pairs])
    assert one_predicted == pytest.approx(one_measured, rel=WITHIN), figures(pairs, saturated)
