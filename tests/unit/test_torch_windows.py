"""torch.profiler windows' schedule, on a fake profiler: when they open, how many, what
meta.json says, and that a failure never reaches the target."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from probe.samplers.torch_windows import (
    TorchWindows,
    TorchWindowSettings,
    _experimental_config,
    _loaded_libtorch_cpu,
    a_forward_pass_is_running,
    python_threads_cpu_ns,
    tear_cupti_down_after_windows,
)


class FakeWindow:
    def __init__(self, log: list, clock) -> None:
        self.log, self.clock = log, clock
        log.append(("start", clock()))

    def save(self, path: Path) -> None:
        self.log.append(("save", self.clock(), path.name))
        path.write_text('{"traceEvents": []}')


def a_busy_target(_exclude) -> dict[int, int]:
    """The target's threads as one thread on a whole core: CPU as fast as the clock."""
    return {1: time.monotonic_ns()}


def windows(
    tmp_path, settings, *, forward_after: float = 0.0, start_window=None, target_cpu=a_busy_target
):
    log: list = []
    t0 = time.monotonic()
    w = TorchWindows(
        tmp_path,
        settings,
        exclude=set(),
        origin=t0,
        start_window=start_window or (lambda: FakeWindow(log, time.monotonic)),
        forward_seen=lambda _: time.monotonic() - t0 >= forward_after,
        target_cpu=target_cpu,
        poll_s=0.01,
    )
    return w, log


def test_windows_open_after_the_first_forward_pass_and_its_warm_up_and_stop_at_the_count(
    tmp_path,
):
    # a budget that spaces nothing: the spacing by cost has its own test below
    s = TorchWindowSettings(windows=2, window_s=0.05, warmup_s=0.1, every_s=0.15, budget=1.0)
    w, log = windows(tmp_path, s, forward_after=0.1)
    w.start()
    w._thread.join(5)
    assert not w._thread.is_alive()  # two windows taken: the thread ends by itself
    f = w.figures()
    assert f["forward_at_s"] >= 0.1
    first, second = f["windows"]
    ms = 0.001  # the figures are rounded to the millisecond
    assert first["start_s"] >= f["forward_at_s"] + 0.1 - ms  # after the warm-up
    assert second["start_s"] - first["start_s"] >= 0.15 - ms  # every_s apart
    assert [e["file"] for e in f["windows"]] == ["torch/window-1.json", "torch/window-2.json"]
    assert not first["cut"] and first["end_s"] - first["start_s"] >= 0.05 - ms
    assert (tmp_path / "torch" / "window-2.json").exists() and f["unavailable"] == ""
    assert [e[0] for e in log] == ["start", "save"] * 2


def test_the_run_s_end_closes_an_open_window_and_writes_it_marked_cut(tmp_path):
    s = TorchWindowSettings(windows=3, window_s=30.0, warmup_s=0.0, every_s=60.0)
    w, log = windows(tmp_path, s)
    w.start()
    for _ in range(500):
        if log:
            break
        time.sleep(0.01)
    w.stop()
    [window] = w.figures()["windows"]
    assert window["cut"] and window["end_s"] - window["start_s"] < 5
    assert (tmp_path / "torch" / "window-1.json").exists()


def test_a_run_with_no_forward_pass_takes_no_window_and_says_why(tmp_path):
    w, log = windows(tmp_path, TorchWindowSettings(), forward_after=1e9)
    w.start()
    time.sleep(0.05)
    w.stop()
    f = w.figures()
    assert f["windows"] == [] and f["forward_at_s"] is None and log == []
    assert "no nn.Module call" in f["unavailable"]
    assert not (tmp_path / "torch").exists()


def test_a_profiler_that_cannot_start_is_reported_not_raised(tmp_path):
    def refuse():
        raise RuntimeError("torch 2.0 cannot profile all threads")

    s = TorchWindowSettings(windows=2, window_s=0.01, warmup_s=0.0, every_s=0.01)
    w, _ = windows(tmp_path, s, start_window=refuse)
    w.start()
    w._thread.join(5)
    f = w.figures()
    assert f["windows"] == [] and "cannot profile all threads" in f["unavailable"]


