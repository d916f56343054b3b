"""The cores a process may run on -- its affinity mask, its cgroup's CPU quota -- bound
every estimate that adds cores (probe.watchdog.limits.cgroup_cpu_quota, RunFacts'
cores_allowed)."""

from __future__ import annotations

import pytest

from probe.analyzers.diagnosis import diagnose
from probe.reports.terminal import Verdict
from probe.rundir import load
from probe.watchdog.limits import cgroup_cpu_quota, cgroup_cpu_throttling
from tests.synthetic import RunBuilder
from tests.unit.test_diagnosis import (
    add_cpu,
    four_threads_waiting_for_the_gil,
    sequential_requests,
    threads_in_a_native_call,
)


def _proc(tmp_path, line: str):
    proc = tmp_path / "proc"
    (proc / "1").mkdir(parents=True)
    (proc / "1" / "cgroup").write_text(line)
    return proc


def test_a_v1_cfs_quota_is_read_as_cores_the_tightest_along_the_path(tmp_path):
    v1 = tmp_path / "v1"
    (v1 / "cpu,cpuacct" / "pod" / "svc").mkdir(parents=True)
    for folder, quota in (("pod/svc", "150000"), ("pod", "250000"), ("", "-1")):
        (v1 / "cpu,cpuacct" / folder / "cpu.cfs_quota_us").write_text(quota + "\n")
        (v1 / "cpu,cpuacct" / folder / "cpu.cfs_period_us").write_text("100000\n")
    proc = _proc(tmp_path, "3:cpu,cpuacct:/pod/svc\n")
    assert cgroup_cpu_quota(1, root=v1, proc=proc) == pytest.approx(1.5)


def test_a_v2_cpu_max_is_read_as_cores_and_max_is_no_quota(tmp_path):
    v2 = tmp_path / "v2"
    (v2 / "svc").mkdir(parents=True)
    (v2 / "cgroup.controllers").write_text("cpu memory\n")
    (v2 / "svc" / "cpu.max").write_text("50000 100000\n")  # docker --cpus 0.5
    (v2 / "cpu.max").write_text("max 100000\n")
    proc = _proc(tmp_path, "0::/svc\n")
    assert cgroup_cpu_quota(1, root=v2, proc=proc) == pytest.approx(0.5)
    (v2 / "svc" / "cpu.max").write_text("max 100000\n")
    assert cgroup_cpu_quota(1, root=v2, proc=proc) is None


def test_no_cgroup_file_and_a_garbled_quota_read_as_no_quota(tmp_path):
    v2 = tmp_path / "v2"
    (v2 / "svc").mkdir(parents=True)
    (v2 / "cgroup.controllers").write_text("cpu\n")
    (v2 / "svc" / "cpu.max").write_text("lots\n")
    assert cgroup_cpu_quota(1, root=v2, proc=_proc(tmp_path, "0::/svc\n")) is None
    assert cgroup_cpu_quota(1, root=v2, proc=tmp_path / "absent") is None


def test_throttling_is_read_from_the_cpu_stat_of_the_quota_that_binds(tmp_path):
    v1 = tmp_path / "v1"
    (v1 / "cpu" / "pod" / "svc").mkdir(parents=True)
    for folder, quota, throttled in (("pod/svc", "-1", 0), ("pod", "50000", 37), ("", "-1", 0)):
        (v1 / "cpu" / folder / "cpu.cfs_quota_us").write_text(quota + "\n")
        (v1 / "cpu" / folder / "cpu.cfs_period_us").write_text("100000\n")
        (v1 / "cpu" / folder / "cpu.stat").write_text(
            f"nr_periods 120\nnr_throttled {throttled}\nthrottled_time 2500000000\n"
        )
    proc = _proc(tmp_path, "4:cpu:/pod/svc\n")
    assert cgroup_cpu_throttling(1, root=v1, proc=proc) == {
        "periods": 120.0,
        "throttled_periods": 37.0,
        "throttled_s": pytest.approx(2.5),
    }
    v2 = tmp_path / "v2"
    (v2 / "svc").mkdir(parents=True)
    (v2 / "cgroup.controllers").write_text("cpu\n")
    (v2 / "svc" / "cpu.max").write_text("150000 100000\n")
    (v2 / "svc" / "cpu.stat").write_text(
        "usage_usec 9\nnr_periods 10\nnr_throttled 4\nthrottled_usec 750000\n"
    )
    got = cgroup_cpu_throttling(1, root=v2, proc=_proc(tmp_path / "b", "0::/svc\n"))
    assert got == {"periods": 10.0, "throttled_periods": 4.0, "throttled_s": 0.75}
    (v2 / "svc" / "cpu.max").write_text("max 100000\n")  # no quota: nothing throttles
    assert cgroup_cpu_throttling(1, root=v2, proc=_proc(tmp_path / "c", "0::/svc\n")) is None


