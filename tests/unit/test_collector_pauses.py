"""The garbage collector's pauses: timed by its own callbacks (``samplers.gc_pauses``),
added up per process and charged to the stages whose allocations set the full ones off
(``analyzers.collector``), a finding of their own where they hold the run
(``rules._collector_pauses``) and a fix that takes start-up's objects out of the walks
(``recommendations._gc_freeze``)."""

from __future__ import annotations

import gc
import threading
from dataclasses import replace

import pandas as pd
import pytest

from probe.analyzers.breakdown import Breakdown, _complete, _empty_requests
from probe.analyzers.collector import CollectorTime, collector_time
from probe.analyzers.diagnosis import _summary
from probe.analyzers.recommendations import MODEL, proposed
from probe.analyzers.rules import RunFacts, classify
from probe.rundir.schema import COLUMNS
from probe.samplers.gc_pauses import GcPauses


class Clock:
    def __init__(self) -> None:
        self.now = 0

    def __call__(self) -> int:
        return self.now


def collection(sampler: GcPauses, clock: Clock, generation: int, pause_ns: int) -> None:
    sampler._on_collection("start", {"generation": generation})
    clock.now += pause_ns
    sampler._on_collection("stop", {"generation": generation, "collected": 0})
    clock.now += 1_000


def test_young_collections_add_up_per_generation_and_each_full_one_is_a_row_with_its_thread():
    clock, callbacks = Clock(), []
    heap = iter([2_100_000, 2_050_000])  # pymalloc's blocks, read at a full one's start
    sampler = GcPauses(clock=clock, thread_id=lambda: 4242, callbacks=callbacks,
                       allocated_blocks=heap.__next__)  # fmt: skip
    sampler.install()
    assert callbacks == [sampler._on_collection]
    for pause in (100, 300, 200):
        collection(sampler, clock, 0, pause)
    collection(sampler, clock, 1, 5_000)
    collection(sampler, clock, 2, 50_000_000)
    rows = sampler.drain()["gc_pauses"]
    assert [r[1:] for r in rows] == [
        (2, 1, 50_000_000, 50_000_000, 4242, 2_100_000),
        (0, 3, 600, 300, None, None),
        (1, 1, 5_000, 5_000, None, None),
    ]
    assert len(rows[0]) + 1 == len(COLUMNS["gc_pauses"])  # pid: the reader's to fill in
    assert sampler.drain() == {"gc_pauses": []}  # drained: counted once
    sampler.uninstall()
    assert callbacks == []


def test_a_target_that_clears_gc_callbacks_itself_does_not_break_the_end_of_the_run():
    callbacks: list = []
    sampler = GcPauses(callbacks=callbacks)
    sampler.install()
    callbacks.clear()
    sampler.uninstall()
    assert not sampler.installed


def test_the_interpreter_calls_it_for_a_real_collection():
    sampler = GcPauses()
    sampler.install()
    try:
        gc.collect()
    finally:
        sampler.uninstall()
    full = [r for r in sampler.drain()["gc_pauses"] if r[1] == 2]
    assert len(full) == 1 and full[0][3] > 0


def test_each_thread_s_own_collections_add_up_for_it_alone():
    # the pacing of probe's readings leaves these out (samplers.ticker.CostBudget)
    clock = Clock()
    sampler = GcPauses(clock=clock, callbacks=[])
    collection(sampler, clock, 0, 300_000)
    collection(sampler, clock, 2, 22_000_000)
    assert sampler.collected_here_s() == pytest.approx(0.0223)
    elsewhere: list[float] = []
    thread = threading.Thread(target=lambda: elsewhere.append(sampler.collected_here_s()))
    thread.start()
    thread.join()
    assert elsewhere == [0.0]


def test_a_real_collection_counts_for_the_thread_that_made_it():
    sampler = GcPauses()
    sampler.install()
    try:
        before = sampler.collected_here_s()
        gc.collect()
        after = sampler.collected_here_s()
    finally:
        sampler.uninstall()
    assert after > before


def pauses(rows: list[tuple]) -> pd.DataFrame:
    """(ts_ns, generation, collections, pause_ns, thread_id, pid[, heap_blocks]) rows."""
    frame = pd.DataFrame(
        [
            (ts, g, n, p, p, tid, heap[0] if heap else None, pid)
            for ts, g, n, p, tid, pid, *heap in rows
        ],  # fmt: skip
        columns=[c for c, _ in COLUMNS["gc_pauses"]],
    )
    return frame.astype(dict(COLUMNS["gc_pauses"]))


