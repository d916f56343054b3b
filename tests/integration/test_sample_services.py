"""The sample services: each runs under `probe run`, and each fix does what it claims.

Throughput and memory are compared between the default and ``--fixed`` variants run side
by side in the same test (ratios, never absolute times); the figures in each sample's
docstring come from their default, longer runs.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from probe.rundir import load

from .conftest import REPO

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
}

# sample -> (requests for the comparison, the speed-up its fix must at least reach)
FIXES = {
    "tagging_cpu_bound.py": (120, 1.5),
    "image_io_bound.py": (80, 3.0),
    "translation_model_bound.py": (48, 2.0),
    "multimodal_pipeline.py": (60, 2.0),
}


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
    if sample != "healthy_service.py":  # left undecorated on purpose
        assert (run.spans["category"] == "request").sum() >= 1


@pytest.mark.parametrize("sample", sorted(FIXES))
def test_fixed_variant_serves_faster_than_the_default(sample):
    requests, speedup = FIXES[sample]
    default, _ = rate(sample, "--requests", str(requests))
    fixed, _ = rate(sample, "--requests", str(requests), "--fixed")
    assert fixed / default >= speedup, f"{sample}: {default:.1f} -> {fixed:.1f}/s"


def test_leaky_cache_fix_stops_the_memory_growth():
    def rss_at_end(*args: str) -> float:
        _, text = rate("leaky_cache.py", "--requests", "800", *args)
        found = re.search(r"RSS ([0-9.]+) MiB", text)
        assert found, text
        return float(found.group(1))

    # 800 results of ~8 KB held forever, against 128 kept by the LRU.
    assert rss_at_end() - rss_at_end("--fixed") > 3.0


def test_healthy_service_names_its_modest_dominant_stage_from_samples_alone(run_probe):
    from analyzers.summary import summarize

    r = run_probe(SAMPLES / "healthy_service.py", "--requests", "1500", timeout=180)
    assert r.returncode == 0, r.stderr
    summary = summarize(load(r.run_dir))
    assert summary.top_functions[0].function == "rank"
    states = {s.state: s.share for s in summary.states}
    assert states["sleep"] > 0.3 and states["on-cpu"] > 0.2
