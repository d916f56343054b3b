"""A service that may use fewer cores than the host has -- pinned by ``taskset``, or held
by its cgroup's CPU quota (a container's CPU limit) -- is told so, and is never promised
the cores it cannot have. Truth from outside the process: the affinity the test set, and
the cgroup's own ``cpu.stat`` (the kernel's count of the periods it throttled it in)."""

from __future__ import annotations

import json
import os
import subprocess
import time
import uuid
from contextlib import contextmanager
from pathlib import Path

import pytest

from .conftest import REPO, probe_cmd

pytestmark = pytest.mark.integration

SAMPLE = REPO / "sample_services" / "tagging_cpu_bound.py"  # one busy core, pure Python
ADDS_CORES = {"multi_instance", "multiprocess"}


def _diagnosis(run_dir: Path) -> dict:
    return json.loads((run_dir / "diagnosis.json").read_text())


@pytest.mark.skipif(
    not hasattr(os, "sched_setaffinity") or len(os.sched_getaffinity(0)) < 2,
    reason="needs CPU affinity and two CPUs",
)
def test_a_service_pinned_to_one_core_is_not_told_to_run_one_instance_per_core(tmp_path):
    one = min(os.sched_getaffinity(0))

    def pinned() -> None:
        os.sched_setaffinity(0, {one})

    free = subprocess.run(
        probe_cmd("run", "-o", tmp_path / "free", SAMPLE, "--requests", "150"),
        capture_output=True, text=True, timeout=180,
    )  # fmt: skip
    done = subprocess.run(
        probe_cmd("run", "-o", tmp_path / "pinned", SAMPLE, "--requests", "150"),
        preexec_fn=pinned, capture_output=True, text=True, timeout=180,
    )  # fmt: skip
    assert free.returncode == 0 and done.returncode == 0, free.stderr + done.stderr
    # the same service with both cores its own: a second instance is worth it
    assert "multi_instance" in {r["id"] for r in _diagnosis(tmp_path / "free")["recommendations"]}
    d = _diagnosis(tmp_path / "pinned")
    assert (d["run"]["cores_allowed"], d["run"]["cpu_limit"]) == (1.0, "affinity")
    # the one busy thread on its one core, read as such (not "0.00": the niced sidecar may
    # not get the CPU to read it twice)
    assert 0.5 <= d["run"]["process_cores"] <= 1.05, d["run"]
    assert (d["primary"]["kind"], d["primary"]["subkind"]) == ("cpu", "python")
    assert not ADDS_CORES & {r["id"] for r in d["recommendations"]}, d["recommendations"]
    assert "of 1 core allowed (affinity) of" in done.stdout


@pytest.mark.skipif(
    not hasattr(os, "sched_setaffinity") or len(os.sched_getaffinity(0)) < 2,
    reason="needs CPU affinity and two CPUs",
)
def test_a_gil_bound_pool_pinned_to_one_core_is_cpu_bound_on_it_with_its_cpu_counted(tmp_path):
    # four pure-Python threads on one CPU: the core, not the GIL, is what they wait for,
    # and the niced sidecar may not read the busy process twice (it read "CPU 0.00")
    one = min(os.sched_getaffinity(0))
    pool = REPO / "tests" / "threads_corpus" / "services" / "tokenize_pool.py"
    done = subprocess.run(
        probe_cmd("run", "-o", tmp_path / "run", pool),
        preexec_fn=lambda: os.sched_setaffinity(0, {one}), capture_output=True, text=True,
        timeout=180,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    d = _diagnosis(tmp_path / "run")
    assert 0.5 <= d["run"]["process_cores"] <= 1.05, d["run"]
    assert d["primary"]["kind"] == "cpu", d["primary"]
    assert not ADDS_CORES & {r["id"] for r in d["recommendations"]}, d["recommendations"]


def _cpu_cgroup_base() -> tuple[Path, str] | None:
    """A cgroup folder this test may create a child in, with a CPU quota file: v1's cpu
    controller, or v2's root where the cpu controller is delegated; None otherwise."""
    if os.geteuid() != 0:
        return None
    for v1 in (Path("/sys/fs/cgroup/cpu"), Path("/sys/fs/cgroup/cpu,cpuacct")):
        if (v1 / "cpu.cfs_quota_us").exists() and os.access(v1, os.W_OK):
            return v1, "v1"
    v2 = Path("/sys/fs/cgroup")
    try:
        delegated = "cpu" in (v2 / "cgroup.subtree_control").read_text().split()
    except OSError:
        return None
    return (v2, "v2") if delegated and os.access(v2, os.W_OK) else None


@contextmanager
def cpu_quota_group(base: Path, version: str, quota_us: int, period_us: int = 100_000):
    """A fresh cgroup under ``base`` allowed ``quota_us`` of CPU each ``period_us``;
    removed on leaving, once the processes put in it have exited."""
    group = base / f"probe-test-{uuid.uuid4().hex[:8]}"
    group.mkdir()
    try:
        if version == "v1":
            (group / "cpu.cfs_period_us").write_text(str(period_us))
            (group / "cpu.cfs_quota_us").write_text(str(quota_us))
        else:
            (group / "cpu.max").write_text(f"{quota_us} {period_us}")
        yield group
    finally:
        for _ in range(50):
            try:
                group.rmdir()
                break
            except OSError:
                time.sleep(0.1)


@pytest.fixture
def half_a_core():
    """A fresh cgroup with a CPU quota of half a core; removed after the test."""
    found = _cpu_cgroup_base()
    if found is None:
        pytest.skip("needs root and a cgroup CPU controller this test may write")
    with cpu_quota_group(*found, quota_us=50_000) as group:
        yield group


def test_a_service_under_a_cgroup_cpu_quota_is_held_to_the_quota(tmp_path, half_a_core):
    def into_the_group() -> None:
        (half_a_core / "cgroup.procs").write_text(str(os.getpid()))

    done = subprocess.run(
        probe_cmd("run", "-o", tmp_path / "run", SAMPLE, "--requests", "100"),
        preexec_fn=into_the_group, capture_output=True, text=True, timeout=240,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    stat = dict(line.split() for line in (half_a_core / "cpu.stat").read_text().splitlines())
    assert int(stat["nr_throttled"]) > 0  # the kernel held the run to its quota
    d = _diagnosis(tmp_path / "run")
    assert (d["run"]["cores_allowed"], d["run"]["cpu_limit"]) == (0.5, "cgroup quota")
    assert not ADDS_CORES & {r["id"] for r in d["recommendations"]}, d["recommendations"]
    assert "of 0.5 cores allowed (cgroup quota) of" in done.stdout
    # and says the quota throttled it, by the kernel's own counters: those of the run
    # (the target's start to its end), within the group's since it was made
    meta = json.loads((tmp_path / "run" / "meta.json").read_text())
    run_throttled = meta["cpu_throttling"]["throttled_periods"]
    assert 0 < run_throttled <= int(stat["nr_throttled"]), (meta["cpu_throttling"], stat)
    assert d["run"]["cpu_throttled_share"] >= 0.25  # a one-core service under half a core
    assert "throttled by its CPU quota" in done.stdout
    # and probe's helpers, in the same group, left the target its quota: the finisher's
    # imports overlapping the run took it from the target on the other CPU (SCHED_IDLE
    # yields a core, not a shared quota): the target at 0.25-0.27 of its 0.5 cores, now
    # 0.44 (2026-11-27)
    assert d["run"]["process_cores"] >= 0.7 * 0.5, d["run"]