def samples(rows: list[tuple[int, int, str]]) -> pd.DataFrame:
    return pd.DataFrame(rows, columns=["ts_ns", "thread_id", "user_function"])


def test_the_process_whose_collections_took_longest_stands_for_the_run():
    table = pauses([
        (10, 0, 500, 400_000_000, None, 1),
        (20, 2, 1, 900_000_000, 7, 2),
        (30, 0, 100, 200_000_000, None, 2),
    ])  # fmt: skip
    c = collector_time(table, samples([]), wall_s=10.0)
    assert c is not None and c.pid == 2
    assert (c.young_s, c.full_s, c.full_collections) == (0.2, 0.9, 1)
    assert c.share == pytest.approx(0.11)
    assert collector_time(table.iloc[0:0], samples([]), wall_s=10.0) is None


def test_a_full_collection_is_charged_to_the_stage_its_thread_sampled_from_its_start():
    # a tick during a collection reads the frame that allocated; the tick after its end
    # lands anywhere (on rerank_catalog it spread one function's collections over five)
    ms = 1_000_000
    table = pauses([
        (100 * ms, 2, 1, 60 * ms, 7, 1),  # 40-100 ms
        (300 * ms, 2, 1, 40 * ms, 7, 1),  # 260-300 ms: no tick during it
        (400 * ms, 2, 1, 10 * ms, 8, 1),  # 390-400 ms, on another thread
    ])  # fmt: skip
    taken = samples([
        (30 * ms, 7, "score (job.py)"),  # before the first started: not its
        (50 * ms, 7, "gather (job.py)"),  # during it
        (110 * ms, 7, "score (job.py)"),  # after it
        (305 * ms, 7, "rank (job.py)"),  # the first after the second started
        (395 * ms, 8, "other (job.py)"),
    ])  # fmt: skip
    c = collector_time(table, taken, wall_s=1.0)
    assert c is not None
    assert c.full_by_stage == {
        "gather (job.py)": 0.06, "rank (job.py)": 0.04, "other (job.py)": 0.01,
    }  # fmt: skip


def test_a_stage_s_own_time_is_its_samples_less_the_collections_inside_their_intervals():
    # each row stands for the time since its thread's row before; a collection split
    # between the tick read during it and the next is taken from both, in proportion
    ms = 1_000_000
    table = pauses([(100 * ms, 2, 1, 60 * ms, 7, 1)])  # 40-100 ms
    taken = pd.DataFrame(
        [(30 * ms, 10 * ms, 7, "score (job.py)"),  # 20-30: none of it
         (50 * ms, 20 * ms, 7, "gather (job.py)"),  # 30-50: 10 ms of it
         (110 * ms, 60 * ms, 7, "score (job.py)"),  # 50-110: 50 ms of it
         (110 * ms, 100 * ms, 8, "other (job.py)")],  # another thread: not its
        columns=["ts_ns", "wall_ns", "thread_id", "user_function"],
    )  # fmt: skip
    c = collector_time(table, taken, wall_s=1.0)
    assert c is not None
    assert c.full_in_stage == pytest.approx({"score (job.py)": 0.05, "gather (job.py)": 0.01})


def job(stages: dict[str, float]) -> Breakdown:
    """A batch job's functions, all Python on one thread, by share of 10 s."""
    rows = [
        {"path_s": 10 * share, "path_share": share, "wall_share": share,
         "sampled_s": 10 * share, "self_s": 10 * share, "threads": 1,
         "category": "function", "cpu_share": 1.0, "native_share": 0.0}
        for share in stages.values()
    ]  # fmt: skip
    table = _complete(pd.DataFrame(rows, index=list(stages)))
    return Breakdown(
        source="samples", wall_s=10.0, stages=table, requests=_empty_requests(),
        sampled_s=10.0, cpu_s=10.0, python_cpu_s=10.0, tensor_cpu_s=0.0,
    )  # fmt: skip


def collected(share: float, full: float, by_stage: dict[str, float]) -> CollectorTime:
    """Collections set off in the stages of ``by_stage``, their seconds inside them."""
    return CollectorTime(
        pid=1, wall_s=10.0, young_s=10 * (share - full), young_collections=9_000,
        full_s=10 * full, full_collections=40, longest_full_s=0.07, full_by_stage=by_stage,
        full_in_stage=by_stage,
    )  # fmt: skip