def _one_busy_core_of_two(tmp_path, **host):
    b = RunBuilder(duration_s=1.0)
    gemm = b.stack("main", "generate", leaf_call="operator.matmul")
    end = sequential_requests(b, 20, [("generate", 40.0, {"stack": gemm})])
    add_cpu(b, end, 1.0)
    if host:
        b.meta_extra["host"] = {"cpu_count": 2, **host}
    return diagnose(load(b.write(tmp_path / "run")))


def test_one_instance_per_core_is_not_advised_where_the_process_may_use_one_core(tmp_path):
    free = _one_busy_core_of_two(tmp_path / "free")
    assert free.recommendations[0].id == "multi_instance"
    pinned = _one_busy_core_of_two(tmp_path / "pinned", cores_allowed=1.0, cpu_limit="affinity")
    assert (pinned.primary["kind"], pinned.primary["subkind"]) == ("cpu", "native")
    assert "multi_instance" not in [r.id for r in pinned.recommendations]
    assert (pinned.run["cores_allowed"], pinned.run["cpu_limit"]) == (1.0, "affinity")
    assert "CPU 1.00 of 1 core allowed (affinity) of 2" in Verdict.from_diagnosis(pinned).facts


def test_a_quota_of_a_core_and_a_half_runs_one_more_instance_at_most_half_as_fast(tmp_path):
    d = _one_busy_core_of_two(tmp_path, cores_allowed=1.5, cpu_limit="cgroup quota")
    recs = {r.id: r for r in d.recommendations}
    # 1.5 cores for a process using one: at most 1.5x, the co-running instances each at
    # 0.9 of one alone (Model.instance_efficiency), not the 1.8x two free cores give
    assert recs["multi_instance"].estimated_speedup == pytest.approx(1.35, rel=0.02)
    assert d.run["cpu_limit"] == "cgroup quota"


def test_runnable_threads_beside_a_core_they_may_not_use_wait_for_their_own_core(tmp_path):
    # With the second core idle and theirs to use, their runnable time cannot be a wait
    # for a core: it is the GIL's (rules.runnable_beside_idle_cores). Pinned to one core
    # (taskset), the idle core is not theirs: they wait for the one they have, and more
    # processes would share it
    free = threads_in_a_native_call(tmp_path / "free", runnable_reason="unknown", cores=1.0)
    assert (free.primary["kind"], free.primary["subkind"]) == ("contention", "gil")
    pinned = threads_in_a_native_call(
        tmp_path / "pinned",
        runnable_reason="unknown",
        cores=1.0,
        cores_allowed=1.0,
        cpu_limit="affinity",
    )
    assert (pinned.primary["kind"], pinned.primary["subkind"]) == ("cpu", "native"), pinned.primary
    assert not {"multiprocess", "multi_instance"} & {r.id for r in pinned.recommendations}


