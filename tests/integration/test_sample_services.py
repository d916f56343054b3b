"""The sample services: each runs under `probe run`, and each fix does what it claims.

Throughput and memory are compared between the default and ``--fixed`` variants run side
by side in the same test (ratios, never absolute times); the figures in each sample's
docstring come from their default, longer runs.
"""

from __future__ import annotations

import json
import os
import re
import statistics
import subprocess
import sys
from pathlib import Path

import pytest

from probe.analyzers.diff import held_error
from probe.rundir import load

from .conftest import REPO, probe_cmd
from .host import taken_quietly

pytestmark = pytest.mark.integration

SAMPLES = REPO / "sample_services"

# sample -> a small --requests that still exercises every stage (a few seconds at most)
SMALL = {
    "tagging_cpu_bound.py": 60,
    "image_io_bound.py": 40,
    "translation_model_bound.py": 24,
    "multimodal_pipeline.py": 30,
    "leaky_cache.py": 200,
    "healthy_service.py": 800,
    "batch_scorer.py": 2000,
}

# sample -> what its diagnosis must say, and the arguments of the default and fixed runs.
# The fixed runs serve several times faster: they get more requests, so that both
# measure a steady state rather than the ramp-up and the tail of a sub-second window.
# leaky_cache serves for a time: its leak verdict needs the run's memory readings (0.1 s
# apart), and a CI host ran its 1,200 requests too fast for them (sample's docstring).
EXPECTED = {
    "tagging_cpu_bound.py": ("cpu", "python", "postprocess", "vectorize_python", 300, 1500),
    "image_io_bound.py": ("io", "network", "download", "concurrent_io", 150, 600),
    "translation_model_bound.py": ("cpu", "native", "generate", "multi_instance", 160, 320),
    "multimodal_pipeline.py": ("io", "network", "fetch", "concurrent_io", 150, 600),
    "leaky_cache.py": ("cpu", "native", "score", "fix_leak", "3s", "3s"),
}


def serving(load: int | str) -> tuple[str, ...]:
    """A sample's arguments for EXPECTED's load: a count of requests, or "<N>s" seconds."""
    if isinstance(load, str):
        return ("--seconds", load.removesuffix("s"))
    return ("--requests", str(load))


# Default/fixed pairs per sample. This machine kind's speed drifts by +-15% over tens of
# seconds (measured 2026-11-22, nothing else running: the multimodal sample's fixed run,
# no probe, five times in a row: 156-198 requests/s, its deterministic model start
# 1.69-2.33 s; a 4-s pure-Python loop: 4.18-5.05 s of CPU). A prediction made from run A's
# CPU per request and realized in run B carries the drift between them: two pairs failed
# the 25% bound in two of the last five suite runs on the multimodal sample; four pairs
# take the spread of the means down by a factor of 1.4. Six: with four, two disturbed
# pairs set the median -- a CI run (2026-11-27) realized the tagging sample's fix at
# 6.97, 5.23, 10.2 and 9.93x (predicted 5.7x in each: the pairs moved with the host,
# the shares the default runs measured did not), median 8.45, where this sample's pairs
# have realized 6-7x in the runs before. The realized side is now each side's median run
# (see the test's docstring).
PAIRS = 6
# what each --fixed applies, when more than the top recommendation
APPLIED = {"multimodal_pipeline.py": "concurrent_io,lazy_init"}


def rate(sample: str, *args: str) -> tuple[float, str]:
    out = subprocess.run(
        [sys.executable, str(SAMPLES / sample), *args],
        capture_output=True,
        text=True,
        timeout=180,
        env=dict(os.environ, OPENBLAS_NUM_THREADS="1"),
    )
    assert out.returncode == 0, out.stderr
    match = re.search(r": ([0-9.]+) \w+/s", out.stderr)
    assert match, out.stderr
    return float(match.group(1)), out.stderr


def quiet_rate(sample: str, *args: str) -> tuple[float, float]:
    """A plain run's throughput, taken again while others held the host (tests/integration/
    host.py), and the share of the host's CPU it lost to them."""
    (throughput, _), share = taken_quietly(lambda: rate(sample, *args))
    return throughput, share.lost


def test_every_sample_is_documented_and_tested():
    samples = {p.name for p in SAMPLES.glob("*.py")} - {"slow_upstream.py"}
    assert samples == set(SMALL)
    for name in samples:
        doc = (SAMPLES / name).read_text().split('"""')[1]
        assert "Measured" in doc or name == "healthy_service.py", name


@pytest.mark.parametrize("sample", sorted(SMALL))
def test_sample_runs_under_probe_and_leaves_a_complete_run_dir(sample, run_probe):
    r = run_probe(SAMPLES / sample, "--requests", str(SMALL[sample]), timeout=180)
    assert r.returncode == 0, r.stderr
    run = load(r.run_dir)
    assert run.meta["exit"]["status"] == 0
    assert len(run.samples) > 0 and len(run.resources) > 0
    assert not list(Path(r.run_dir).glob("*.jsonl"))
    if sample not in ("healthy_service.py", "batch_scorer.py"):  # undecorated on purpose
        assert (run.spans["category"] == "request").sum() >= 1