def test_collections_that_outweigh_the_stage_setting_them_off_are_the_primary_limit():
    # rerank_catalog's shape: 61% of the run in collections, most set off in gather,
    # whose 53% of the samples holds 19 points of them
    bd = job({"gather (job.py)": 0.53, "score (job.py)": 0.20, "load (job.py)": 0.05})
    facts = RunFacts(cpu_count=2, process_cores=1.0,
                     collector=collected(0.61, 0.51, {"gather (job.py)": 1.9}))  # fmt: skip
    findings = classify(bd, facts)
    top = findings[0]
    assert (top.kind, top.subkind, top.rule) == ("cpu", "gc", "collector_pauses")
    assert top.stage == "gather (job.py)" and top.share == pytest.approx(0.61)
    # gather's own 34% is over half the collector's: which to fix first is open
    assert top.evidence["doubts"] == [
        "`gather (job.py)` takes 56% as much besides the collections in its time (34% "
        "against 61%): either is worth fixing first"
    ]
    assert top.confidence < 1.0
    summary = _summary([top], [], bd)
    assert summary.startswith(
        "CPU-bound in the garbage collector: its collections held the process 61% of the "
        "run (40 full collections of 128 ms each, set off mostly in `gather (job.py)`)."
    )
    assert "To settle it" not in summary  # timed, not sampled: no longer run settles it


def test_collections_under_a_stage_s_own_time_leave_the_stage_the_primary():
    bd = job({"gather (job.py)": 0.80, "score (job.py)": 0.10})
    facts = RunFacts(cpu_count=2, process_cores=1.0,
                     collector=collected(0.12, 0.08, {"gather (job.py)": 0.8}))  # fmt: skip
    findings = classify(bd, facts)
    assert (findings[0].stage, findings[0].subkind) == ("gather (job.py)", "python")
    assert [f.rule for f in findings].index("collector_pauses") == 1


def test_a_run_with_next_to_no_collection_time_has_no_collector_finding():
    bd = job({"gather (job.py)": 0.80, "score (job.py)": 0.10})
    facts = RunFacts(collector=collected(0.01, 0.005, {}))
    assert all(f.rule != "collector_pauses" for f in classify(bd, facts))
    assert all(f.rule != "collector_pauses" for f in classify(bd, RunFacts()))


def test_freezing_start_up_s_objects_takes_four_fifths_of_the_full_collections_time():
    bd = job({"gather (job.py)": 0.53, "score (job.py)": 0.20})
    facts = RunFacts(cpu_count=1, process_cores=1.0,
                     collector=collected(0.61, 0.51, {"gather (job.py)": 1.9}))  # fmt: skip
    recs = {r.id: r for r in proposed(classify(bd, facts), bd, facts)}
    freeze = recs["gc_freeze"]
    walk = MODEL.frozen_walk
    assert (freeze.p, freeze.s) == (pytest.approx(0.51), pytest.approx(1 / (1 - walk)))
    assert freeze.estimated_speedup == pytest.approx(1 / (1 - walk * 0.51))
    assert freeze.ceiling == pytest.approx(1 / (1 - 0.51))
    assert "gc.freeze()" in freeze.how and "40 of them, 128 ms each" in freeze.how


def test_young_collections_alone_propose_no_freeze():
    bd = job({"gather (job.py)": 0.53})
    facts = RunFacts(collector=CollectorTime(
        pid=1, wall_s=10.0, young_s=3.0, young_collections=30_000, full_s=0.0,
        full_collections=0, longest_full_s=0.0,
    ))  # fmt: skip
    findings = classify(bd, facts)
    assert any(f.rule == "collector_pauses" for f in findings)
    assert all(r.id != "gc_freeze" for r in proposed(findings, bd, facts))


def test_ticks_missed_while_the_collector_held_the_gil_are_not_a_sampling_doubt():
    # suggest_api: the sampler took 73% of its due ticks, and the collections held the
    # process 38% of the time; of the ticks due outside them it missed none
    bd = job({"complete (app.py)": 0.62, "rank (app.py)": 0.05})
    collector = collected(0.38, 0.33, {"complete (app.py)": 0.5})
    kept = classify(bd, RunFacts(process_cores=1.0, ticks_taken=0.73, collector=collector))[0]
    assert all("ticks" not in d for d in kept.evidence.get("doubts", []))
    doubted = classify(bd, RunFacts(process_cores=1.0, ticks_taken=0.73))[0]
    assert any("took 73% of the ticks" in d for d in doubted.evidence["doubts"])


