"""What the attribution tracker names, and that it never disturbs the service's threads."""

from __future__ import annotations

import functools
import sys
import threading
import time
import tracemalloc
from pathlib import Path
from types import ModuleType

from probe.watchdog import attribution
from probe.watchdog.attribution import SiteTracker, held_containers, live_by_traceback


class Proxy:
    """Like a context-local proxy: touching its attributes outside a context raises."""

    @property
    def __dict__(self):  # type: ignore[override]
        raise RuntimeError("working outside of a request context")


def service_module() -> ModuleType:
    class Service:  # defined here: reachable from the service's module only
        memo: dict[str, int] = {}

        def __init__(self) -> None:
            self.cache = {f"k{i}": i for i in range(1500)}
            self.small = [1, 2, 3]

    mod = ModuleType("svc_under_test")
    mod._CACHE = {i: str(i) for i in range(2000)}  # type: ignore[attr-defined]
    mod.LOG = list(range(50))  # type: ignore[attr-defined]
    mod.service = Service()  # type: ignore[attr-defined]
    mod.Service = Service  # type: ignore[attr-defined]
    Service.memo.update({str(i): i for i in range(1200)})
    mod.registry = {"sessions": set(range(3000)), "tiny": {}}  # type: ignore[attr-defined]

    @functools.cache
    def score(x: int) -> int:
        return x * 2

    for i in range(1100):
        score(i)
    mod.score = score  # type: ignore[attr-defined]
    mod.request = Proxy()  # type: ignore[attr-defined]
    return mod


def test_large_containers_are_named_by_the_path_that_holds_them(monkeypatch):
    monkeypatch.setitem(sys.modules, "svc_under_test", service_module())
    found = {k: v for k, v in held_containers(1000).items() if k.startswith("svc_under_test.")}
    assert found == {
        "svc_under_test._CACHE": ["dict", 2000],
        "svc_under_test.service.cache": ["dict", 1500],
        "svc_under_test.Service.memo": ["dict", 1200],
        "svc_under_test.registry[sessions]": ["set", 3000],
        "svc_under_test.score": ["lru_cache", 1100],
    }


def test_snapshots_from_another_thread_never_break_a_tuple_being_built():
    """gc.get_objects() from a second thread handed CPython's tuple(generator) a second
    reference to the tuple it was resizing (SystemError in the service: 17 in 3 s when
    measured); the tracker's snapshots must not."""
    errors: list[BaseException] = []
    done = threading.Event()

    def numbers(n: int):
        yield from range(n)

    def builder() -> None:
        while not done.is_set():
            try:
                for _ in range(200):
                    tuple(numbers(50))
            except SystemError as e:
                errors.append(e)

    heap = [list(range(10)) for _ in range(100_000)]  # a heap worth counting
    tracker = SiteTracker(frames=1)
    tracker.arm()
    thread = threading.Thread(target=builder)
    thread.start()
    try:
        end = time.monotonic() + 1.5
        while time.monotonic() < end:
            tracker.snapshot()
            tracker.census()  # another thread runs: the gc is not counted
    finally:
        done.set()
        thread.join()
        tracker.disarm()
    assert errors == [] and len(heap) == 100_000
    assert all(s["types"] == {} for s in tracker.snapshots())


def test_the_census_counts_types_when_no_other_thread_runs():
    tracker = SiteTracker()
    snap = tracker.census()
    assert snap["types"] and snap["types"].get("dict", 0) > 0


def _kept_rows(n: int) -> list[list[int]]:
    return [[i, i + 1] for i in range(n)]  # the one line these rows are allocated on


def test_tracing_stops_itself_once_its_tables_pass_their_bound_and_keeps_its_sites():
    tracker = SiteTracker(max_bookkeeping_bytes=2 * 2**20)
    tracker.arm()
    tracker.poll()  # the arming's baseline
    kept = _kept_rows(60_000)  # ~60,000 traces: some 3 MiB of tracemalloc's tables
    tracker.poll()
    try:
        assert not tracker.armed
        assert not tracemalloc.is_tracing()
        assert tracker.stopped_because is not None and "(its bound: 2 MiB)" in (
            tracker.stopped_because
        )
        assert tracker.tracing_state()["stopped_because"] == tracker.stopped_because
        baseline, last = tracker.snapshots()  # the baseline and the stop's last snapshot
        site = next(iter(last["sites"]))
        assert site.endswith(f"test_site_tracker.py:{_line_of('return [[i, i + 1]')}")
        assert last["sites"][site][1] >= 60_000 and len(kept) == 60_000
    finally:
        tracker.disarm()
    tracker.arm()  # a new arming starts with no reason to stop
    assert tracker.stopped_because is None
    tracker.disarm()


def test_under_its_bound_tracing_goes_on():
    tracker = SiteTracker(max_bookkeeping_bytes=64 * 2**20)
    tracker.arm()
    try:
        kept = _kept_rows(10_000)
        tracker.poll()
        assert tracker.armed and tracker.stopped_because is None and len(kept) == 10_000
    finally:
        tracker.disarm()


def test_traces_are_grouped_as_the_stdlib_groups_them(monkeypatch):
    tracemalloc.start(4)
    try:
        kept = _kept_rows(20_000)
        ours = live_by_traceback()
        # another Python's tracemalloc, without the private reader: the stdlib's grouping
        monkeypatch.setattr(attribution, "_TRACES_READER", None)
        theirs = live_by_traceback()
    finally:
        tracemalloc.stop()
    line = _line_of("return [[i, i + 1]")

    def rows(groups):
        return [(size, count) for frames, size, count in groups if frames[0][1] == line]

    assert len(kept) == 20_000
    assert rows(ours) == rows(theirs) and rows(ours)[0][1] >= 20_000
    assert [g[1] for g in ours] == sorted((g[1] for g in ours), reverse=True)


def _line_of(text: str) -> int:
    lines = Path(__file__).read_text().splitlines()
    return next(n for n, line in enumerate(lines, 1) if text in line)
