"""On a deliberately ambiguous run the verdict says it is unsure, and why: two functions at
~45% and ~40% of a 2-second run (their shares timed by the script itself, around each call)."""

from __future__ import annotations

import json
import re

import pytest

from .conftest import write_script

pytestmark = pytest.mark.integration

AMBIGUOUS = """
import json, sys, time

# each function its own loop: without spans the stage is the deepest function of the
# script's own, so a shared helper would take all the time

def alpha():
    total = 0
    for i in range(90_000):
        total += i % 7
    return total

def beta():
    total = 0
    for i in range(80_000):
        total += i % 7
    return total

def gamma():
    total = 0
    for i in range(30_000):
        total += i % 7
    return total

timed = {"alpha": 0.0, "beta": 0.0, "gamma": 0.0}
start = time.perf_counter()
while time.perf_counter() - start < 2.0:
    for fn in (alpha, beta, gamma):
        t0 = time.perf_counter()
        fn()
        timed[fn.__name__] += time.perf_counter() - t0
total = sum(timed.values())
print(json.dumps({k: v / total for k, v in timed.items()}))
"""


def test_two_stages_at_45_and_40_percent_of_a_short_run_lower_the_confidence(tmp_path, run_probe):
    result = run_probe(write_script(tmp_path, AMBIGUOUS))
    assert result.returncode == 0, result.stderr
    truth = json.loads(result.stdout.strip().splitlines()[0])
    assert 0.40 <= truth["alpha"] <= 0.50 and 0.35 <= truth["beta"] <= 0.45, truth
    d = json.loads((result.run_dir / "diagnosis.json").read_text())
    primary = d["primary"]
    assert primary["stage"].split(" ")[0] in ("alpha", "beta"), primary
    assert primary["confidence"] < 0.5, primary
    # the runner-up's doubt, its wording from the two shares sampled
    assert re.search(
        r"`(alpha|beta)[^`]*` takes (nearly as much|\d+% as much) \(", primary["summary"]
    )
    assert "To settle it" in primary["summary"]
    assert "confidence" in result.stderr + result.stdout