def test_a_stage_the_collector_nearly_matches_says_so_and_no_longer_run_is_asked_for():
    bd = job({"complete (app.py)": 0.62, "rank (app.py)": 0.05})
    collector = collected(0.38, 0.33, {"complete (app.py)": 1.45})  # of its 6.2 s: 48% own
    top = classify(bd, RunFacts(process_cores=1.0, collector=collector))[0]
    assert (top.stage, top.subkind) == ("complete (app.py)", "python")
    assert top.evidence["doubts"] == [
        "the garbage collector's collections take 80% as much as `complete (app.py)` "
        "does besides them (38% against 48%): either is worth fixing first"
    ]
    summary = _summary([top], [], bd)
    assert "To settle it" not in summary and summary.endswith("either is worth fixing first.")


def test_a_stage_s_lead_over_the_collector_is_read_at_its_sampling_error():
    # suggest_api in a CI run: `complete` 39% of its own against the collector's 28%, from
    # ~600 samples, read 0.56 with the lead at face value: a confident verdict that left
    # the collector out. The stage's time is sampled, the collector's timed
    bd = job({"complete (app.py)": 0.62, "rank (app.py)": 0.05})
    collector = collected(0.38, 0.33, {"complete (app.py)": 1.45})  # of its 6.2 s: 48% own
    few = classify(bd, RunFacts(process_cores=1.0, collector=collector))[0]
    many = classify(bd, RunFacts(process_cores=1.0, collector=collector, sample_hz=1e6))[0]
    assert few.stage == many.stage == "complete (app.py)"
    # at a million samples the bound is the face value: the lead of 10 points of 48
    assert many.confidence == pytest.approx(0.2 / 0.5, abs=0.01)
    assert few.confidence < 0.6 * many.confidence


def test_a_lead_within_the_sampling_error_asks_for_a_longer_run():
    bd = job({"complete (app.py)": 0.62, "rank (app.py)": 0.05})
    collector = collected(0.42, 0.37, {"complete (app.py)": 1.45})  # 48% own against 42%
    top = classify(bd, RunFacts(process_cores=1.0, collector=collector))[0]
    assert top.stage == "complete (app.py)" and top.confidence == pytest.approx(0.1)
    assert top.evidence["doubts"][-1] == (
        "its lead of 5 points is within the sampling error of 670 samples"
    )
    assert _summary([top], [], bd).endswith("To settle it: a longer run.")
    # the collector ahead of a stage as close: a longer run settles that too
    paused = classify(bd, RunFacts(process_cores=1.0, collector=collected(0.66, 0.61, {})))[0]
    assert paused.rule == "collector_pauses" and "sampling error" in paused.evidence["doubts"][-1]
    assert _summary([paused], [], bd).endswith("To settle it: a longer run.")


def test_collections_under_half_a_served_app_s_time_are_said_as_its_largest_part():
    bd = job({"complete (app.py)": 0.30, "rank (app.py)": 0.10})
    collector = CollectorTime(
        pid=1, wall_s=10.0, young_s=0.5, young_collections=5_000, full_s=3.5,
        full_collections=20, longest_full_s=0.2, full_by_stage={"complete (app.py)": 2.0},
        full_in_stage={"complete (app.py)": 2.0}, serving=True,
    )  # fmt: skip
    top = classify(bd, RunFacts(process_cores=1.0, collector=collector))[0]
    assert top.rule == "collector_pauses"
    assert _summary([top], [], bd).startswith(
        "No dominant bottleneck: the largest part is the garbage collector: its "
        "collections held the process 40% of the serving time (20 full collections of "
        "175 ms each, set off mostly in `complete (app.py)`)."
    )


