"""probe load --sweep's steps and its prediction beside each (probe.load.sweep), on a
driver given by hand."""

from __future__ import annotations

import click
import pytest

from probe.cli.options import Latency
from probe.errors import ProbeError
from probe.load.driver import LoadSettings
from probe.load.figures import LabelFigures, LoadFigures
from probe.load.sweep import Step, parse_steps, predicted_at, sweep
from probe.reports.load import SweepText


def test_steps_are_clients_or_rates_never_both():
    assert parse_steps("1, 4,16") == [Step(concurrency=1), Step(concurrency=4), Step(16)]
    assert parse_steps("50/s,100/s") == [Step(rate=50.0), Step(rate=100.0)]
    for bad, said in [
        ("1,50/s", "not both"),
        ("0", "neither"),
        ("fast", "neither"),
        ("nan/s", "neither"),
        (",", "no step"),
    ]:
        with pytest.raises(ProbeError, match=said):
            parse_steps(bad)


CAPACITY = {
    "ceiling_per_s": 100.0,
    "bound_by": "gil",
    "curve": [
        {"clients": 1, "throughput_per_s": 50.0, "latency_ms": 20.0},
        {"clients": 2, "throughput_per_s": 80.0, "latency_ms": 25.0},
        {"clients": 3, "throughput_per_s": 100.0, "latency_ms": 30.0},
    ],
}


def test_a_step_past_the_curve_gets_its_last_throughput_and_the_latency_it_implies():
    assert predicted_at(CAPACITY, 2) == (80.0, 25.0)
    assert predicted_at(CAPACITY, 10) == (100.0, 100.0)  # 10 clients at 100/s: 100 ms
    assert predicted_at({}, 2) is None


def figures_of(settings: LoadSettings) -> LoadFigures:
    """A service that answers 30/s a client up to 90/s, in 1000/rate ms."""
    rate = min(90.0, 30.0 * (settings.concurrency or 1))
    total = LabelFigures(
        "all", 100, 100, 0, rate, {"p50": 1e3 / rate, "p99": 2e3 / rate, "mean": 1e3 / rate}
    )
    return LoadFigures("closed", settings.duration_s, 0, 0, [total], total)


def test_each_step_is_measured_with_its_clients_and_set_beside_its_prediction():
    told = []
    done = sweep(parse_steps("1,2,8"), LoadSettings(duration_s=1.0), figures_of, CAPACITY,
                 told.append)  # fmt: skip
    assert [s.step.concurrency for s in told] == [1, 2, 8]
    assert [s.figures.total.throughput_per_s for s in done] == [30.0, 60.0, 90.0]
    assert [s.predicted_per_s for s in done] == [50.0, 80.0, 100.0]
    text = SweepText(done, CAPACITY).render()
    assert "measured maximum: 90.0 requests/s at 8 clients" in text
    assert "predicted ceiling: 100.0 requests/s, bound by gil (+11.1% of the measured" in text


def test_an_sla_is_a_latency_with_its_unit():
    latency = Latency()
    assert latency.convert("200ms", None, None) == pytest.approx(0.2)
    assert latency.convert("0.5s", None, None) == pytest.approx(0.5)
    assert latency.convert("1500us", None, None) == pytest.approx(0.0015)
    for bad in ("200", "-5ms", "infms", "fast"):
        with pytest.raises(click.BadParameter):
            latency.convert(bad, None, None)
