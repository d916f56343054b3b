"""The batching advisor on a real numpy model stage: ``probe batch-sweep`` times the
bundled ``batch_scorer``'s ``score`` at batch sizes 1-256 against a profiled run at batch
1, and the service is then run at the size it advises -- under probe (``probe diff
--sweep`` holds the prediction to it) and plainly, in alternated pairs, the truth measured
without probe. The sample's truth: ``tests/serving_corpus/batching.truth.md``."""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import pytest

from probe.samplers.peek import peek_module

from .conftest import REPO, probe_cmd

pytestmark = pytest.mark.integration

SAMPLES = REPO / "sample_services"
# the bar: predicted throughput at the advised size within 20% of the realized
WITHIN = 0.20
REQUESTS = "20000"
# One BLAS thread: on two cores, two BLAS threads share them with probe's sampler and
# with whatever else the test session runs, and the plain pair's spread doubles
# (batching.truth.md measures both settings)
ENV = {**os.environ, "OPENBLAS_NUM_THREADS": "1"}


def probe(
    *args: str | Path, cwd: Path = SAMPLES, timeout: float = 180
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        probe_cmd(*args), cwd=cwd, env=ENV, capture_output=True, text=True, timeout=timeout
    )


def plain_wall(batch: int) -> float:
    """The whole process's wall time, from outside it."""
    started = time.perf_counter()
    subprocess.run(
        [sys.executable, "batch_scorer.py", "--batch", str(batch), "--requests", REQUESTS],
        cwd=SAMPLES, env=ENV, check=True, capture_output=True, timeout=120,
    )  # fmt: skip
    return time.perf_counter() - started


def profiled_wall(run_dir: Path, batch: int) -> float:
    """One ``probe run`` of the sample at ``batch``; its job's wall time. At the asked
    rate throughout (``--sampler-share 0``): what is tested is the sweep's prediction from
    the samples, and serve's loop around the call is a few percent of them. A slow spell
    of the host in a clean-clone CI run (2026-12-02) made each tick cost 1.7 ms of CPU, so
    the sampler, held to 5% of a core, took 57 ticks in the 2.96-s run instead of ~200
    (43 ms apart): serve's own code then fell in none of them, and the sweep named no loop
    around the call (12 runs of 12 here found it, at 3-11% of the run)."""
    run = probe("run", "-o", run_dir, "--no-report", "--sampler-share", "0", "batch_scorer.py",
                "--requests", REQUESTS, "--batch", str(batch))  # fmt: skip
    assert run.returncode == 0, run.stderr
    return json.loads((run_dir / "meta.json").read_text())["duration_s"]