def test_a_window_whose_file_was_not_written_is_reported_and_the_thread_ends(tmp_path):
    # torch's Kineto logs "Failed to open" and returns (a run directory removed mid-run):
    # no file, no exception from save; said in meta.json, nothing raised in probe's thread
    class Unwritten(FakeWindow):
        def save(self, path):
            self.log.append(("save", self.clock(), path.name))

    s = TorchWindowSettings(windows=2, window_s=0.01, warmup_s=0.0, every_s=0.01)
    w, _ = windows(tmp_path, s, start_window=lambda: Unwritten([], time.monotonic))
    w.start()
    w._thread.join(5)
    f = w.figures()
    assert not w._thread.is_alive() and f["windows"] == []
    assert f["unavailable"].startswith("window 1 could not be written")


def test_a_forward_pass_is_seen_in_another_thread_s_frames_inside_an_nn_module_call():
    # a function whose code claims torch's module file: a stand-in for nn.Module.__call__
    inside = threading.Event()
    leave = threading.Event()
    source = "def _call_impl(inside, leave):\n    inside.set()\n    leave.wait(5)\n"
    namespace: dict = {}
    exec(compile(source, "/site-packages/torch/nn/modules/module.py", "exec"), namespace)
    t = threading.Thread(target=namespace["_call_impl"], args=(inside, leave))
    assert not a_forward_pass_is_running(set())
    t.start()
    try:
        inside.wait(5)
        assert a_forward_pass_is_running(set())
        assert not a_forward_pass_is_running({t.ident})  # probe's own threads are skipped
    finally:
        leave.set()
        t.join()


def test_the_windows_never_cost_more_than_the_budget_of_the_time_since_the_first_opened(
    tmp_path,
):
    # closing a window stops the target (torch writes its events): 0.1 s here, with a
    # 0.05-s window, is 0.15 s of cost. At a 50% budget, a window opens only once the
    # windows before it and itself (counted at the last one's cost) are within half the
    # time since the first opened: the second 0.6 s after it (not 0.3 s: a run ending
    # just after it would have paid 0.3 s of 0.45), the third 0.9 s after it
    log: list = []

    class SlowToClose(FakeWindow):
        def save(self, path):
            time.sleep(0.1)
            super().save(path)

    s = TorchWindowSettings(windows=3, window_s=0.05, warmup_s=0.0, every_s=0.01, budget=0.5)
    w, _ = windows(tmp_path, s, start_window=lambda: SlowToClose(log, time.monotonic))
    w.start()
    w._thread.join(5)
    taken = w.figures()["windows"]
    assert len(taken) == 3 and all(t["stall_s"] == t["close_s"] >= 0.1 for t in taken)
    # holding a window is counted at the target's CPU in it (at most its wall length)
    held = [min(t["end_s"] - t["start_s"], t["target_cpu_s"]) for t in taken]
    costs = [t["open_s"] + h + t["close_s"] for t, h in zip(taken, held, strict=True)]
    opened = [t["start_s"] - t["open_s"] for t in taken]
    # every figure is rounded to the millisecond: a cost's four to 2 ms at most, 4 ms
    # once divided by the budget, the two instants 1.5 ms more (a sum of two: twice)
    assert opened[1] - opened[0] >= 2 * costs[0] / 0.5 - 0.0055
    assert opened[2] - opened[0] >= (costs[0] + 2 * costs[1]) / 0.5 - 0.011
    # and at each window's end the windows so far are within the budget of the run since
    for k in (1, 2):
        ended = opened[k] + costs[k]
        assert sum(costs[: k + 1]) <= 0.5 * (ended - opened[0]) + 0.011


