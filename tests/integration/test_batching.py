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
from dataclasses import dataclass
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


@dataclass
class Round:
    """One round of the test: its sweep's advice and predictions, and the walls of the
    sample's runs under probe that followed it."""

    advised: int
    at_size: dict[int, float]  # the prediction at every size the sweep timed
    befores: list[float]  # batch 1: the run swept against, then the alternated ones
    afters: list[float]  # at the test's size


def swept_round(out: Path, size: int | None = None) -> Round:
    """The sample at batch 1 under probe, the sweep against it, then the sample at
    ``size`` (the advised size in the first round: ``None``) and at batch 1 under probe in
    alternation, three runs a side."""
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
    at_size = {b: rate * predicted / curve[advised] for b, rate in curve.items()}
    # the stage batches well (a call's fixed cost is most of a lone request's): it pays
    assert advised > 1 and predicted > 1.25
    # serve's loop around the call is paid once a batch; the floor, once a request, said
    assert document["against"]["glue_from"] == ["serve (batch_scorer.py)"]
    assert 1.0 < document["predicted"]["floor_speedup"] < predicted
    assert "serve (batch_scorer.py)` around the call" in swept.stdout
    # what the passes predict each on its own; a wide range is said, with the reason
    low, high = document["predicted"]["across_passes"]
    assert 1.0 < low <= high
    assert ("the host's speed moved while the sweep ran" in swept.stdout) is (high >= 1.1 * low)
    # the share is from stacks read at the tick where nearly all were (batch.py's
    # stacks_at_tick: at most a tenth refused, torn by the thread running on while read,
    # and read with the GIL instead), and the notes warn of the GIL's lean where they were
    # not. Torn reads rise on a slow spell of the host: 21 of 211 in a clean-clone CI run
    # (2026-12-06) against 2-6% in eight runs here the same hour, so which applies is read
    # from the run; that the tick's reads check out on a loop is test_threads_corpus's
    read = json.loads((before / "meta.json").read_text())["collector"]["stacks_at_tick"]
    # most at the tick where the module is built, the slow spell's 11% included
    assert peek_module() is None or read["read"] > read["refused"], read
    at_tick = peek_module() is not None and read["refused"] * 10 <= read["read"]
    assert document["against"]["stacks_at_tick"] is at_tick, read
    assert any("lean toward" in n for n in document["notes"]) is not at_tick
    size = advised if size is None else size
    # alternated, so that a slow spell of the host lands on both sides alike
    afters: dict[Path, float] = {}
    for i in (1, 2, 3):
        afters[out / f"after-{i}"] = profiled_wall(out / f"after-{i}", size)
        if i < 3:
            befores[out / f"before-{i + 1}"] = profiled_wall(out / f"before-{i + 1}", 1)
    if size == advised:
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
    return Round(advised, at_size, list(befores.values()), list(afters.values()))


def plain_walls(size: int) -> dict[int, list[float]]:
    """Batch 1 and ``size`` without probe: three alternated pairs."""
    walls: dict[int, list[float]] = {1: [], size: []}
    for _ in range(3):
        for batch in (1, size):
            walls[batch].append(plain_wall(batch))
    return walls


def test_the_advised_batch_size_serves_what_the_sweep_predicted(tmp_path):
    # A run of this 2-5-s job moves by up to a third on this machine kind, in its CPU
    # time as much as its wall (steal nil): the same plain job at batch 128 read 1.97 to
    # 3.35 s within minutes, batch 1 3.91 to 5.22 s (2026-11-28, 15 and 13 runs). The
    # batch-1 job moves most: its one-row products stream 5 MB of weights a call from the
    # L3 the host shares, and `score` at batch 1 flips between ~75 and ~105 us a call
    # within seconds -- within one sweep's three passes (75, 95, 75 us), for a whole sweep
    # (104, 104, 104 us), for a round's three batch-1 runs whole (3.12-3.55 s against
    # 2.52 s in the next round) while the batch-128 runs beside them kept their 1.32 s
    # (a clean-clone CI run, 2026-12-02; batching.truth.md, "The host's two speeds").
    # The sweep takes each size's fastest pass, so its prediction is the quiet host's; a
    # round's own three runs a side need not include a quiet one, and holding each round
    # to its own realisation failed that CI run at 27%, 24% and 6% (1.71x predicted
    # against 2.36x, 2.25x at 256 against 1.81x), as others failed before it (1.70x
    # against 2.61x, 2026-11-27; 1.94x against 2.43x, 2026-11-28). So every round's
    # prediction, read at the first round's size from its own sweep's curve, is held to
    # the quiet host's realisation: each side's fastest of all the test's runs (9 at
    # batch 1, 9 at the size, alternated throughout), under probe and then plainly; of
    # the three rounds the median error must meet the bar. On that CI run's walls this
    # reads 10%, 11%, 6% (2.52 / 1.32 s = 1.91x realised).
    rounds = [swept_round(tmp_path / "round1")]
    size = rounds[0].advised
    plains = [plain_walls(size)]  # without probe, right after each round
    for k in (2, 3):
        rounds.append(swept_round(tmp_path / f"round{k}", size))
        plains.append(plain_walls(size))
    predictions = [r.at_size[size] for r in rounds]
    profiled = min(w for r in rounds for w in r.befores) / min(w for r in rounds for w in r.afters)
    errors = [abs(p - profiled) / profiled for p in predictions]
    assert statistics.median(errors) <= WITHIN, (size, predictions, profiled, rounds)
    # and without probe: what the job gains, measured with nothing of probe's in it
    plain = min(w for p in plains for w in p[1]) / min(w for p in plains for w in p[size])
    errors = [abs(p - plain) / plain for p in predictions]
    assert statistics.median(errors) <= WITHIN, (size, predictions, plain, plains)


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
