"""The batching advisor (analyzers.batching) on latency curves given by hand, where the
best batch size, its throughput and its queue delay are known in closed form."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from probe.analyzers.batching import (
    across_passes,
    advise,
    batch_curve,
    calls_unsampled_around,
    glue_share,
    linear_fit,
    span_calls,
    spans_advice,
    stage_share,
)


def calls(latency_ms: dict[int, float], n: int = 20, spread: float = 0.0) -> pd.DataFrame:
    """``n`` calls per batch size, latency ``latency_ms[b]`` (+- ``spread`` of it, evenly)."""
    rows = [
        (b, ms * (1 + spread * (2 * i / (n - 1) - 1)) / 1e3)
        for b, ms in latency_ms.items()
        for i in range(n)
    ]
    return pd.DataFrame(rows, columns=["batch", "latency_s"])


# a call costs 1 ms whatever its size and 0.1 ms a request
LINEAR = {b: 1.0 + 0.1 * b for b in (1, 2, 4, 8, 16, 32, 64)}


def test_a_fixed_cost_per_call_is_found_and_amortised_by_batching():
    curve = batch_curve(calls(LINEAR))
    fit = linear_fit(curve)
    assert fit.fixed_s == pytest.approx(1e-3, rel=1e-6)
    assert fit.per_item_s == pytest.approx(1e-4, rel=1e-6)
    assert fit.fixed_share == pytest.approx(1.0 / 1.1)
    a = advise(curve)
    # b / (1 + 0.1 b) ms: 64 -> 8.65/ms, the best; 32 -> 7.62/ms is 12% short of it
    assert a.batch == 64 and a.throughput == pytest.approx(64 / 7.4e-3)
    assert a.throughput_at_1 == pytest.approx(1 / 1.1e-3)
    assert any("largest size swept" in n for n in a.notes)
    # without an SLA the batch may wait one batch's service time for company
    assert a.max_queue_delay_s == pytest.approx(7.4e-3)
    assert a.p99_bound_s == pytest.approx(7.4e-3 + 2 * 7.4e-3)


def test_the_smallest_size_within_the_noise_of_the_best_is_chosen():
    # the stage saturates at 16: 32 and 64 buy under 5% more, for twice the latency
    curve = batch_curve(calls({1: 1.0, 2: 1.1, 4: 1.3, 8: 1.7, 16: 2.5, 32: 4.9, 64: 9.7}))
    a = advise(curve)
    assert a.batch == 16
    assert a.throughput == pytest.approx(16 / 2.5e-3)
    assert not any("largest size swept" in n for n in a.notes)


def test_an_sla_rules_out_the_sizes_whose_latency_bound_breaks_it():
    # bound 2 x L99(b): 64 -> 14.8 ms, 32 -> 8.4 ms, 16 -> 5.2 ms; an SLA of 10 ms leaves 32
    curve = batch_curve(calls(LINEAR))
    a = advise(curve, sla_s=0.010)
    assert a.batch == 32
    assert a.curve.loc[64, "fits_sla"] == False  # noqa: E712 - numpy bool
    # what the SLA leaves after the bound is the queue delay
    assert a.max_queue_delay_s == pytest.approx(0.010 - 2 * 4.2e-3)
    assert a.p99_bound_s == pytest.approx(0.010)


def test_an_sla_no_size_can_hold_is_said_and_the_smallest_size_offered():
    a = advise(batch_curve(calls(LINEAR)), sla_s=0.001)
    assert a.batch == 1
    assert any("no measured batch size keeps p99 within the SLA" in n for n in a.notes)


def test_an_arrival_rate_caps_the_queue_delay_at_the_time_a_batch_takes_to_fill():
    a = advise(batch_curve(calls(LINEAR)), rate=2000.0)
    # batch 64 fills in 63 / 2000 s = 31.5 ms, longer than its 7.4 ms service: 7.4 ms
    assert a.max_queue_delay_s == pytest.approx(7.4e-3)
    a = advise(batch_curve(calls(LINEAR)), rate=20_000.0)
    assert a.max_queue_delay_s == pytest.approx(63 / 20_000)
    # 20,000/s is more than batch 64 serves (8,650/s): said
    assert any("grows without bound" in n for n in a.notes)


def test_the_rest_of_a_request_turns_the_stage_speedup_into_amdahls():
    # the stage is 60% of the run's path at batch 1: the rest is 1.1 ms x 0.4 / 0.6
    curve = batch_curve(calls(LINEAR))
    a = advise(curve, run_share=0.6)
    rest = 1.1e-3 * 0.4 / 0.6
    assert a.rest_s == pytest.approx(rest)
    per_request = {b: rest + (1.0 + 0.1 * b) / 1e3 / b for b in LINEAR}
    best = min(per_request.values())
    chosen = min(b for b in LINEAR if 1 / per_request[b] >= 0.95 / best)
    assert a.batch == chosen
    # Amdahl on the stage: 1 / ((1 - p) + p x (L(b)/b) / L(1))
    ratio = (1.0 + 0.1 * chosen) / chosen / 1.1
    assert a.speedup_over_run == pytest.approx(1 / (0.4 + 0.6 * ratio))
    assert a.to_dict()["basis"] == "service"


def test_the_loop_around_the_call_is_paid_once_a_batch_and_its_floor_once_a_request():
    # the stage 60% of the run at batch 1, its caller's own code (stacking a batch) 10%
    curve = batch_curve(calls(LINEAR))
    a = advise(curve, run_share=0.6, run_glue=0.1)
    assert a.rest_s == pytest.approx(1.1e-3 * 0.3 / 0.6)
    assert a.glue_s == pytest.approx(1.1e-3 * 0.1 / 0.6)
    # a batch of b: b x r + c + L(b); at batch 1 the run's own cycle, L(1) / p
    cycle = {b: b * a.rest_s + a.glue_s + (1.0 + 0.1 * b) / 1e3 for b in LINEAR}
    assert cycle[1] == pytest.approx(1.1e-3 / 0.6)
    b = a.batch
    assert a.speedup_over_run == pytest.approx((b / cycle[b]) / (1 / cycle[1]))
    # the floor: the caller's share counted once a request, Amdahl as without it
    ratio = (1.0 + 0.1 * b) / b / 1.1
    assert a.floor_over_run == pytest.approx(1 / (0.4 + 0.6 * ratio))
    assert a.floor_over_run < a.speedup_over_run
    # no caller's share: the two are one
    plain = advise(curve, run_share=0.6)
    assert plain.glue_s == 0.0 and plain.floor_over_run == pytest.approx(plain.speedup_over_run)
    assert a.to_dict()["floor_over_run"] == pytest.approx(a.floor_over_run, abs=1e-3)


def test_the_callers_share_counts_their_samples_while_the_stage_ran_only():
    # serve ran 4 samples during score's calls (t 10-40) and 4 before them (its set-up);
    # one of the 4 in a comprehension over the batch's items (once a request)
    samples = pd.DataFrame(
        {"ts_ns": [1, 2, 3, 4, 10, 15, 20, 30, 35, 40], "user_function": ["serve"] * 4
         + ["score", "serve", "serve", "serve", "serve", "score"],
         "comprehension": [False] * 7 + [True, False, False]}
    )  # fmt: skip
    stages = pd.DataFrame({"path_share": [0.2, 0.5, 0.3]}, index=["score", "serve", "other"])
    share, named = glue_share(samples, stages, "score", frozenset({"serve", "other"}))
    assert named == ["serve"] and share == pytest.approx(0.5 * 3 / 8)
    # a stage never sampled, or callers outside the table, give nothing
    assert glue_share(samples, stages, "missing", frozenset({"serve"})) == (0.0, [])
    assert glue_share(samples, stages, "score", frozenset({"gone"})) == (0.0, [])


def test_a_loop_around_the_call_that_drew_no_sample_is_bounded_not_taken_as_absent():
    # 60 samples while score was called (t 10..69), none in serve's own code: serve's
    # share of that time is below 3/60 with 95% confidence (the rule of three)
    ts = list(range(10, 70))
    samples = pd.DataFrame(
        {"ts_ns": [1, 2, *ts, 99], "user_function": ["serve", "serve", *["score"] * 60, "serve"],
         "comprehension": [False] * 63}
    )  # fmt: skip
    stages = pd.DataFrame({"path_share": [0.9, 0.1]}, index=["score", "serve"])
    assert glue_share(samples, stages, "score", frozenset({"serve"})) == (0.0, [])
    assert calls_unsampled_around(samples, "score") == (60, pytest.approx(0.05))
    assert calls_unsampled_around(samples.head(3), "score") == (1, 1.0)  # one sample: no bound
    assert calls_unsampled_around(samples, "missing") == (0, 1.0)


def test_a_run_at_a_size_the_sweep_missed_falls_back_to_the_stage_and_says_so():
    a = advise(batch_curve(calls(LINEAR)), run_share=0.6, run_batch=3)
    assert a.rest_s == 0.0 and a.speedup_over_run is None
    assert any("did not measure" in n for n in a.notes)


def test_sizes_measured_too_few_times_and_broken_calls_are_not_judged():
    rows = calls({1: 1.0, 2: 1.2}, n=20)
    rows = pd.concat(
        [rows, pd.DataFrame({"batch": [4, 4, 8, 0], "latency_s": [1e-3, 1e-3, -1.0, 1e-3]})]
    )
    curve = batch_curve(rows)
    assert list(curve.index) == [1, 2]
    assert advise(batch_curve(rows.iloc[:0])) is None


def test_a_slow_spell_slows_one_pass_of_a_size_not_its_latency():
    # three passes of 20 calls a size; the host slowed to 3x for batch 2's second pass
    rows = []
    for k in range(3):
        for b, ms in {1: 1.0, 2: 1.2}.items():
            slow = 3.0 if (k, b) == (1, 2) else 1.0
            rows += [(b, ms * slow * (1 + 0.01 * i) / 1e3, k) for i in range(20)]
    curve = batch_curve(pd.DataFrame(rows, columns=["batch", "latency_s", "pass"]))
    # the best pass's median (each pass's median is 1.095x the pass's first call)
    assert curve["p50_s"].to_dict() == pytest.approx({1: 1.095e-3, 2: 1.314e-3}, rel=1e-3)
    assert curve["calls"].to_dict() == {1: 60, 2: 60}
    # pooled, the slow third moves the median to the fast calls' 75th percentile
    pooled = batch_curve(pd.DataFrame(rows, columns=["batch", "latency_s", "pass"]).iloc[:, :2])
    assert pooled.loc[2, "p50_s"] == pytest.approx(1.2e-3 * 1.145, rel=1e-3)


def passes_of(one_ms: list[float]) -> pd.DataFrame:
    """Three passes of 20 calls a size: batch 1 at ``one_ms[k]`` in pass k (a one-row call
    that streams its weights feels a busy host most), batch 64 at 4 ms in every pass."""
    rows = []
    for k, ms in enumerate(one_ms):
        for b, at in {1: ms, 64: 4.0}.items():
            rows += [(b, at * (1 + 0.001 * i) / 1e3, k) for i in range(20)]
    return pd.DataFrame(rows, columns=["batch", "latency_s", "pass"])


def test_passes_that_predict_gains_far_apart_are_said_with_their_range():
    # the run: the stage 60% of its path at batch 1, no loop around the call
    moved = passes_of([0.075, 0.095, 0.075])
    advice = advise(batch_curve(moved), run_share=0.6)
    assert advice is not None and advice.batch == 64
    spread = across_passes(moved, advice, 0.6, 0.0)
    # Amdahl per pass: 1 / (0.4 + 0.6 x (4/64) / L1), L1 = 0.075 or 0.095 ms
    assert spread is not None
    assert spread.low == pytest.approx(1 / (0.4 + 0.6 * 0.0625 / 0.075), rel=0.01)
    assert spread.high == pytest.approx(1 / (0.4 + 0.6 * 0.0625 / 0.095), rel=0.01)
    assert advice.speedup_over_run == pytest.approx(spread.low, rel=0.01)  # the fastest pass
    note = spread.note()
    assert note is not None and "the host's speed moved while the sweep ran" in note
    assert "batch 1 took 76-96 us a call" in note and "quiet host's" in note


def test_passes_that_agree_say_nothing_and_a_sweep_without_passes_has_no_range():
    calm = passes_of([0.075, 0.076, 0.075])
    advice = advise(batch_curve(calm), run_share=0.6)
    assert advice is not None
    spread = across_passes(calm, advice, 0.6, 0.0)
    assert spread is not None and spread.note() is None
    assert across_passes(calm.drop(columns="pass"), advice, 0.6, 0.0) is None
    alone = advise(batch_curve(calm))  # no run: nothing to predict for it
    assert alone is not None and across_passes(calm, alone, 0.6, 0.0) is None


def test_spans_with_a_batch_attribute_give_the_stage_its_curve():
    spans = pd.DataFrame(
        {
            "name": ["model"] * 8 + ["other"] * 2,
            "attrs": [json.dumps({"batch": b}) for b in (1, 1, 1, 8, 8, 8, 8, 8)]
            + ['{"batch": true}', "not json"],
            "start_ns": [0] * 10,
            "end_ns": [1_000_000] * 3 + [2_000_000] * 5 + [5] * 2,
        }
    )
    got = span_calls(spans)
    assert list(got["stage"].unique()) == ["model"] and len(got) == 8
    a = spans_advice(spans)
    assert a.stage == "model" and a.batch == 8
    assert a.throughput == pytest.approx(8 / 2e-3)
    assert a.to_dict()["stage"] == "model"
    # one batch size only: nothing to fit
    assert spans_advice(spans.iloc[:3]) is None


def test_the_stage_is_found_by_its_name_or_its_function_name():
    stages = pd.DataFrame(
        {"path_share": [0.6, 0.3, 0.1]},
        index=["score (app.py)", "parse (app.py)", "score_all (app.py)"],
    )
    assert stage_share(stages, "score") == ("score (app.py)", 0.6)
    assert stage_share(stages, "parse (app.py)") == ("parse (app.py)", 0.3)
    with pytest.raises(LookupError, match="no stage is named 'model'.*score \\(app.py\\)"):
        stage_share(stages, "model")


def test_every_setting_of_the_advisor_carries_its_source():
    from probe.analyzers.batching import BATCHING
    from probe.analyzers.constants import sources

    assert all(len(text) > 40 for text in sources(BATCHING).values()), sources(BATCHING)


def test_the_sweeps_text_says_an_unsampled_loop_around_the_call_is_unmeasured():
    from probe.reports.batching import sweep_text

    advice = advise(batch_curve(calls(LINEAR)), run_share=0.6)
    assert advice is not None
    against = {
        "run": "runs/before", "stage": "score (job.py)", "share": 0.6, "glue_share": 0.0,
        "glue_from": [], "run_batch": 1, "basis": "job", "throughput_per_s": None,
        "wall_s": 3.0,
        "glue_unsampled": {"callers": ["serve (job.py)"], "samples": 57, "share_up_to": 0.0526},
    }  # fmt: skip
    predicted = {"speedup": advice.speedup_over_run, "floor_speedup": advice.floor_over_run,
                 "throughput_per_s": None, "wall_s": 3.0 / advice.speedup_over_run}  # fmt: skip
    document = {"target": "job:score", "advice": advice.to_dict(), "against": against,
                "predicted": predicted, "notes": []}  # fmt: skip
    text = sweep_text(document)
    assert "`serve (job.py)` around the call: unmeasured" in text
    assert "none of the 57 samples" in text and "up to 5% of that time" in text
    assert "counts it once a request, a floor" in text
    # measured (or absent: no callers), nothing is said of it
    measured = {**against, "glue_unsampled": None}
    assert "unmeasured" not in sweep_text({**document, "against": measured})
    older = {k: v for k, v in against.items() if k != "glue_unsampled"}  # an older sweep
    assert "unmeasured" not in sweep_text({**document, "against": older})