def test_a_closing_that_left_the_gil_free_stopped_the_target_for_none_of_it_yet_counts_whole(
    tmp_path,
):
    # probe._torchclose's closing: the target's threads ran on (stall_s 0), while it took
    # a core for close_s, which the budget counts as before (the target's own core on a
    # host with none to spare)
    log: list = []

    class OffTheGil(FakeWindow):
        closed_off_the_gil = False

        def save(self, path):
            time.sleep(0.1)
            super().save(path)
            self.closed_off_the_gil = True

    s = TorchWindowSettings(windows=2, window_s=0.05, warmup_s=0.0, every_s=0.01, budget=0.5)
    w, _ = windows(tmp_path, s, start_window=lambda: OffTheGil(log, time.monotonic))
    w.start()
    w._thread.join(5)
    first, second = w.figures()["windows"]
    assert first["stall_s"] == 0.0 and first["close_s"] >= 0.1
    held = min(first["end_s"] - first["start_s"], first["target_cpu_s"])
    cost = first["open_s"] + held + first["close_s"]
    opened = [t["start_s"] - t["open_s"] for t in (first, second)]
    assert opened[1] - opened[0] >= 2 * cost / 0.5 - 0.0055


def test_the_libtorch_cpu_a_process_loaded_is_found_in_its_maps_wherever_it_lies(tmp_path):
    maps = tmp_path / "maps"
    maps.write_text(
        "7f00-7f10 r--p 00000000 08:01 1 /usr/lib/x86_64-linux-gnu/libc.so.6\n"
        "7f20-7f30 r-xp 00001000 08:01 2 /opt/conda/lib/libtorch_cpu.so\n"
        "7f40-7f50 rw-p 00000000 00:00 0 \n"
    )
    assert _loaded_libtorch_cpu(str(maps)) == "/opt/conda/lib/libtorch_cpu.so"
    maps.write_text("7f00-7f10 r--p 00000000 08:01 1 /usr/lib/libc.so.6\n")
    assert _loaded_libtorch_cpu(str(maps)) is None  # torch not loaded: nothing to call
    assert _loaded_libtorch_cpu(str(tmp_path / "gone")) is None


def test_a_library_without_torch_s_profiler_functions_is_refused_with_the_one_missing():
    _torchclose = pytest.importorskip("probe._torchclose")
    maps = Path("/proc/self/maps").read_text().splitlines()
    libc = next("/" + ln.partition("/")[2] for ln in maps if "/libc.so" in ln)
    missing = _torchclose.resolve(libc)
    assert "disableProfiler" in missing
    assert "is not loaded" in _torchclose.resolve(str(Path("/nowhere/libtorch_cpu.so")))


def test_the_import_of_torch_s_module_file_is_not_a_forward_pass():
    # the file's top level runs while torch imports: a frame of the file, not a call
    inside, leave = threading.Event(), threading.Event()
    source = "inside.set()\nleave.wait(5)\n"
    code = compile(source, "/site-packages/torch/nn/modules/module.py", "exec")
    t = threading.Thread(target=exec, args=(code, {"inside": inside, "leave": leave}))
    t.start()
    try:
        inside.wait(5)
        assert not a_forward_pass_is_running(set())
    finally:
        leave.set()
        t.join()


class FakeRanges:
    """torch's range functions: what opened and closed, in order; fails on request."""

    def __init__(self, fail_on: str = "") -> None:
        self.events: list[tuple[str, str]] = []
        self.fail_on = fail_on

    def enter(self, name: str) -> str:
        if name.endswith(self.fail_on) and self.fail_on:
            raise RuntimeError("torch is shutting down")
        self.events.append(("open", name))
        return name

    def exit(self, handle: str) -> None:
        self.events.append(("close", handle))


class FakeNvtx:
    def __init__(self) -> None:
        self.depth = 0
        self.ranges: list[object] = []

    def get_event_attributes(self, message: str) -> str:
        return f"nvtx:{message}"

    def push_range(self, attrs: str) -> None:
        self.depth += 1

    def pop_range(self) -> None:
        self.depth -= 1

    def start_range(self, attrs: str) -> str:
        self.ranges.append(attrs)
        return attrs

    def end_range(self, handle: str) -> None:
        self.ranges.remove(handle)


def test_spans_open_and_close_torch_ranges_nested_under_the_window_s_prefix():
    from probe import spans
    from probe.rundir.schema import SPAN_RANGE_PREFIX
    from probe.samplers.torch_windows import SpanRanges

    fake = FakeRanges()
    previous = spans.set_range_domain(SpanRanges(None, enter=fake.enter, exit_=fake.exit))
    try:

        @spans.stage
        def infer() -> int:
            return 1

        with spans.request(id="r1"), spans.stage("preprocess"):
            infer()
    finally:
        spans.set_range_domain(previous)
    p = SPAN_RANGE_PREFIX
    assert fake.events == [
        ("open", p + "request"), ("open", p + "preprocess"), ("open", p + "infer"),
        ("close", p + "infer"), ("close", p + "preprocess"), ("close", p + "request"),
    ]  # fmt: skip


