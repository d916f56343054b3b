"""Amdahl, the bottleneck law, MVA, and the leak detector: the laws hold on exact inputs."""

from __future__ import annotations

import math

import numpy as np
import pytest

from probe.analyzers.amdahl import (
    amdahl,
    amdahl_combined,
    ceiling,
    local_speedup_for,
    max_throughput,
    mva_throughput,
)
from probe.analyzers.leaks import judge_recorded


def test_amdahl_speedup_and_ceiling():
    assert amdahl(0.5, 2.0) == pytest.approx(4 / 3)
    assert amdahl(0.9, math.inf) == pytest.approx(10.0) == pytest.approx(ceiling(0.9))
    assert amdahl(0.0, 100.0) == 1.0
    assert local_speedup_for(0.5, 4 / 3) == pytest.approx(2.0)
    assert amdahl_combined([(0.5, 2.0), (0.25, math.inf)]) == pytest.approx(1 / 0.5)
    with pytest.raises(ValueError):
        amdahl(0.5, 0.0)


def test_bottleneck_law_picks_the_tightest_resource():
    bound, which = max_throughput({"cpu": (0.010, 2), "gil": (0.004, 1), "disk": (0.0, 1)})
    assert (bound, which) == (pytest.approx(200.0), "cpu")


def test_mva_from_one_request_in_flight_to_saturation():
    stations = {"gil": (0.002, 1)}
    assert mva_throughput(0.038, stations, 1) == pytest.approx(1 / 0.040)
    many = mva_throughput(0.038, stations, 200)
    assert many == pytest.approx(500.0, rel=0.01)  # 1 / D at the bottleneck
    assert mva_throughput(0.038, stations, 16) < min(16 / 0.040, 500.0)  # queueing


def rss(seconds, *, base=300e6, slope=0.0, noise=0.02, saw=0.0, seed=0):
    rng = np.random.default_rng(seed)
    t = np.arange(0, seconds, 1.0)
    y = base + slope * t + base * noise * rng.uniform(-1, 1, len(t))
    if saw:
        y += saw * (t % 60) / 60  # grows for a minute, then GC/cache clear gives it back
    return t, y


def test_a_steady_leak_is_found_with_its_rate():
    t, y = rss(600, slope=1e6)
    v = judge_recorded(t, y)
    assert v.detected and v.slope_low <= 1e6 <= v.slope_high
    assert v.slope_bytes_per_s == pytest.approx(1e6, rel=0.1)
    assert judge_recorded(t, y, limit_bytes=2e9).seconds_to_limit > 0


@pytest.mark.parametrize("kind", ["flat", "sawtooth", "step", "warm-up plateau"])
def test_no_leak_in_stationary_memory(kind):
    t, y = rss(3600, saw=50e6 if kind == "sawtooth" else 0.0, seed=3)
    if kind == "step":
        y = y + np.where(t > 1800, 40e6, 0.0)
    if kind == "warm-up plateau":
        y = y + 80e6 * (1 - np.exp(-t / 120))
    assert not judge_recorded(t, y).detected, kind


def test_too_short_a_series_is_not_judged():
    v = judge_recorded(np.arange(5.0), np.arange(5.0) * 1e6)
    assert not v.detected and "too few" in v.reason