def swept_pair(out: Path) -> tuple[int, float, float, dict[int, float]]:
    """One round: the sample at batch 1 under probe, the sweep against it, then the
    sample at the advised size and at batch 1 under probe in alternation, three runs a
    side; (advised size, predicted, realized speedup -- each side's fastest run --, the
    sweep's predicted speedup at every size it timed)."""
    before = out / "before-1"
    befores = {before: profiled_wall(before, 1)}  # run directory -> its job's wall time
    sweep = out / "sweep"
    swept = probe(
        "batch-sweep", "batch_scorer:score", "--input", "batch_scorer:example_batch",
        "--sizes", "1-256", "--against", before, "-o", sweep,
    )  # fmt: skip
    assert swept.returncode == 0, swept.stderr
    assert "Advice: batch" in swept.stdout and "batch   256:" in swept.stderr  # progress
    document = json.loads((sweep / "batch_sweep.json").read_text())
    advised, predicted = document["advice"]["batch"], document["predicted"]["speedup"]
    # the prediction at every size: its throughput on the curve over the run's, which the
    # advised size's prediction gives (the run's figure divides them all alike)
    curve = {point["batch"]: point["throughput"] for point in document["advice"]["curve"]}
    at_size = {size: rate * predicted / curve[advised] for size, rate in curve.items()}
    # the stage batches well (a call's fixed cost is most of a lone request's): it pays
    assert advised > 1 and predicted > 1.25
    # serve's loop around the call is paid once a batch; the floor, once a request, said
    assert document["against"]["glue_from"] == ["serve (batch_scorer.py)"]
    assert 1.0 < document["predicted"]["floor_speedup"] < predicted
    assert "serve (batch_scorer.py)` around the call" in swept.stdout
    # the share is from stacks read at the tick, and the notes do not warn of the GIL's lean
    at_tick = peek_module() is not None
    assert document["against"]["stacks_at_tick"] is at_tick
    assert any("lean toward" in n for n in document["notes"]) is not at_tick
    # alternated, so that a slow spell of the host lands on both sides alike
    afters: dict[Path, float] = {}
    for i in (1, 2, 3):
        afters[out / f"after-{i}"] = profiled_wall(out / f"after-{i}", advised)
        if i < 3:
            befores[out / f"before-{i + 1}"] = profiled_wall(out / f"before-{i + 1}", 1)
    fastest_after = min(afters, key=afters.__getitem__)
    diff = probe("diff", before, fastest_after, "--sweep", sweep, "--json")
    assert diff.returncode == 0, diff.stderr
    compared = json.loads(diff.stdout)
    assert compared["basis"] == "job" and compared["matched_by"] == "sweep"
    # the diff reads the sweep's prediction and the two runs' walls (the swept run is
    # the one it accepts as RUN_A, whichever of the three was fastest)
    assert compared["predicted_speedup"] == pytest.approx(predicted, rel=1e-3)
    job = compared["job_wall_s"]
    assert job["a"] == pytest.approx(befores[before], rel=1e-3)
    assert job["b"] == pytest.approx(afters[fastest_after], rel=1e-3)
    # the same job: predicted throughput (requests over the predicted wall) vs realized
    return advised, predicted, min(befores.values()) / min(afters.values()), at_size


def plain_ratio(size: int) -> tuple[float, dict[int, list[float]]]:
    """Batch 1 over ``size``, without probe: three alternated pairs, each side's best."""
    walls: dict[int, list[float]] = {1: [], size: []}
    for _ in range(3):
        for batch in (1, size):
            walls[batch].append(plain_wall(batch))
    return min(walls[1]) / min(walls[size]), walls


def test_the_advised_batch_size_serves_what_the_sweep_predicted(tmp_path):
    # A run of this 2-5-s job moves by up to a third on this machine kind, in its CPU
    # time as much as its wall (steal nil): the same plain job at batch 128 read 1.97 to
    # 3.35 s within minutes, batch 1 3.91 to 5.22 s (2026-11-28, 15 and 13 runs; one
    # pair's ratio 1.58-2.65x), and the host's memory speed drifts, which the batch-1 job
    # (memory-bound: a one-row product reads 5 MB of weights) feels most -- 4.80 and
    # 5.48 s back to back in a clean-clone CI run (2026-11-25), at up to twice
    # batching.truth.md's 2.45-2.77 s. Slowdowns only add time, so each side is its
    # fastest of three runs; a prediction is made from its round's host, so it is held
    # to its round's realisation, under probe and then plainly; and of three rounds the
    # median one must meet the bar. Drawing from those 28 plain walls with a prediction
    # 6% under their fastest-run ratio (as this host's sweeps read), the earlier scheme
    # -- the fastest of two a side, the mean of two rounds -- misses the bar in 2.7% of
    # draws, this one in 0.8%; a clean-clone CI run (2026-11-27) failed it at 1.70x
    # predicted against 2.61x and 2.02x realized. Another (2026-11-28) failed at the
    # median round's 1.94x predicted against 2.43x, another round realising 1.75x at the
    # same size: the three runs a side were taken back to back, the sweep between them,
    # so a slow spell fell on one side whole. The two sides now alternate after the
    # sweep; three passing runs here read errors of 3-11% (2026-11-29). A clean-clone CI
    # run (2026-12-02) then failed at 17%, 27%, 25%, all low: the loop around the call
    # (np.stack of one row) had been counted once a request; counted once a call, a run
    # here read 6%, 4%, 1% (batching.truth.md, "The loop around the call")
    rounds, plains = [], []
    for k in (1, 2, 3):
        rounds.append(swept_pair(tmp_path / f"round{k}"))
        # without probe, right after the round, at the first round's size
        plains.append(plain_ratio(rounds[0][0]))
    errors = [abs(p - r) / r for _, p, r, _ in rounds]
    assert statistics.median(errors) <= WITHIN, rounds
    # Two sizes within the sweep's noise of each other may trade places between rounds
    # (a clean-clone CI run advised 128 then 256, 2026-11-25; 128, 32 and 64 in three
    # rounds here): each round's prediction is then read at the first round's size from
    # its sweep's curve, as the first round's own is -- comparing the first round alone
    # failed there (3.86x predicted at 128 against 5.01x plainly, while the second
    # round's curve read 4.90x at 128)
    size = rounds[0][0]
    errors = [
        abs(curve[size] - ratio) / ratio
        for (_, _, _, curve), (ratio, _) in zip(rounds, plains, strict=True)
    ]
    assert statistics.median(errors) <= WITHIN, (rounds, plains)