@pytest.mark.parametrize("sample", sorted(EXPECTED))
def test_diagnosis_names_the_documented_bottleneck_and_predicts_its_fix(
    sample, run_probe, tmp_path
):
    """Default and fixed runs, alternated PAIRS times: each side once under `probe run` (the
    prediction, and `probe diff` over the pair) and once plainly. The realization is
    measured from outside probe, from the plain runs' own wall clocks: what the fix buys
    the service, not what it buys it under the profiler. Under probe the two sides do not
    pay alike: image_io_bound's 16-thread fix served 346 images/s plainly against 285
    under probe (median of five alternated runs each, 2026-12-02), its sequential side
    ~26/s either way; under probe a CI run realized 9.82x against 12.4x predicted, where
    plain pairs realize 13-14x.

    A plain run during which others held more than a twentieth of the host's CPU is taken
    again (tests/integration/host.py): a CI run's fixed image_io_bound runs served 155-313
    images/s on a host whose speed had halved for minutes (stop 81, 2026-12-07).

    The realized speedup is the median fixed run's throughput over the median default
    run's: each side's typical run, two disturbed ones of six either way moving neither.
    The medians of per-pair ratios let a pair with one side disturbed count whole: CI's
    tagging pairs realized 8.34, 6.24, 11.08, 9.46, 5.22 and 8.30 in one run
    (2026-11-27). Each side's best run (timeit's rule) lets one lucky run decide: a run
    with a busy core beside it had default runs at 87-92 images/s and fixed ones at
    624-650, and one at 911 (2026-11-28).

    The estimate is held to what its fix's model claims: within 25% of the realization,
    except where the model states a conservative figure with a range (vectorize_python:
    a loop's gain from numpy is not in its profile, benchmarks/vectorize_gain.py;
    concurrent_io where the CPU binds: a request's CPU in flight with others, against
    alone, goes both ways across hosts), where the realization must come within 25% of
    the figure from above and stay in the range (times the other fixes applied)."""
    kind, subkind, stage, top, load, fixed_load = EXPECTED[sample]
    applied = APPLIED.get(sample, top)
    predicted, default_rates, fixed_rates, ranges = [], [], [], []
    under_probe: list[float] = []  # the diff's realization, for the message
    lost: list[float] = []  # each plain run's share of the host others took
    for k in range(PAIRS):
        default_rate, default_lost = quiet_rate(sample, *serving(load))
        fixed_rate, fixed_lost = quiet_rate(sample, *serving(fixed_load), "--fixed")
        default_rates.append(default_rate)
        fixed_rates.append(fixed_rate)
        lost += [default_lost, fixed_lost]
        before = run_probe(SAMPLES / sample, *serving(load), out=tmp_path / f"a{k}", timeout=240)
        after = run_probe(
            "--no-report",
            SAMPLES / sample,
            *serving(fixed_load),
            "--fixed",
            out=tmp_path / f"b{k}",
            timeout=240,
        )
        assert before.returncode == 0 and after.returncode == 0, before.stderr + after.stderr
        diagnosis = json.loads((before.run_dir / "diagnosis.json").read_text())
        primary = diagnosis["primary"]
        assert (primary["kind"], primary["subkind"], primary["stage"]) == (kind, subkind, stage)
        first = diagnosis["recommendations"][0]
        assert first["id"] == top, diagnosis["leak"]["reason"]  # fix_leak's: the leak's
        assert top in before.stdout  # the verdict printed at the end of the run
        diff = subprocess.run(
            probe_cmd("diff", before.run_dir, after.run_dir, "--applied", applied, "--json"),
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert diff.returncode == 0, diff.stderr
        result = json.loads(diff.stdout)
        predicted.append(result["predicted_speedup"])
        # the range the top fix states, times what the other fixes applied add to it
        stated_range = first["evidence"].get("speedup_range")
        others = result["predicted_speedup"] / first["estimated_speedup"]
        ranges.append([end * others for end in stated_range] if stated_range else None)
        under_probe.append(round(result["throughput"]["speedup"], 2))
    p = statistics.median(predicted)
    r = statistics.median(fixed_rates) / statistics.median(default_rates)
    said = (
        f"{sample}: predicted {predicted}, realized {r:.2f} "
        f"(plain default runs {default_rates}, plain fixed runs {fixed_rates}, ranges "
        f"{ranges}; under probe, each pair realized {under_probe}; host lost {lost})"
    )
    stated = None  # a conservative figure's range: each end, its median over the runs
    if ranges[0] is not None:
        stated = [statistics.median(end) for end in zip(*ranges, strict=True)]
    assert held_error(p, r, stated) <= 0.25, said


def test_leaky_cache_fix_stops_the_memory_growth():
    def rss_at_end(*args: str) -> float:
        _, text = rate("leaky_cache.py", "--requests", "800", *args)
        found = re.search(r"RSS ([0-9.]+) MiB", text)
        assert found, text
        return float(found.group(1))

    # 800 results of ~8 KB held forever, against 128 kept by the LRU.
    assert rss_at_end() - rss_at_end("--fixed") > 3.0


def test_healthy_service_gets_no_dominant_bottleneck_no_large_fix_and_no_leak(run_probe):
    r = run_probe(SAMPLES / "healthy_service.py", timeout=180)
    assert r.returncode == 0, r.stderr
    diagnosis = json.loads((r.run_dir / "diagnosis.json").read_text())
    primary = diagnosis["primary"]
    # found from stack samples alone: one of the service's own functions, none dominant
    assert primary["stage"].split(" ")[0] in ("rank", "postprocess", "downstream_call")
    assert primary["share"] < 0.5 and "No dominant bottleneck" in primary["summary"]
    # no stage holds half the path, so no fix of one stage can double throughput
    # (Amdahl); the only fixable time is postprocess's, which builds its response in
    # Python (the sample's own measurement): rank is numpy, downstream_call a sleep
    for rec in diagnosis["recommendations"]:
        assert rec["ceiling"] < 2.0 and rec["estimated_speedup"] < 2.0, rec
        assert (rec["id"], rec["stage"].split(" ")[0]) == ("vectorize_python", "postprocess")
    assert diagnosis["leak"]["detected"] is False
    assert diagnosis["run"]["source"] == "samples"
