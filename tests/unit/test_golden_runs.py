"""Golden run directories: recorded sample runs and the verdict each must keep giving.

Recorded with ``tests/data/record.py``; each ``expected.json`` was checked against its
sample's documented bottleneck when recorded.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from probe.analyzers.diagnosis import diagnose
from probe.rundir import load

DATA = Path(__file__).resolve().parents[1] / "data"
SCENARIOS = sorted(p.parent.name for p in DATA.glob("*/expected.json"))


def test_every_recorded_scenario_is_present():
    assert len(SCENARIOS) >= 6


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_recorded_run_gives_its_verdict(scenario):
    want = json.loads((DATA / scenario / "expected.json").read_text())
    d = diagnose(load(DATA / scenario))
    got = {
        "kind": d.primary["kind"],
        "subkind": d.primary["subkind"],
        "stage": d.primary["stage"],
        "recommendations": [r.id for r in d.recommendations],
        "leak": d.leak.detected,
    }
    assert got == want


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_recorded_run_diagnoses_the_same_twice(scenario):
    first = diagnose(load(DATA / scenario)).to_dict()
    assert diagnose(load(DATA / scenario)).to_dict() == first
