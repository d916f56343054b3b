"""Confidence that means something (``rules.with_doubts``): lowered, with its reasons,
when the runner-up is close, the lead is within the sampling error, or the process's own
CPU time contradicts a CPU verdict."""

from __future__ import annotations

import pandas as pd
import pytest

from probe.analyzers.breakdown import Breakdown, _complete, _empty_requests
from probe.analyzers.rules import Finding, RunFacts, classify, with_doubts
from probe.analyzers.vocabulary import confidence_words
from probe.reports.page import confidence_cell
from probe.reports.terminal import limit_text


def finding(stage: str, share: float, sampled_s: float, kind: str = "cpu", **components) -> Finding:
    return Finding(
        kind=kind,
        subkind="python",
        stage=stage,
        share=share,
        confidence=0.9,
        rule="cpu_python",
        evidence={"sampled_s": sampled_s, **components},
    )


def test_a_close_runner_up_on_a_short_run_lowers_confidence_and_says_why():
    top = with_doubts(
        finding("alpha", 0.45, 0.9, python=1.0), [finding("beta", 0.40, 0.8, python=1.0)],
        RunFacts(cpu_count=2, process_cores=1.0),
    )  # fmt: skip
    assert top.confidence < 0.2
    doubts = top.evidence["doubts"]
    assert any("`beta` takes nearly as much (40% against 45%)" in d for d in doubts)
    assert any("within the sampling error of 170 samples" in d for d in doubts)


def test_a_runner_up_at_half_the_leader_s_share_is_not_said_to_take_nearly_as_much():
    # 33% against 60% over ample samples: the lead is under clear_lead (the runner-up
    # holds over half the leader's time), so the doubt stands, in words that fit it
    top = with_doubts(
        finding("alpha", 0.60, 30.0, python=1.0), [finding("beta", 0.33, 16.0, python=1.0)],
        RunFacts(cpu_count=2, process_cores=1.0),
    )  # fmt: skip
    [doubt] = top.evidence["doubts"]
    assert doubt == "`beta` takes 55% as much (33% against 60%)"
    # 4,600 samples: the lead's 99% lower bound 0.237 of the leader's 0.60 is 0.395 < 0.5
    assert top.evidence["runner_up"] == "beta"
    assert top.confidence == pytest.approx(0.9 * 0.395 / 0.5, abs=0.005)


def test_a_clear_leader_with_ample_samples_keeps_its_confidence():
    top = finding("alpha", 0.90, 30.0, python=1.0)
    kept = with_doubts(top, [finding("beta", 0.05, 2.0)], RunFacts(process_cores=0.95))
    assert kept == top


def test_a_cpu_verdict_the_process_s_cpu_time_contradicts_is_not_confident():
    # six workers serialised on a lock around an HTTP call: 0.04 of 2 cores used
    top = with_doubts(
        finding("call_upstream", 0.95, 40.0, python=0.97), [],
        RunFacts(cpu_count=2, process_cores=0.04),
    )  # fmt: skip
    assert top.confidence < 0.1
    assert top.evidence["doubts"] == [
        "the process used 0.04 of 2 cores, less than a CPU-bound 95% implies"
    ]


def test_a_native_cpu_verdict_without_the_kernel_s_witness_says_so():
    native = Finding(
        kind="cpu", subkind="native", stage="read_block", share=0.9, confidence=0.9,
        rule="cpu_native", evidence={"sampled_s": 30.0, "native": 0.9},
    )  # fmt: skip
    top = with_doubts(
        native, [], RunFacts(process_cores=0.95, kernel_unavailable="syscall: Permission denied")
    )
    assert top.confidence == 0.45
    assert top.evidence["doubts"] == [
        "threads' kernel states could not be read (syscall: Permission denied): time in "
        "native calls may be waits no rule names (disk, network)"
    ]
    python = finding("alpha", 0.9, 30.0, python=0.9)  # Python bytecode is no hidden wait
    assert with_doubts(python, [], RunFacts(process_cores=0.95, kernel_unavailable="x")) == python


