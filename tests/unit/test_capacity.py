"""The capacity model (analyzers.capacity) on demands given by hand, where the answer is
known in closed form."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from probe.analyzers.capacity import Demands, Station, capacity, mva_curve


def served(latency_s: float, rate: float, count: int = 2000, spread: float = 0.0) -> dict:
    """A run's request figures: ``count`` requests at ``rate`` a second, each taking
    ``latency_s`` in the server (``spread``: +- that share, evenly)."""
    jitter = np.linspace(-spread, spread, count) * latency_s
    return {"requests": count, "window_s": count / rate, "latencies_s": latency_s + jitter}


def test_one_interpreter_and_no_waits_saturate_from_the_first_client():
    # 10 ms of Python a request, nothing else: one client keeps the GIL busy already
    c = capacity(
        **served(0.010, 100.0),
        demands=Demands(0.010, 0.010, free_cores=2, processes=1, slots=None),
    )
    assert c.bound_by == "gil" and c.ceiling_per_s == pytest.approx(100.0)
    assert c.knee_in_flight == pytest.approx(1.0, rel=0.01)
    assert c.delay_s == pytest.approx(0.0, abs=1e-6)
    # every client added waits one more request's 10 ms
    four = c.curve.set_index("clients").loc[4]
    assert four["throughput_per_s"] == pytest.approx(100.0, rel=0.01)
    assert four["latency_ms"] == pytest.approx(40.0, rel=0.01)


def test_a_request_that_mostly_waits_downstream_climbs_at_the_knee_its_waits_set():
    # 10 ms of CPU and 90 ms downstream, measured with one request in flight
    c = capacity(
        **served(0.100, 10.0),
        demands=Demands(0.010, 0.010, free_cores=2, processes=1, slots=None),
    )
    assert c.delay_s == pytest.approx(0.090, rel=0.01)
    assert c.ceiling_per_s == pytest.approx(100.0)
    assert c.knee_in_flight == pytest.approx(10.0, rel=0.01)  # 100/s x 100 ms
    curve = c.curve.set_index("clients")
    assert curve.loc[1, "latency_ms"] == pytest.approx(100.0, rel=0.01)
    assert curve.loc[5, "throughput_per_s"] == pytest.approx(50.0, rel=0.1)  # below the knee
    assert curve.loc[30, "throughput_per_s"] == pytest.approx(100.0, rel=0.02)  # far past it


def test_mva_matches_the_textbook_recursion_for_a_queue_and_a_delay():
    # one queue of 0.2 s and a 1 s delay (Lazowska et al. 1984, ch. 6: X(1) = 1/1.2,
    # Q(1) = 0.2/1.2; R(2) = 1 + 0.2 (1 + 1/6))
    x, r = mva_curve(1.0, [Station("gil", 0.2, 1)], 2)
    assert x[0] == pytest.approx(1 / 1.2)
    assert r[1] == pytest.approx(1.0 + 0.2 * (1 + 1 / 6))


def test_a_server_taking_two_requests_at_once_is_bound_by_its_slots_not_its_cpu():
    # gunicorn -w 2 sync workers, a route sleeping 40 ms on 1 ms of CPU
    c = capacity(
        **served(0.041, 45.0),
        demands=Demands(0.001, 0.001, free_cores=2, processes=2, slots=2),
    )
    assert c.bound_by == "server slots"
    assert c.ceiling_per_s == pytest.approx(2 / 0.041)
    curve = c.curve.set_index("clients")
    # past two clients the rest wait at the door: the throughput stays, latency grows
    assert curve.loc[8, "throughput_per_s"] == pytest.approx(c.ceiling_per_s)
    assert curve.loc[8, "latency_ms"] == pytest.approx(8e3 / c.ceiling_per_s)
    assert curve.loc[1, "throughput_per_s"] == pytest.approx(1 / 0.041, rel=0.01)


def test_a_server_full_at_its_door_holds_a_slot_as_long_as_the_utilization_law_says():
    # the same two workers at 4 clients: 10.9 ms in the span, 25 ms a client's cycle,
    # 160 requests/s: every worker busy, 2 / 160 = 12.5 ms a request (its time outside
    # the span included)
    c = capacity(
        **served(0.0109, 160.0, count=800),
        demands=Demands(0.001, 0.001, free_cores=2, processes=2, slots=2),
        client_latencies_s=np.full(800, 0.025),
    )
    assert c.ceiling_per_s == pytest.approx(160.0, rel=0.01)
    assert c.beyond_server_ms == pytest.approx(25.0 - 10.9, rel=0.01)
    curve = c.curve.set_index("clients")
    assert curve.loc[4, "throughput_per_s"] == pytest.approx(160.0, rel=0.01)  # measured
    # a lone client meets no door: a worker's 12.5 ms and what is left of the wire
    assert 12.5 <= curve.loc[1, "latency_ms"] < 14.0


def test_a_full_server_s_measured_point_adds_no_delay_it_cannot_tell():
    # on the ceiling's asymptote the cycle is N / X whatever delay the full slots hide:
    # a lone client's prediction must not take one (a bisection on rounding took up to
    # 5 ms at some of these rates, and predicted a lone client 30% short)
    for rate in np.arange(150.0, 176.0, 0.5):
        c = capacity(
            **served(0.0109, rate, count=800),
            demands=Demands(0.0015, 0.0013, free_cores=1.6, processes=2, slots=2),
            client_latencies_s=np.full(800, 4 / rate),  # 4 clients, always in a request
        )
        assert c.delay_s == 0.0, rate
        lone = c.curve.set_index("clients").loc[1, "throughput_per_s"]
        assert lone == pytest.approx(rate / 2), rate  # one worker's 2 / X a request


def test_a_server_with_a_free_slot_holds_each_for_the_span():
    c = capacity(
        **served(0.0109, 80.0, count=400),
        demands=Demands(0.001, 0.001, free_cores=2, processes=2, slots=2),
        client_latencies_s=np.full(400, 0.0124),  # one client: 80/s x 12.4 ms
    )
    assert c.ceiling_per_s == pytest.approx(2 / 0.0109, rel=0.01)


def test_more_workers_than_cores_are_held_to_the_cores():
    # four processes of pure Python on two free cores: the cores, not four GILs
    c = capacity(
        **served(0.010, 150.0),
        demands=Demands(0.010, 0.010, free_cores=2, processes=4, slots=None),
    )
    assert c.bound_by == "cpu" and c.ceiling_per_s == pytest.approx(200.0)
    assert c.curve["throughput_per_s"].max() <= 200.0 + 1e-9


def test_the_sla_is_met_up_to_the_load_whose_scaled_p99_reaches_it():
    # 10 ms of Python a request, measured at 2 in flight (mean 20 ms, p99 ~30 ms)
    c = capacity(
        **served(0.020, 100.0, spread=0.5),
        demands=Demands(0.010, 0.010, free_cores=2, processes=1, slots=None),
        sla_s=0.050,
    )
    ratio = c.p99_ms / c.latency_ms  # the distribution's shape, kept at every load
    # at N clients the mean is N x 10 ms, the p99 that times the ratio
    expected = int(50.0 / (10.0 * ratio) + 1e-9)
    assert c.clients_at_sla == expected
    assert c.rate_at_sla == pytest.approx(100.0, rel=0.01)
    assert c.within_sla == 1.0 and c.goodput_per_s == pytest.approx(100.0)
    assert c.goodput_from == "server spans"


def test_an_sla_far_past_the_knee_is_still_placed_on_the_curve():
    # the same service, an SLA of 400 ms: 40 clients' mean latency, well past the
    # curve's default reach (three times the knee of 1 client)
    c = capacity(
        **served(0.020, 100.0, spread=0.5),
        demands=Demands(0.010, 0.010, free_cores=2, processes=1, slots=None),
        sla_s=0.400,
    )
    ratio = c.p99_ms / c.latency_ms
    assert c.clients_at_sla == int(400.0 / (10.0 * ratio) + 1e-9)
    assert c.curve["clients"].max() > c.clients_at_sla  # the curve crosses it


def test_goodput_counts_what_the_clients_saw_when_the_driver_recorded_it():
    clients = np.array([0.010] * 90 + [0.300] * 10)  # a tenth past the SLA, client-side
    c = capacity(
        **served(0.010, 50.0, count=100),
        demands=Demands(0.002, 0.002, free_cores=2, processes=1, slots=None),
        client_latencies_s=clients,
        sla_s=0.1,
    )
    assert c.within_sla == pytest.approx(0.9)
    assert c.goodput_per_s == pytest.approx(45.0)
    assert c.goodput_from == "clients"


def test_an_sla_no_load_can_meet_is_said():
    c = capacity(
        **served(0.050, 20.0),
        demands=Demands(0.050, 0.050, free_cores=2, processes=1, slots=None),
        sla_s=0.010,
    )
    assert c.clients_at_sla is None and c.rate_at_sla is None
    assert any("no load keeps p99 within 10 ms" in n for n in c.notes), c.notes


def test_each_endpoint_gets_the_ceiling_of_a_mix_of_it_alone():
    # 2 ms of handler CPU on one route, none on the other, 1 ms of framework a request
    table = pd.DataFrame(
        {"requests": [500, 500], "cpu_ms_per_request": [2.0, 0.0]},
        index=["POST /predict", "GET /items/{item_id}"],
    )
    c = capacity(
        **served(0.005, 200.0, count=1000),
        demands=Demands(0.002, 0.002, free_cores=2, processes=1, slots=None),
        endpoints=table,
    )
    per = c.endpoints
    assert per.loc["POST /predict", "cpu_ms_per_request"] == pytest.approx(3.0)
    assert per.loc["POST /predict", "ceiling_per_s"] == pytest.approx(1000 / 3.0)
    assert per.loc["GET /items/{item_id}", "ceiling_per_s"] == pytest.approx(1000.0)
    assert c.to_dict()["endpoints"][0]["bound_by"] == "gil"


def test_a_throughput_past_the_modelled_ceiling_says_the_demands_are_short():
    c = capacity(
        **served(0.010, 300.0),
        demands=Demands(0.010, 0.010, free_cores=2, processes=1, slots=None),
    )
    assert any("pass the modelled ceiling" in n for n in c.notes), c.notes


def test_no_requests_no_capacity():
    assert (
        capacity(
            requests=0,
            window_s=0.0,
            latencies_s=np.array([]),
            demands=Demands(0.0, 0.0, free_cores=2, processes=1, slots=None),
        )
        is None
    )
