"""Other processes on the host: their load is not the service's, and probe's own helpers
are not other load (``breakdown.host_busy_percent``, ``attribution.split_run_queue_waits``
on GIL rows, ``rules._decided_by_other_load``)."""

from __future__ import annotations

import pytest

from probe.analyzers.attribution import attribute, split_run_queue_waits
from probe.analyzers.breakdown import breakdown, host_busy_percent
from probe.analyzers.diagnosis import diagnose, run_facts
from probe.reports.terminal import Verdict
from probe.rundir import load
from tests.synthetic import MS, RunBuilder, frame_table


def test_a_gil_row_s_time_on_a_run_queue_is_split_off_as_a_wait_for_a_core():
    # a pool thread caught waiting for the GIL after an interval it spent 2 ms on a CPU,
    # 5 ms on a run queue (schedstat) and 3 ms asleep on the GIL's futex
    raw = frame_table("samples", [(10 * MS, 1, 7, 10 * MS, 2 * MS, "gil", 1, "", 5 * MS)])
    out = attribute(split_run_queue_waits(raw))
    by = out.groupby("reason")[["cpu_ns", "wait_ns"]].sum()
    assert by.loc["unknown", "wait_ns"] == pytest.approx(5 * MS)  # the cores'
    assert by.loc["gil", "wait_ns"] == pytest.approx(3 * MS)  # the GIL's: what is left
    assert out["cpu_ns"].sum() == pytest.approx(2 * MS)


def test_probe_s_idle_priority_helpers_are_not_counted_as_the_host_s_busy_cores():
    # 2 cores read 90% busy while probe's helpers (sidecar + finisher) used 0.7 of a core
    b = RunBuilder(duration_s=1.0)
    for k in range(0, 1001, 100):
        b.system(k, 90.0, probe_cpu_s=0.7 * k / 1000.0)
    busy = host_busy_percent(b.tables()["system"], cpu_count=2)
    assert busy["cpu_percent"].iloc[1:].tolist() == pytest.approx([55.0] * 10)


def test_each_host_reading_weighs_the_time_it_covers_a_late_first_one_its_long_one(
    tmp_path,
):
    # a sidecar a busy host held back reads its first interval 1.2 s after the start
    # (40% busy over it), then every 0.1 s (100%): a mean of the rows reads 1.91 of the
    # 2 cores busy, of the time 1.4
    b = RunBuilder(duration_s=2.4)
    for k in range(1200, 2401, 100):
        b.system(k, 40.0 if k == 1200 else 100.0, probe_cpu_s=0.0)
        b.resources(k, 0.5 * k / 1000.0, 100 << 20)
    b.sample(1, 10.0, b.stack("main", "serve"))
    run = load(b.write(tmp_path / "run"))
    d = diagnose(run)
    assert run_facts(run, d.breakdown).host_cores_busy == pytest.approx(1.4)


def test_a_stage_s_host_reading_is_the_one_whose_interval_holds_its_samples(tmp_path):
    # `parse` runs the first second, `score` the next; the host read 30% busy over the
    # first second (a reading at its end) and 90% over the second: the reading before
    # each sample gave `parse` none (all its samples came before the first) and `score` 30%
    b = RunBuilder(duration_s=2.0)
    parse, score = b.stack("main", "parse"), b.stack("main", "score")
    for k in range(1, 201):
        b.sample(1, k * 10.0 - 5.0, parse if k <= 100 else score)
    b.system(1000, 30.0, probe_cpu_s=0.0)
    b.system(2000, 90.0, probe_cpu_s=0.0)
    stages = breakdown(load(b.write(tmp_path / "run"))).stages
    by_name = {str(name).split(" ")[0]: row for name, row in stages.iterrows()}
    assert by_name["parse"]["host_cpu_percent"] == pytest.approx(30.0)
    assert by_name["score"]["host_cpu_percent"] == pytest.approx(90.0)


def gil_bound_pool(tmp_path, *, host_percent: float, helper_cores: float = 0.0, queued=True):
    """Four threads running one Python function for 2 s at one core between them: each on
    a CPU 30% of its samples, 40% caught waiting for the GIL (half of each such interval
    on a run queue), 30% runnable and on a run queue all its interval. The host's CPUs
    read ``host_percent`` busy, ``helper_cores`` of it probe's helpers'."""
    b = RunBuilder(duration_s=2.0)
    split = b.stack("main", "split_tokens")
    for thread in range(1, 5):
        for k in range(200):
            ts, phase = k * 10.0, (k + thread) % 10
            q = (lambda ms: ms) if queued else (lambda ms: None)
            if phase < 3:
                b.sample(thread, ts, split, queued_ms=q(0.0))
            elif phase < 7:
                b.sample(thread, ts, split, cpu_ms=0.0, reason="gil", queued_ms=q(5.0))
            else:
                b.sample(thread, ts, split, cpu_ms=0.0, reason="unknown", queued_ms=q(10.0))
    for k in range(0, 2001, 100):
        b.resources(k, 1.2 * k / 1000.0, 100 << 20)
        b.system(k, host_percent, probe_cpu_s=helper_cores * k / 1000.0)
    return diagnose(load(b.write(tmp_path / "run")))