def test_a_freeze_takes_from_each_walk_the_heap_every_walk_since_the_work_began_found():
    # a job whose set-off stage first ran at 1 s: one full collection during its
    # start-up (a freeze made once it ends comes after it), then three walking 400,000,
    # 500,000 and 600,000 blocks: the floor, 400,000, is 0.8 of their mean
    ms = 1_000_000
    table = pauses([
        (600 * ms, 2, 1, 20 * ms, 7, 1, 150_000),
        (1_500 * ms, 2, 1, 50 * ms, 7, 1, 500_000),
        (2_200 * ms, 2, 1, 60 * ms, 7, 1, 400_000),
        (3_000 * ms, 2, 1, 70 * ms, 7, 1, 600_000),
    ])  # fmt: skip
    taken = samples([(1_000 * ms, 7, "work (job.py)"), (1_460 * ms, 7, "work (job.py)"),
                     (2_930 * ms, 7, "work (job.py)")])  # fmt: skip
    c = collector_time(table, taken, wall_s=4.0)
    assert c is not None and c.start_up_heap == pytest.approx(0.8)
    assert (c.full_s, c.full_since_work_s) == (pytest.approx(0.2), pytest.approx(0.18))
    assert c.to_dict()["full_since_work_share"] == pytest.approx(0.045)
    # a served app's work is its requests' window: its three collections, 0.8 again
    served = collector_time(table, taken, wall_s=4.0, window=(1_400 * ms, 3_500 * ms))
    assert served is not None and served.start_up_heap == pytest.approx(0.8)
    # two collections are no floor: the part is not measured (the 4/5 assumption stands)
    early = collector_time(table, taken, wall_s=4.0, window=(1_400 * ms, 2_500 * ms))
    assert early is not None and early.start_up_heap is None
    # collections whose heap was not read (a run before 2026-12-06) leave it unmeasured
    unread = pauses([(1_500 * ms, 2, 1, 50 * ms, 7, 1), (2_200 * ms, 2, 1, 60 * ms, 7, 1),
                     (3_000 * ms, 2, 1, 70 * ms, 7, 1)])  # fmt: skip
    assert collector_time(unread, taken, wall_s=4.0).start_up_heap is None


def test_a_freeze_takes_away_only_the_measured_start_up_part_of_each_walk():
    # session_scores: 58% of the run in full collections walking a cache its requests
    # fill; 19% of that heap alive at its start. Freezing at start realised 1.09x
    bd = job({"build (job.py)": 0.77, "score (job.py)": 0.13})
    # fill; 19% of that heap walked by every one. Freezing at start realised 1.09x. Of
    # its 58% in full ones, 3 points came before the work began: no freeze reaches those
    collector = replace(
        collected(0.67, 0.58, {"build (job.py)": 3.0}), start_up_heap=0.19, full_since_work_s=5.5
    )
    facts = RunFacts(cpu_count=1, process_cores=1.0, collector=collector)
    freeze = next(r for r in proposed(classify(bd, facts), bd, facts) if r.id == "gc_freeze")
    assert (freeze.p, freeze.s) == (pytest.approx(0.55), pytest.approx(1 / (1 - 0.19)))
    assert freeze.estimated_speedup == pytest.approx(1 / (1 - 0.19 * 0.55))
    assert freeze.evidence["frozen_part"] == 0.19
    assert "19% of the live heap they walked once the work had begun" in freeze.model
    assert "(55% of the run," in freeze.model


def test_the_collector_s_finding_gets_its_own_fix_not_its_stage_s_once_more():
    # a model stage at batch 1 gets dynamic batching from its own finding; the collector's
    # finding, set off in the same stage, must not propose it a second time
    bd = job({"infer (app.py)": 0.70})
    bd.stages.loc["infer (app.py)", "tensor_share"] = 0.9
    facts = RunFacts(cpu_count=1, process_cores=1.0,
                     collector=collected(0.30, 0.25, {"infer (app.py)": 1.0}))  # fmt: skip
    recs = proposed(classify(bd, facts), bd, facts)
    assert [r.id for r in recs].count("dynamic_batching") == 1
    assert [r.id for r in recs].count("gc_freeze") == 1


def test_the_full_collections_are_intervals_on_kineto_s_clock_and_the_young_ones_are_not():
    from probe.analyzers.collector import full_collections

    rows = pd.DataFrame(
        {"ts_ns": [5_000, 9_000, 12_000], "generation": [0, 2, 2], "collections": [40, 1, 1],
         "pause_ns": [800, 2_000, 500], "longest_ns": [60, 2_000, 500],
         "thread_id": [None, 7, 8], "heap_blocks": [None, 10, 10], "pid": [3, 3, 4]}
    ).astype({"thread_id": "Int64", "heap_blocks": "Int64", "pid": "Int64"})  # fmt: skip
    out = full_collections(rows, shift_ns=1_000_000)
    # ts_ns is a row's end: the start is before it by its pause
    assert out.to_dict("records") == [
        {"pid": 3, "tid": 7, "ts_ns": 1_007_000, "dur_ns": 2_000},
        {"pid": 4, "tid": 8, "ts_ns": 1_011_500, "dur_ns": 500},
    ]
    assert full_collections(pd.DataFrame(), shift_ns=0).empty  # a run from before the table