def test_a_quota_under_one_core_bounds_throughput_at_the_quota(tmp_path):
    # the bottleneck law's CPU bound: cores over CPU seconds a request; half a core
    # serves half what a whole one would (the bound is not lifted to one core)
    whole = _one_busy_core_of_two(tmp_path / "whole", cores_allowed=1.0, cpu_limit="affinity")
    half = _one_busy_core_of_two(tmp_path / "half", cores_allowed=0.5, cpu_limit="cgroup quota")
    assert half.run["bottleneck"]["cores_available"] == 0.5
    bound = half.run["bottleneck"]["max_throughput_per_s"]
    assert bound == pytest.approx(whole.run["bottleneck"]["max_throughput_per_s"] / 2, rel=0.01)


@pytest.mark.parametrize(("throttled", "said"), [(40, True), (20, False)])
def test_a_run_its_quota_throttled_in_a_quarter_of_its_periods_or_more_says_so(
    tmp_path, throttled, said
):
    b = RunBuilder(duration_s=1.0)
    gemm = b.stack("main", "generate", leaf_call="operator.matmul")
    end = sequential_requests(b, 20, [("generate", 40.0, {"stack": gemm})])
    add_cpu(b, end, 1.0)
    b.meta_extra["host"] = {"cpu_count": 2, "cores_allowed": 1.5, "cpu_limit": "cgroup quota"}
    b.meta_extra["cpu_throttling"] = {
        "periods": 100, "throttled_periods": throttled, "throttled_s": 0.6
    }  # fmt: skip
    d = diagnose(load(b.write(tmp_path / "run")))
    notes = [n for n in d.notes if n.startswith("throttled by its CPU quota")]
    assert d.run["cpu_throttled_share"] == pytest.approx(throttled / 100)
    assert bool(notes) == said
    if said:
        assert f"in {throttled}% of the 100 quota periods" in notes[0]
        assert "its 1.5 cores" in notes[0] and "size them to the quota" in notes[0]


def test_a_run_the_sidecar_read_once_takes_its_cores_from_the_threads_cpu_clocks(tmp_path):
    # tokenize_pool under `taskset -c 0`: the niced sidecar got no CPU beside four busy
    # threads until the end, one reading, and the verdict said "CPU 0.00 of 1 core"
    b = RunBuilder(duration_s=1.0)
    loop = b.stack("main", "split_tokens")
    for thread in (1, 2):
        for k in range(100):
            b.sample(thread, 10.0 * (k + 1), loop, cpu_ms=4.5 if k % 2 else 5.0)
    b.resources(1000, 1.2, 100 << 20)  # the one reading: the process's CPU since its start
    b.meta_extra["host"] = {"cpu_count": 2, "cores_allowed": 1.0, "cpu_limit": "affinity"}
    d = diagnose(load(b.write(tmp_path / "run")))
    assert d.run["process_cores"] == pytest.approx(0.95, abs=0.01)
    assert "CPU 0.95 of 1 core allowed (affinity) of 2" in Verdict.from_diagnosis(d).facts


def _four_threads_waiting_for_the_gil(tmp_path, **host):
    """tokenize_pool at CPython's 5-ms switch interval (its threads asleep on the GIL's
    futex, not on the run queue), 1 core busy."""
    b = four_threads_waiting_for_the_gil()
    add_cpu(b, 2000, 1.0)
    b.meta_extra["host"] = {"cpu_count": 2, **host}
    return diagnose(load(b.write(tmp_path / "run")))


def test_on_one_allowed_core_waits_for_the_gil_are_waits_for_the_core(tmp_path):
    # taskset to one CPU: no two threads run at once with or without the GIL, so what
    # limits them is the core, and nothing that adds cores is offered
    pinned = _four_threads_waiting_for_the_gil(
        tmp_path / "pinned", cores_allowed=1.0, cpu_limit="affinity"
    )
    assert (pinned.primary["kind"], pinned.primary["subkind"]) == ("cpu", "python")
    assert not {"multiprocess", "multi_instance"} & {r.id for r in pinned.recommendations}
    # the same threads with both cores theirs: the GIL is what they wait for
    free = _four_threads_waiting_for_the_gil(tmp_path / "free")
    assert (free.primary["kind"], free.primary["subkind"]) == ("contention", "gil")
    assert "multiprocess" in {r.id for r in free.recommendations}