def test_a_sampler_that_missed_its_ticks_says_so_and_counts_the_samples_it_took():
    # render_queue at its own 5-ms switch interval: the sampler took 54% of its ticks
    top = finding("alpha", 0.90, 30.0, python=0.9)
    facts = RunFacts(process_cores=0.95, ticks_taken=0.54)
    lowered = with_doubts(top, [finding("beta", 0.05, 2.0)], facts)
    assert lowered.confidence == pytest.approx(0.9 * 0.54, abs=0.001)
    assert lowered.evidence["doubts"] == [
        "the stack sampler took 54% of the ticks it was due (the GIL was not free when "
        "they came): its samples stand for more time each"
    ]
    # the runner-up's sampling error counts the samples taken, not those due
    close = [finding("beta", 0.40, 0.8, python=1.0)]
    due = with_doubts(finding("alpha", 0.45, 0.9, python=1.0), close, RunFacts(cpu_count=2))
    taken = with_doubts(
        finding("alpha", 0.45, 0.9, python=1.0), close, RunFacts(cpu_count=2, ticks_taken=0.9)
    )
    assert "within the sampling error of 170 samples" in " ".join(due.evidence["doubts"])
    assert "within the sampling error of 153 samples" in " ".join(taken.evidence["doubts"])
    # most ticks taken: nothing said
    assert with_doubts(top, [], RunFacts(process_cores=0.95, ticks_taken=0.95)) == top


def test_the_ticks_taken_are_the_count_over_those_due_from_the_first_sample_to_the_last():
    from probe.analyzers.diagnosis import ticks_taken

    # 2 s from the first sample to the last at 100 Hz: 201 due
    assert ticks_taken({"collector": {"stack_ticks": 100}}, 100.0, 2.0) == pytest.approx(100 / 201)
    assert ticks_taken({"collector": {"stack_ticks": 201}}, 100.0, 2.0) == 1.0
    paced = {"collector": {"stack_ticks": 51, "stack_pacing": {"mean_interval_s": 0.04}}}
    assert ticks_taken(paced, 100.0, 2.0) == 1.0  # spaced out for its cost: all due taken
    assert ticks_taken({"collector": {}}, 100.0, 2.0) is None
    assert ticks_taken({"collector": {"stack_ticks": 5}}, 100.0, 0.0) is None


def test_a_run_whose_sampler_missed_most_ticks_says_what_would_settle_it(tmp_path):
    from probe.analyzers.diagnosis import diagnose
    from probe.reports.terminal import Verdict
    from probe.rundir import load
    from tests.synthetic import RunBuilder

    b = RunBuilder(duration_s=2.0)
    work = b.stack("main", "render_page")
    for k in range(200):
        b.sample(1, k * 10.0, work)
    b.meta_extra["collector"] = {"stack_ticks": 50}  # a quarter of the 200 due
    d = diagnose(load(b.write(tmp_path / "run")))
    assert d.findings[0].evidence["ticks_taken"] == 0.25
    summary = Verdict.from_diagnosis(d).summary
    assert "the stack sampler took 25% of the ticks it was due" in summary, summary
    assert "`--switch-interval 0.0001`" in summary and "`@probe.stage`" in summary


def test_a_stage_nearly_as_much_waiting_as_on_a_cpu_is_not_confidently_cpu_bound():
    # gunicorn's sync worker on a do-nothing route: 58% on a CPU, 39% waiting on the
    # network for its clients; the next run of the same case read io/network
    top = with_doubts(
        finding("<library>", 0.98, 30.0, python=0.11, native=0.47, network=0.39), [],
        RunFacts(cpu_count=2, process_cores=0.66),
    )  # fmt: skip
    assert top.evidence["doubts"] == [
        "`<library>` spends 39% of its time waiting on the network against 58% on a CPU: "
        "either could be what limits it"
    ]
    assert top.evidence["mixed_with"] == "network"
    # the lead (0.58 - 0.39) / 0.58 = 0.33, against clear_lead 0.5
    assert top.confidence == pytest.approx(0.9 * 0.33 / 0.5, abs=0.01)


def test_an_io_verdict_on_a_stage_mostly_on_a_cpu_keeps_little_confidence():
    # the single largest part names the kind: network 45% beats native 40%, yet the
    # stage is 55% on a CPU
    io = Finding(
        kind="io", subkind="network", stage="fetch", share=0.9, confidence=0.8,
        rule="wait_network",
        evidence={"sampled_s": 30.0, "python": 0.15, "native": 0.40, "network": 0.45},
    )  # fmt: skip
    top = with_doubts(io, [], RunFacts(cpu_count=2, process_cores=0.6))
    assert top.confidence == pytest.approx(0.08)  # the floor: 0.1 of its own
    assert top.evidence["doubts"] == [
        "`fetch` spends 55% of its time on a CPU against 45% waiting on the network: "
        "either could be what limits it"
    ]


