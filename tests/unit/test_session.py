"""The collection session: lifecycle, meta.json, and the collector's schedule."""

from __future__ import annotations

import pytest

import probe
from probe.rundir import SCHEMA_NAME, SCHEMA_VERSION, load
from probe.rundir.writer import prepare_run_dir
from probe.session import Session, Settings, _due


class FakeTree:
    def __init__(self):
        self.samples = 0

    def start(self):
        return {"available": False, "reason": "fake: no GPU"}

    def sample(self):
        self.samples += 1

    def drain(self):
        return {"system": [(self.samples, 1.0, 2, 3, 4)]}

    def stop(self):
        return {"peak_rss_bytes": 123}


def test_session_records_spans_tree_and_finishes_meta(tmp_path):
    run_dir = prepare_run_dir(tmp_path / "run")
    meta = {"schema": SCHEMA_NAME, "schema_version": SCHEMA_VERSION, "start_unix_ns": 0}
    tree = FakeTree()
    session = Session(run_dir, Settings(hz=200, resource_hz=50), meta=meta, tree_sampler=tree)
    session.start()
    with probe.request(id="r1"), probe.stage("work"):
        sum(range(10_000))
    final = session.stop(exit_status=0, ended_by="completed")
    assert final["exit"] == {"status": 0, "ended_by": "completed"}
    assert final["gpus"]["reason"] == "fake: no GPU"
    assert final["collector"]["peak_rss_bytes"] == 123
    assert session.stop(exit_status=1, ended_by="again") is final  # idempotent
    run = load(run_dir)
    assert set(run.spans["name"]) == {"request", "work"}
    assert set(run.spans["request_id"]) == {"r1"}
    assert not run.system.empty and tree.samples >= 1
    assert run.threads["thread_id"].is_unique


def test_a_jittered_tick_is_still_due():
    interval = 0.5
    assert _due(now_ns=int(0.499e9), last_ns=0, interval_s=interval)  # tick came 1 ms early
    assert not _due(now_ns=int(0.25e9), last_ns=0, interval_s=interval)


def test_the_target_s_switch_interval_comes_back_and_its_governing_is_recorded(tmp_path):
    import sys

    run_dir = prepare_run_dir(tmp_path / "run")
    meta = {"schema": SCHEMA_NAME, "schema_version": SCHEMA_VERSION, "start_unix_ns": 0}
    own = sys.getswitchinterval()
    session = Session(run_dir, Settings(hz=200), meta=meta, tree_sampler=FakeTree())
    session.start()
    short = sys.getswitchinterval()
    final = session.stop(exit_status=0, ended_by="completed")
    assert short == pytest.approx(Settings().switch_interval_s)
    assert sys.getswitchinterval() == own
    figures = final["collector"]["switch_interval"]
    assert figures["short_s"] == Settings().switch_interval_s
    assert figures["contended_s"] == min(own, 0.001)


def test_the_cpu_quota_s_throttling_over_the_run_is_what_the_counters_grew_by(tmp_path):
    readings = iter(
        [
            {"periods": 100.0, "throttled_periods": 10.0, "throttled_s": 1.0},
            {"periods": 130.0, "throttled_periods": 22.0, "throttled_s": 1.75},
        ]
    )
    run_dir = prepare_run_dir(tmp_path / "run")
    meta = {"schema": SCHEMA_NAME, "schema_version": SCHEMA_VERSION, "start_unix_ns": 0}
    session = Session(
        run_dir,
        Settings(),
        meta=meta,
        tree_sampler=FakeTree(),
        cpu_throttling=lambda: next(readings),
    )
    session.start()
    final = session.stop(exit_status=0, ended_by="completed")
    assert final["cpu_throttling"] == {"periods": 30, "throttled_periods": 12, "throttled_s": 0.75}
    load(run_dir)  # meta.json with it still reads


def test_no_quota_leaves_no_throttling_in_meta(tmp_path):
    run_dir = prepare_run_dir(tmp_path / "run")
    meta = {"schema": SCHEMA_NAME, "schema_version": SCHEMA_VERSION, "start_unix_ns": 0}
    session = Session(
        run_dir, Settings(), meta=meta, tree_sampler=FakeTree(), cpu_throttling=lambda: None
    )
    session.start()
    assert "cpu_throttling" not in session.stop(exit_status=0, ended_by="completed")