def test_a_span_that_outlives_the_window_or_predates_it_never_raises_nor_mispairs():
    from probe.samplers.torch_windows import SpanRanges

    fake = FakeRanges(fail_on="broken")
    ranges = SpanRanges(None, enter=fake.enter, exit_=fake.exit)
    ranges.pop_range()  # a span entered before the window closes inside it: nothing
    ranges.push_range(ranges.get_event_attributes(message="broken"))  # torch refuses
    ranges.push_range(ranges.get_event_attributes(message="outer"))
    ranges.pop_range()
    ranges.pop_range()  # the refused one: nothing to close
    assert [kind for kind, _ in fake.events] == ["open", "close"]
    # another thread's spans have their own stack
    seen: list[int] = []
    t = threading.Thread(target=lambda: (ranges.pop_range(), seen.append(len(fake.events))))
    t.start()
    t.join()
    assert seen == [2]


def test_the_domain_a_window_replaces_still_gets_every_range():
    from probe.samplers.torch_windows import SpanRanges

    fake, nvtx = FakeRanges(), FakeNvtx()
    ranges = SpanRanges(nvtx, enter=fake.enter, exit_=fake.exit)
    attrs = ranges.get_event_attributes(message="infer")
    ranges.push_range(attrs)
    assert nvtx.depth == 1
    handles = ranges.start_range(attrs)  # an async span
    assert nvtx.ranges == ["nvtx:infer"]
    ranges.end_range(handles)
    ranges.pop_range()
    assert nvtx.depth == 0 and nvtx.ranges == [] and len(fake.events) == 4