def test_spans_that_carry_a_batch_size_get_the_advice_in_the_diagnosis(tmp_path, run_probe):
    script = tmp_path / "batched.py"
    script.write_text(
        "import time\nimport probe\n"
        "for i in range(120):\n"
        "    size = (1, 4, 16)[i % 3]\n"
        "    with probe.stage('model', batch=size):\n"
        "        time.sleep(0.002 + 0.0002 * size)\n"
    )
    result = run_probe(script)
    assert result.returncode == 0, result.stderr
    batching = json.loads((result.run_dir / "diagnosis.json").read_text())["batching"]
    assert batching["stage"] == "model" and batching["basis"] == "stage"
    assert [p["batch"] for p in batching["curve"]] == [1, 4, 16]
    # 16 / 5.2 ms is the most a second: the advice is the largest size, and says so
    assert batching["batch"] == 16
    assert "Batching `model`" in result.stdout


BROKEN = """
import numpy as np

def model(batch):
    if len(batch) >= 8:
        raise MemoryError
    return batch * 2

def failing(batch):
    raise ValueError("shape mismatch")

examples = np.ones((3, 4))
not_a_function = 3
"""


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["nosuch:model", "--input", "broken:examples"], "no module named 'nosuch'"),
        (["broken:missing", "--input", "broken:examples"], "broken has no 'missing'"),
        (["broken:not_a_function", "--input", "broken:examples"], "is not a function"),
        (["broken:model", "--input", "nothing.npy"], "no such input file: nothing.npy"),
        (["broken:failing", "--input", "broken:examples"], "raised ValueError at batch 1"),
        (["broken:model", "--input", "broken:examples", "--sizes", "4-1"], "runs backwards"),
        (
            ["broken:model", "--input", "broken:examples", "--against", "nowhere"],
            "nowhere",
        ),
    ],
)
def test_bad_input_to_batch_sweep_is_one_line_and_no_traceback(tmp_path, args, message):
    (tmp_path / "broken.py").write_text(BROKEN)
    result = probe("batch-sweep", *args, "--time", "0.01", cwd=tmp_path, timeout=60)
    assert result.returncode == 2, result.stdout
    assert message in result.stderr and "Traceback" not in result.stderr
    assert not list(tmp_path.glob("probe-sweep-*"))


def test_a_size_that_runs_out_of_memory_ends_the_sweep_with_a_note(tmp_path):
    (tmp_path / "broken.py").write_text(BROKEN)
    result = probe(
        "batch-sweep", "broken:model", "--input", "broken:examples", "--time", "0.01",
        "-o", tmp_path / "sweep", cwd=tmp_path, timeout=60,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "batch 8 ran out of memory: the sweep ends at the sizes before it" in result.stdout
    document = json.loads((tmp_path / "sweep" / "batch_sweep.json").read_text())
    assert sorted(document["calls_s"]) == ["1", "2", "4"]
    # not set against a run: probe diff cannot take a service's prediction from it
    diff = probe("diff", tmp_path, tmp_path, "--sweep", tmp_path / "sweep", cwd=tmp_path)
    assert diff.returncode == 2 and "was not set against a run" in diff.stderr
