"""A process the GIL holds to one core across several stages, no one of them leading the
path (``rules.gil_bound_findings``): the verdict says so, and a served one is told to run
an instance per core, each with its own GIL (embed_api in tests/threads_corpus: 49%, 21%
and 18% in three stages, all waiting for the GIL; ``--workers 2`` 1.66-1.76x)."""

from __future__ import annotations

import json

import pytest

from probe.analyzers.diagnosis import diagnose
from probe.analyzers.rules import Finding, gil_bound_findings, interpreter_bound_findings
from probe.rundir import load
from tests.synthetic import RunBuilder
from tests.unit.test_diagnosis import add_cpu

SERVED = json.dumps({"served": True})


def gil_bound_app(tmp_path, *, served: bool = True, waiting_on: str = "gil"):
    """Four threads each handling 100-ms requests one after another, undecorated: 40 ms
    in ``embed``, 30 in ``word_ids``, 30 in ``tokenize``; in each, a thread runs 40% of
    its samples and waits the rest (for ``waiting_on``: the GIL, or the network).
    ``served``: each request a span probe's server hooks make (``{"served": true}``);
    else no spans, a job. The process at one core."""
    b = RunBuilder(duration_s=2.0)
    stacks = {name: b.stack("main", "handle", name) for name in ("embed", "word_ids", "tokenize")}
    plan = [("embed", 40), ("word_ids", 30), ("tokenize", 30)]
    for thread in range(1, 5):
        for n in range(20):
            start = n * 100.0
            if served:
                b.span("POST /predict", start, start + 100, thread=thread, category="request",
                       request=f"r{thread}-{n}", attrs=SERVED)  # fmt: skip
            t = start
            for name, ms in plan:
                for k in range(ms // 10):
                    waits = (k + thread) % 10 < 6
                    reason, cpu = (waiting_on, 0.0) if waits else ("", 10.0)
                    b.sample(thread, t + 10 * k + 5, stacks[name], cpu_ms=cpu, reason=reason)
                t += ms
    add_cpu(b, 2000, 1.0 if waiting_on == "gil" else 0.4 * 4)
    return diagnose(load(b.write(tmp_path / ("served" if served else "job"))))


def finding(stage: str, share: float, subkind: str = "gil", kind: str = "contention") -> Finding:
    return Finding(kind, subkind, stage, share, 0.9, "wait_gil", {})


def test_the_gil_s_findings_are_read_together_where_the_first_waits_for_it_more_than_it_runs():
    found = [
        finding("embed", 0.4),
        finding("word_ids", 0.3, kind="cpu"),
        finding("<imports>", 0.1),
        finding("fetch", 0.1, subkind="network", kind="io"),
    ]
    assert [f.stage for f in gil_bound_findings(found)] == ["embed", "word_ids"]
    assert gil_bound_findings([found[3], *found[:2]]) == []  # the first is no GIL's
    # the first runs more than it waits for the GIL: no queue at it to read across stages
    assert gil_bound_findings([found[1], found[0]]) == []
    # under half the path together: nothing read across stages
    assert gil_bound_findings([finding("embed", 0.3), finding("word_ids", 0.15)]) == []
    assert gil_bound_findings([]) == []


def test_a_served_app_the_gil_holds_back_in_every_stage_is_gil_bound_and_told_to_run_instances(
    tmp_path,
):
    d = gil_bound_app(tmp_path)
    assert d.primary["subkind"] == "gil" and d.primary["share"] < 0.5, d.primary
    assert d.primary["summary"].startswith(
        "GIL-bound: the stages whose threads the GIL holds back take 100% of sampled time "
        "together (`embed (app.py)` 40%, "
    ), d.primary["summary"]
    assert "No dominant bottleneck" not in d.primary["summary"]
    told_to_run_two_instances(
        d,
        "The service is held to one core by the GIL in embed (app.py) (the stages it holds "
        "back: embed (app.py) 40%, ",
    )


def told_to_run_two_instances(d, how: str) -> None:
    """The first recommendation is ``multi_instance``, its ``how`` begins with ``how``,
    and the verdict names it as the best fix."""
    top = d.recommendations[0]
    assert top.id == "multi_instance", [r.id for r in d.recommendations]
    # one core used of two free: two instances, each at 0.9 of one alone
    assert top.estimated_speedup == pytest.approx(1.8, rel=0.02)
    assert top.how.startswith(how), top.how
    assert "uvicorn --workers 2" in top.how
    assert "Best fix: run one instance per core, about 1.8×" in d.primary["summary"]


def test_a_job_the_gil_holds_back_across_stages_gets_no_instances_of_itself(tmp_path):
    # measured on served apps only: a job keeps multiprocess on its stages
    d = gil_bound_app(tmp_path, served=False)
    assert d.primary["subkind"] == "gil" and d.primary["share"] < 0.5, d.primary
    assert d.primary["summary"].startswith("GIL-bound: the stages whose threads"), d.primary
    assert "multi_instance" not in {r.id for r in d.recommendations}


def test_stages_under_half_the_path_waiting_on_the_network_are_no_dominant_bottleneck(
    tmp_path,
):
    d = gil_bound_app(tmp_path, waiting_on="network")
    assert (d.primary["kind"], d.primary["subkind"]) == ("io", "network"), d.primary
    assert d.primary["summary"].startswith("No dominant bottleneck: the largest stage, `embed")
    assert "multi_instance" not in {r.id for r in d.recommendations}


def interpreter_app(tmp_path, *, served: bool = True, last_stage: str = "cpu"):
    """One thread handling 100-ms requests one after another, undecorated, on a CPU all
    the time: 40 ms in ``embed``, 30 in ``word_ids``, 30 in ``tokenize`` -- or, where
    ``last_stage`` is ``sleep``, asleep in ``tokenize``. The process at one core of two."""
    b = RunBuilder(duration_s=2.0)
    stacks = {name: b.stack("main", "handle", name) for name in ("embed", "word_ids", "tokenize")}
    for n in range(20):
        start = n * 100.0
        if served:
            b.span("POST /predict", start, start + 100, thread=1, category="request",
                   request=f"r{n}", attrs=SERVED)  # fmt: skip
        t = start
        for name, ms in (("embed", 40), ("word_ids", 30), ("tokenize", 30)):
            asleep = name == "tokenize" and last_stage == "sleep"
            for k in range(ms // 10):
                cpu, reason = (0.0, "sleep") if asleep else (10.0, "")
                b.sample(1, t + 10 * k + 5, stacks[name], cpu_ms=cpu, reason=reason)
            t += ms
    add_cpu(b, 2000, 0.7 if last_stage == "sleep" else 1.0)
    return diagnose(load(b.write(tmp_path / ("served" if served else "job"))))


def test_findings_all_of_the_interpreter_s_own_work_are_read_together():
    found = [
        finding("score_tokens", 0.45, kind="cpu"),
        finding("<library>", 0.35, subkind="native", kind="cpu"),
        finding("<imports>", 0.1, subkind="native", kind="cpu"),
        finding("normalise", 0.06),
    ]
    held = interpreter_bound_findings(found)
    assert [f.stage for f in held] == ["score_tokens", "<library>", "normalise"]
    # a stage asleep (or on the network, a lock, a GPU) is a delay no instance shortens
    asleep = finding("item", 0.2, subkind="sleep", kind="io")
    assert interpreter_bound_findings([*found, asleep]) == []
    assert interpreter_bound_findings([found[2], *found[:2]]) == []  # the first: imports
    collector = Finding("cpu", "gc", "<collector>", 0.4, 0.9, "collector_pauses", {})
    assert interpreter_bound_findings([collector, *found[:2]]) == []  # its own verdict
    assert interpreter_bound_findings([finding("a", 0.3, kind="cpu"), finding("b", 0.1)]) == []
    assert interpreter_bound_findings([]) == []


def test_a_served_app_on_a_cpu_in_every_stage_none_leading_is_told_to_run_instances(tmp_path):
    d = interpreter_app(tmp_path)
    assert d.primary["kind"] == "cpu" and d.primary["share"] < 0.5, d.primary
    # read together, which stage leads is no doubt of the verdict's (it read "Confidence
    # 7%: `word_ids` takes 75% as much") and its weight is the share they hold together
    assert d.primary["confidence"] >= 0.8, d.primary
    assert "as much" not in d.primary["summary"], d.primary["summary"]
    assert d.primary["summary"].startswith(
        "CPU-bound in one interpreter: the stages on a CPU or waiting for the GIL take 100% "
        "of sampled time together (`embed (app.py)` 40%, "
    ), d.primary["summary"]
    told_to_run_two_instances(
        d,
        "The service is held to one core by its interpreter in embed (app.py) (every stage "
        "on a CPU or waiting for the GIL: embed (app.py) 40%, ",
    )


def test_a_served_app_with_a_stage_asleep_gets_no_instances_from_its_stages_together(tmp_path):
    d = interpreter_app(tmp_path, last_stage="sleep")
    assert ("io", "sleep") in {(f.kind, f.subkind) for f in d.findings}, d.findings
    assert d.primary["summary"].startswith("No dominant bottleneck"), d.primary["summary"]
    assert "multi_instance" not in {r.id for r in d.recommendations}


def test_a_job_on_a_cpu_in_every_stage_none_leading_has_no_dominant_bottleneck(tmp_path):
    d = interpreter_app(tmp_path, served=False)
    assert d.primary["summary"].startswith("No dominant bottleneck"), d.primary["summary"]
    assert "multi_instance" not in {r.id for r in d.recommendations}