def test_a_window_stays_open_until_the_target_has_run_its_length_of_cpu(tmp_path):
    # the target's thread runs a quarter of a core (descheduled, or waiting on a lock): a
    # 0.05-s window holds 0.05 s of its CPU after ~0.2 s, not 0.0125 s after 0.05 s
    t0 = time.monotonic_ns()
    s = TorchWindowSettings(windows=1, window_s=0.05, warmup_s=0.0, every_s=1.0)
    w, _ = windows(tmp_path, s, target_cpu=lambda _: {7: (time.monotonic_ns() - t0) // 4})
    w.start()
    w._thread.join(5)
    [window] = w.figures()["windows"]
    assert not window["cut"] and window["target_cpu_s"] >= 0.05
    assert 0.15 <= window["end_s"] - window["start_s"] < 0.5


def test_a_target_that_never_runs_closes_its_windows_at_the_longest_wall_time_and_ends(
    tmp_path,
):
    # each window is short of the target's work and retried, but at most ``windows``
    # times: an idle service gets twice its windows, not windows without end
    s = TorchWindowSettings(
        windows=2, window_s=0.02, warmup_s=0.0, every_s=1.0, longest=5, retry_s=0.01
    )
    w, _ = windows(tmp_path, s, target_cpu=lambda _: {7: 123})
    w.start()
    w._thread.join(5)
    assert not w._thread.is_alive()
    taken = w.figures()["windows"]
    assert len(taken) == 4
    for window in taken:
        assert window["target_cpu_s"] == 0 and not window["cut"] and window["short_of_work"]
        assert 0.1 - 0.001 <= window["end_s"] - window["start_s"] < 0.3


def test_a_window_the_target_was_stalled_through_is_retried_soon_and_not_counted(tmp_path):
    # the target's thread runs nothing for 0.12 s (a host stall: its pages read back from
    # disk), then a whole core. The first window closes at its cap with none of its work;
    # the next opens retry_s after it, not every_s, and the budget (tiny here) does not
    # hold it back: no window of the target's work has been taken yet
    t0 = time.monotonic_ns()
    stall_ns = 120_000_000

    def stalled_then_busy(_exclude):
        return {7: max(0, time.monotonic_ns() - t0 - stall_ns)}

    s = TorchWindowSettings(
        windows=1, window_s=0.02, warmup_s=0.0, every_s=60.0, longest=5, retry_s=0.05,
        budget=0.001,
    )  # fmt: skip
    w, log = windows(tmp_path, s, target_cpu=stalled_then_busy)
    w.start()
    w._thread.join(5)
    assert not w._thread.is_alive()
    stalled, working = w.figures()["windows"]
    assert stalled["short_of_work"] and not working["short_of_work"]
    assert stalled["target_cpu_s"] < 0.01 and working["target_cpu_s"] >= 0.02
    assert 0.05 - 0.001 <= working["start_s"] - working["open_s"] - stalled["end_s"] < 1.0
    assert [f.name for f in sorted((tmp_path / "torch").iterdir())] == [
        "window-1.json",
        "window-2.json",
    ]
    assert [e[0] for e in log] == ["start", "save"] * 2


def test_a_window_whose_target_cpu_cannot_be_read_lasts_its_length(tmp_path):
    s = TorchWindowSettings(windows=1, window_s=0.05, warmup_s=0.0, every_s=1.0)
    w, _ = windows(tmp_path, s, target_cpu=lambda _: None)
    w.start()
    w._thread.join(5)
    [window] = w.figures()["windows"]
    assert window["target_cpu_s"] is None
    assert 0.05 - 0.001 <= window["end_s"] - window["start_s"] < 0.3


def test_the_target_s_cpu_is_its_python_threads_but_the_caller_s_and_probe_s():
    stop = threading.Event()

    def spin():
        while not stop.is_set():
            pass

    busy, skipped = threading.Thread(target=spin), threading.Thread(target=spin)
    busy.start(), skipped.start()
    try:
        before = python_threads_cpu_ns({skipped.ident})
        time.sleep(0.2)
        after = python_threads_cpu_ns({skipped.ident})
    finally:
        stop.set()
        busy.join(), skipped.join()
    assert before is not None and after is not None
    assert busy.native_id in after and skipped.native_id not in after
    assert threading.get_native_id() not in after  # the caller: probe's windows thread
    # two spinning threads share the GIL: the busy one gets a good part of 0.2 s
    assert 0.02 < (after[busy.native_id] - before[busy.native_id]) / 1e9 < 0.25


def test_cupti_is_torn_down_after_windows_on_cuda_12_6_and_later_unless_already_said():
    # Kineto leaves CUPTI attached by default: launches stayed ~20% slower after a window
    # on an H200 (tests/gpu_corpus/README.md); before CUDA 12.6 teardown crashed CUDA
    # graphs, and a user's or torch.compile's own setting stands
    env: dict[str, str] = {}
    assert tear_cupti_down_after_windows("13.0", env) and env == {"TEARDOWN_CUPTI": "1"}
    for version in ("12.4", None, "", "rocm"):
        env = {}
        assert not tear_cupti_down_after_windows(version, env) and env == {}
    env = {"TEARDOWN_CUPTI": "0"}
    assert not tear_cupti_down_after_windows("12.8", env) and env == {"TEARDOWN_CUPTI": "0"}


class _Config:
    """A stand-in for torch's ``_ExperimentalConfig``: keeps its keywords; one that
    predates ``trace_only`` refuses it as pybind refuses an unknown keyword."""

    def __init__(self, knows_trace_only: bool) -> None:
        self.knows_trace_only = knows_trace_only

    def __call__(self, **options: bool) -> dict[str, bool]:
        if "trace_only" in options and not self.knows_trace_only:
            raise TypeError("__init__(): incompatible constructor arguments")
        return options


def test_windows_ask_torch_for_the_trace_alone_and_every_thread():
    options = _experimental_config(_Config(knows_trace_only=True), trace_only=True)
    assert options == {"profile_all_threads": True, "trace_only": True}


def test_a_torch_without_trace_only_still_records_every_thread():
    options = _experimental_config(_Config(knows_trace_only=False), trace_only=True)
    assert options == {"profile_all_threads": True}


def test_trace_only_can_be_declined_for_a_comparison():
    options = _experimental_config(_Config(knows_trace_only=True), trace_only=False)
    assert options == {"profile_all_threads": True}