def test_a_gil_bound_pool_beside_a_core_only_probe_s_helper_used_waits_for_the_gil(tmp_path):
    # tokenize_pool on an idle host: the finisher importing pandas at SCHED_IDLE on the
    # core the GIL leaves idle made the host read 88-94% busy, so the pool's waits on a
    # run queue read as waits for a core (cpu/python) instead of the GIL
    d = gil_bound_pool(tmp_path, host_percent=95.0, helper_cores=0.75)
    assert (d.primary["kind"], d.primary["subkind"]) == ("contention", "gil"), d.primary
    assert "multiprocess" in {r.id for r in d.recommendations}
    assert not any(n.startswith("waited for a CPU") for n in d.notes)


def test_a_verdict_the_other_processes_load_decides_is_held_at_half_and_says_so(tmp_path):
    # the same pool beside a busy loop: 0.95 of a core is the other process's, and the
    # threads' run-queue time is the larger part of their ready time; counted as CPU
    # demand it reads cpu/python, without it the GIL: which one the host's load decides
    d = gil_bound_pool(tmp_path, host_percent=97.5)
    primary = d.findings[0]
    assert (primary.kind, primary.subkind) == ("cpu", "python"), primary
    assert primary.confidence <= 0.5
    assert primary.evidence["without_other_load"].endswith("/gil")  # cpu/ or contention/
    (doubt,) = [x for x in primary.evidence["doubts"] if "other processes held" in x]
    assert "waiting for the GIL" in doubt
    summary = Verdict.from_diagnosis(d).summary
    assert "To settle it: a run on cores of its own" in summary, summary


def test_a_verdict_the_other_load_does_not_change_keeps_its_confidence(tmp_path):
    # one Python thread beside the same load: waiting for a core or not, it computes
    b = RunBuilder(duration_s=2.0)
    loop = b.stack("main", "render_page")
    for k in range(200):
        if k % 2:
            b.sample(1, k * 10.0, loop, queued_ms=0.0)
        else:
            b.sample(1, k * 10.0, loop, cpu_ms=4.0, reason="unknown", queued_ms=6.0)
    for k in range(0, 2001, 100):
        b.resources(k, 0.7 * k / 1000.0, 100 << 20)
        b.system(k, 97.5)
    d = diagnose(load(b.write(tmp_path / "run")))
    assert (d.primary["kind"], d.primary["subkind"]) == ("cpu", "python"), d.primary
    assert d.primary["confidence"] > 0.9
    assert any(n.startswith("waited for a CPU") for n in d.notes)


def test_runs_without_run_queue_readings_get_no_other_load_doubt(tmp_path):
    # an older probe's run: how long the threads waited for a core is not known
    d = gil_bound_pool(tmp_path, host_percent=97.5, queued=False)
    assert "without_other_load" not in d.findings[0].evidence


def test_a_cpu_verdict_on_threads_left_fewer_than_two_cores_is_held_at_half(tmp_path):
    # the pool beside one busy loop, caught mostly on a run queue and hardly ever waiting
    # for the GIL (a clean-clone CI run of tokenize_pool: 73% of ready time queued, 1.7%
    # GIL): without those waits it still reads cpu/python, but with one core left, four
    # threads held there by the GIL or by the cores look the same
    b = RunBuilder(duration_s=2.0)
    split = b.stack("main", "split_tokens")
    for thread in range(1, 5):
        for k in range(200):
            ts = k * 10.0
            if (k + thread) % 4 == 0:
                b.sample(thread, ts, split, queued_ms=0.0)
            else:
                b.sample(thread, ts, split, cpu_ms=0.0, reason="unknown", queued_ms=10.0)
    for k in range(0, 2001, 100):
        b.resources(k, 0.95 * k / 1000.0, 100 << 20)
        b.system(k, 97.5)
    d = diagnose(load(b.write(tmp_path / "run")))
    primary = d.findings[0]
    assert (primary.kind, primary.subkind) == ("cpu", "python"), primary
    assert primary.confidence <= 0.5
    (doubt,) = [x for x in primary.evidence["doubts"] if "other processes held" in x]
    assert "waiting for the GIL" in doubt and "fewer than two" in doubt
    assert "To settle it: a run on cores of its own" in Verdict.from_diagnosis(d).summary