def test_waits_for_the_gil_or_a_minor_wait_do_not_make_a_stage_mixed():
    # other threads' CPU, not a rival cause; and a wait under half the CPU's time
    for parts in ({"python": 0.55, "gil": 0.40}, {"python": 0.70, "network": 0.30}):
        top = finding("loop", 0.95, 30.0, **parts)
        assert with_doubts(top, [], RunFacts(cpu_count=2, process_cores=0.7)) == top


def test_a_mixed_stage_is_settled_by_marking_its_parts_not_by_a_longer_run():
    from probe.analyzers.diagnosis import _doubts_text

    parts = {"python": 0.20, "native": 0.30, "disk": 0.45}
    facts = RunFacts(cpu_count=2, process_cores=0.5)
    own = with_doubts(finding("load_batch", 0.9, 30.0, **parts), [], facts)
    said = _doubts_text(own)
    assert "either could be what limits it" in said and "a longer run" not in said
    assert said.endswith(
        "To settle it: `@probe.stage` on the stage's waiting call and on its computation "
        "apart (each part then reads as one kind)."
    )
    # in library code there is no call of the service's to mark: the doubt stands alone
    library = with_doubts(finding("<library>", 0.9, 30.0, **parts), [], facts)
    assert _doubts_text(library).endswith("either could be what limits it.")


def one_stage_run(**shares: float) -> Breakdown:
    """A batch job of one function, sampled 30 s: ``cpu``, ``native`` (of the CPU) and
    ``wait_<reason>`` shares of its time."""
    row = {"path_s": 30.0, "path_share": 1.0, "wall_share": 1.0, "sampled_s": 30.0,
           "self_s": 30.0, "threads": 1, "category": "function"}  # fmt: skip
    row |= {"cpu_share": shares.pop("cpu"), "native_share": shares.pop("native")}
    row |= shares
    stages = _complete(pd.DataFrame([row], index=["fetch (job.py)"]))
    return Breakdown(
        source="samples", wall_s=30.0, stages=stages, requests=_empty_requests(),
        sampled_s=30.0, cpu_s=30.0 * row["cpu_share"], python_cpu_s=0.0, tensor_cpu_s=0.0,
    )  # fmt: skip


def test_a_stage_more_on_a_cpu_than_waiting_is_cpu_bound_however_its_cpu_splits():
    # 55% on a CPU (30 Python, 25 native) against 45% on the network: the network was the
    # largest single part, and the stage read as network I/O
    facts = RunFacts(cpu_count=2, process_cores=0.55)
    (top,) = classify(one_stage_run(cpu=0.55, native=25 / 55, wait_network=0.45), facts)
    assert (top.kind, top.subkind) == ("cpu", "python")
    # still doubted (the network holds over half of what the CPU does): the clarity of
    # the CPU's 0.55, not Python's 0.30, times the lead (0.10 / 0.55) over clear_lead 0.5
    assert top.evidence["mixed_with"] == "network"
    assert top.confidence == pytest.approx((0.2 + 0.8 * 0.55 / 0.6) * (0.10 / 0.55) / 0.5, abs=2e-3)
    # a wait longer than all the CPU's time names the kind
    (io,) = classify(one_stage_run(cpu=0.40, native=0.5, wait_network=0.60), facts)
    assert (io.kind, io.subkind) == ("io", "network")


def test_a_doubted_confidence_never_reads_100_percent_in_any_report():
    assert confidence_words(0.996) == "99%" and confidence_words(1.0) == "100%"
    assert confidence_words(0.29) == "29%"  # 0.29 * 100 is 28.999...: not floored to 28
    primary = {"kind": "cpu", "subkind": "gc", "share": 0.61, "confidence": 0.996}
    assert limit_text(primary) == "cpu/gc (61%, confidence 99%)"
    assert confidence_cell(0.996) == "99%" and confidence_cell(None) == "—"
