"""torch.profiler windows during ``probe run``: the ops (with their input shapes), and the
CUDA kernels, copies and runtime calls when the target uses CUDA, for a few short windows
of a run that uses PyTorch.

Stack samples see a model as "native code in ``Block.forward``"; what fusion, a lower
precision, CUDA graphs or a KV cache would buy is read from the ops and kernels
(``analyzers.trace_diagnosis``). Recording every op of a whole run costs too much (each op
pays the profiler's callbacks; a long run's trace grows without bound), so the session
takes windows:

* **When.** Not during the import or the model's loading: the first window opens
  ``warmup_s`` after a thread of the target is first seen inside an ``nn.Module`` call
  (a forward pass), the next ones every ``every_s`` after the start of the one before,
  ``windows`` in all. A run with no module call gets no window, and says so.
* **How long.** Until the target's threads have run ``window_s`` of CPU in it (at
  least ``window_s``, at most ``longest`` times that in wall time); the run's end closes
  an open window early (a short run still gets its window, marked ``cut``). Counted in
  the target's CPU, not wall time, because a window holds what the target did in it:
  beside two CPU-bound processes, a 0.1-s window of ``decoder.py`` held 8,500-12,800 of
  its ops where an idle host gives 16,500-29,000, and a service idle between requests
  gave a window of almost nothing; sized in CPU, 20,500-27,200 (/tmp experiment,
  2026-11-27; ``benchmarks/torch_window_contention.py`` gives the ratio in one run).
  A target that runs less than a core is kept open longer for the same work; that costs
  little, since the profiler's cost is per op recorded, and the budget below counts a
  window's holding at the target's CPU in it. A window its wall cap closed with under
  half its length of the target's CPU (``short_of_work`` in meta.json: the target was
  idle, or the host stalled it) is kept but not counted: another opens ``retry_s`` after
  it, up to ``windows`` such in all. (It does not
  explain a rarer failure of the full suite: windows holding 70-111 of the target's ops
  while it ran its 0.1 s of CPU -- an unexplained slow or unrecorded stretch, open.)
* **At what cost.** Every op pays the profiler's callbacks while a window is open, and
  closing it takes a core while torch builds the window's events and writes them.
  Measured on ``tests/torch_corpus/decoder.py`` (torch 2.13, CPU, ~85,000 ops a
  second): a request took 1.5x as long inside a window, and closing a 0.1-s window took
  0.38 s (0.3-s window: 1.1 s; 31 MB of trace; ~20% less since torch is asked for the
  trace alone: ``_experimental_config``). Through torch's Python binding the closing
  holds the GIL, and the target stopped for all of it; ``probe._torchclose`` calls the
  same C++ functions with the GIL released, and the target runs on (on a host with a
  core to spare: the decoder's slowest requests beside 4 closings 29-41 ms against
  342-457 ms; ``benchmarks/torch_windows.py --close-ab`` repeats it).
  ``stall_s`` in meta.json is the part of ``close_s`` the target was stopped for. The
  windows' cost -- each one's opening, holding and closing (counted whole either way:
  it is a core's time, the target's own on a host with none to spare) -- is held to
  ``budget`` of the time since the first one opened, the next one counted at the last one's cost
  before it opens (and at least ``every_s`` after the last): the first window is taken
  whatever the run's length, and no later one unless the run has already paid for it.
  Counted from each window's own opening instead, the budget held only once the
  interval after it had run its course, and a run ending after its second window had
  paid 6-8% (the decoder's 1,000 requests, ~20 s: two windows, 0.55-0.8 s of stall
  each; ``benchmarks/torch_service_cost.py``). Each window's ``open_s`` and ``close_s``
  in meta.json say what opening and closing took.
* **Quietly.** The lines torch's profiler library prints on the target's stderr as probe
  opens and closes a window are kept back (``probe.samplers.kineto_stderr``).
* **Where.** ``torch/window-N.json`` in the run directory: a Kineto trace, as
  ``torch.profiler`` writes it (it opens in Perfetto and in ``probe analyze``).
* **Which threads.** All of them (``profile_all_threads``): a profiler started on
  probe's own thread would otherwise record that thread only, and a service's model runs
  on its main thread or a pool's. A torch without the option records nothing, and says
  why.
* **CUDA** is recorded only if the target has initialised it: probe never creates a
  CUDA context of its own. And CUPTI is torn down after each window
  (``TEARDOWN_CUPTI=1``, on CUDA 12.6 or later, unless the environment already says):
  left attached, as Kineto leaves it by default, its callbacks kept every kernel launch
  slower for the rest of the run -- a launch-bound BF16 encoder on an H200 (torch 2.11,
  CUDA 13.0: ``tests/gpu_corpus/gpu_service.py``) ran its ``infer`` stage at a median
  0.97 ms before its one window and 1.10-1.36 ms after it, where the stage of plain
  Python beside it did not move (pytorch/pytorch#144455: "slowed down training by
  roughly 10-20% even after completion"). Teardown crashed CUDA-graph programs before
  CUDA 12.6 (pytorch/pytorch#150957), hence the version gate.

Nothing here is imported, and no thread is started, unless the target imports torch.
"""

from __future__ import annotations

import os
import random
import sys
import threading
import time
from collections.abc import Callable, MutableMapping
from dataclasses import asdict
from pathlib import Path
from typing import Any, Protocol

from probe import spans
from probe.osthreads import begin_probes_thread
from probe.rundir.schema import MODULE_CALL_FILE, MODULE_CALLS, SPAN_RANGE_PREFIX
from probe.samplers.collection import collector_held_off
from probe.samplers.kineto_stderr import kinetos_lines_held_back
from probe.samplers.stacks import thread_cpu_ns
from probe.samplers.torch_window_settings import TorchWindowSettings

__all__ = [
    "SpanRanges",
    "TorchWindowSettings",
    "TorchWindows",
    "a_forward_pass_is_running",
    "python_threads_cpu_ns",
    "tear_cupti_down_after_windows",
]


class Window(Protocol):
    def save(self, path: Path) -> None:
        """Stop recording and write the window's Kineto trace to ``path``."""


def closes_off_the_gil(window: Window) -> bool:
    """Whether ``window.save`` let the target's Python threads run (``_KinetoWindow``
    through ``probe._torchclose``); a window without the attribute held the GIL."""
    return bool(getattr(window, "closed_off_the_gil", False))


class _KinetoWindow:
    """A window on torch's profiler calls underneath ``torch.profiler.profile``: that
    class's ``start()`` took ~1.3 s and its ``stop()`` parses every event into Python
    objects (1.2 s for a 0.3-s window of the decoder, with the GIL held), where these
    prepare and enable in ~1 ms and write the same Kineto JSON from C++."""

    def __init__(self, trace_only: bool = True) -> None:
        import torch
        from torch.autograd import _disable_profiler, _enable_profiler, _prepare_profiler
        from torch.autograd.profiler import ProfilerConfig, ProfilerState

        try:
            from torch._C._profiler import ProfilerActivity, _ExperimentalConfig

            every_thread = _experimental_config(_ExperimentalConfig, trace_only)
        except (ImportError, TypeError) as e:
            raise RuntimeError(
                f"torch {torch.__version__} cannot profile all threads ({e}): a window "
                "would record probe's own thread only"
            ) from None
        activities = {ProfilerActivity.CPU}
        if torch.cuda.is_available() and torch.cuda.is_initialized():
            activities.add(ProfilerActivity.CUDA)
            tear_cupti_down_after_windows(torch.version.cuda)
        # state, report_input_shapes, profile_memory, with_stack, with_flops,
        # with_modules, experimental_config
        config = ProfilerConfig(
            ProfilerState.KINETO, True, False, False, False, False, every_thread
        )
        with kinetos_lines_held_back():  # its ERROR line about the thread it runs on
            _prepare_profiler(config, activities)
        with kinetos_lines_held_back():
            _enable_profiler(config, activities)
        self._recording = True
        self.closed_off_the_gil = False
        self._disable = _disable_profiler
        self._spans_before = spans.range_domain()
        try:  # the profiler is on: whatever fails here must not leave it so
            spans.set_range_domain(SpanRanges(self._spans_before))
        except Exception:  # a torch without either range: the window, without spans
            pass

    def save(self, path: Path) -> None:
        # torch 2.13 answers a stop with no session running by a result whose save
        # dereferences a null trace (the target killed by SIGSEGV, through its binding as
        # through probe._torchclose), and none of its Python calls sees a session that
        # records every thread (``_profiler_enabled()`` reads False in one): so each
        # window stops the session it started, once
        if not self._recording:
            raise RuntimeError("this window is closed already")
        self._recording = False
        spans.set_range_domain(self._spans_before)
        close = _gil_free_close()
        with kinetos_lines_held_back():
            if close is None:
                self._disable().save(str(path))
            else:
                with _closing:
                    close(str(path))
        self.closed_off_the_gil = close is not None


# Held while a window closes without the GIL, and taken before the process forks: a
# fork meanwhile would leave the child torch's profiler state mid-stop, its locks held by
# a thread the child does not have (a child that opens a window would hang on them). A
# closing through torch's binding holds the GIL, which keeps the fork out already.
_closing = threading.Lock()
os.register_at_fork(
    before=_closing.acquire, after_in_parent=_closing.release, after_in_child=_closing.release
)


# probe._torchclose.close_window once it has found torch's functions; "" not tried yet;
# None where it cannot be used (not built, a torch without the symbols, switched off)
_gil_free: Callable[[str], None] | None | str = ""


def _gil_free_close() -> Callable[[str], None] | None:
    """What closes a window without the GIL: ``probe._torchclose`` (see its source),
    where it is built and finds torch's three functions in the libtorch_cpu this process
    loaded; None otherwise (torch's Python binding then closes it, holding the GIL), or
    where ``PROBE_TORCH_CLOSE_WITH_GIL=1`` asks for the binding. Measured on the decoder
    (``python benchmarks/torch_windows.py --close-ab``): see the module doc, **At what
    cost**."""
    global _gil_free
    if _gil_free == "":
        _gil_free = _resolve_gil_free_close()
    return _gil_free if callable(_gil_free) else None


def _resolve_gil_free_close() -> Callable[[str], None] | None:
    if os.environ.get("PROBE_TORCH_CLOSE_WITH_GIL", "") not in ("", "0"):
        return None
    try:
        from probe import _torchclose
    except ImportError:  # built without a C++ compiler
        return None
    library = _loaded_libtorch_cpu()
    if library is None or _torchclose.resolve(library):
        return None
    return _torchclose.close_window


def _loaded_libtorch_cpu(maps: str = "/proc/self/maps") -> str | None:
    """The path of the libtorch_cpu this process has loaded (torch's wheel keeps it in
    ``torch/lib``; a distribution's package may not): read from the process's maps."""
    try:
        with open(maps, encoding="utf-8", errors="replace") as f:
            for line in f:
                path = line.rstrip("\n").partition("/")[2]
                if path.endswith("/libtorch_cpu.so") or "/libtorch_cpu.so." in path:
                    return "/" + path
    except OSError:
        pass
    return None


def _experimental_config(config: Any, trace_only: bool) -> Any:
    """Every thread recorded; and, where torch has the option (``trace_only``: torch 2.13
    has it, one without raises TypeError), the closing builds the trace only, not the
    list of events ``events()`` would give, which probe never reads: the saved trace is
    the same, event for event and field for field (a /tmp comparison, 2026-12-06), and
    closing a 0.1-s window of the decoder stalled it ~20% less: 0.34-0.41 s (median 0.35)
    against 0.42-0.61 s (0.44), 0.022 against 0.028 s a MB of trace (8 windows each,
    alternated: ``python benchmarks/torch_windows.py --trace-only-ab``, 2026-12-06)."""
    if trace_only:
        try:
            return config(profile_all_threads=True, trace_only=True)
        except TypeError:  # a torch without the option
            pass
    return config(profile_all_threads=True)


class SpanRanges:
    """probe's spans as ``record_function`` ranges while a window is open (a range
    domain: ``probe.spans.set_range_domain``), so that the window's trace holds each
    ``@probe.stage`` / ``probe.span`` / request around the ops and kernels it launched:
    the trace diagnosis' span table then gives each stage its host time and the GPU
    time of its work (``analyzers.device_time``), which wall clocks cannot under async
    CUDA. The domain it replaces (NVTX's, under nsys) still gets every range.

    A range never raises into the target: torch failing to open one (its interpreter
    going down) loses that range. A span that opened before the window and closes in it
    pops nothing here; one that opens in it and closes after leaves its range open,
    ended when torch collects it (the window's trace has it cut or not at all)."""

    def __init__(
        self,
        inner: Any,
        *,
        enter: Callable[[str], Any] | None = None,
        exit_: Callable[[Any], None] | None = None,
    ) -> None:
        self._inner = inner
        self._local = threading.local()
        if enter is not None and exit_ is not None:  # tests pass fakes
            self._enter, self._exit = enter, exit_
        else:
            self._enter, self._exit = _torch_ranges()

    def get_event_attributes(self, message: str) -> tuple[str, Any]:
        inner = self._inner
        named = SPAN_RANGE_PREFIX + message  # the reader knows them by it (see schema)
        return named, inner.get_event_attributes(message=message) if inner else None

    def _open(self, name: str) -> Any:
        try:
            return self._enter(name)
        except Exception:
            return None

    def push_range(self, attrs: tuple[str, Any]) -> None:
        if self._inner is not None:
            self._inner.push_range(attrs[1])
        try:
            stack = self._local.stack
        except AttributeError:
            stack = self._local.stack = []
        stack.append(self._open(attrs[0]))

    def pop_range(self) -> None:
        stack = getattr(self._local, "stack", None)
        if stack:
            self._close(stack.pop())
        if self._inner is not None:
            self._inner.pop_range()

    def start_range(self, attrs: tuple[str, Any]) -> tuple[Any, Any]:
        inner = self._inner.start_range(attrs[1]) if self._inner is not None else None
        return inner, self._open(attrs[0])

    def end_range(self, handles: tuple[Any, Any]) -> None:
        self._close(handles[1])
        if self._inner is not None:
            self._inner.end_range(handles[0])

    def _close(self, handle: Any) -> None:
        if handle is not None:
            try:
                self._exit(handle)
            except Exception:
                pass


def _torch_ranges() -> tuple[Callable[[str], Any], Callable[[Any], None]]:
    """torch's own range: open one by name, close it by its handle."""
    # torch >= 2.2: a C++ range, +1.2 us a span under the profiler (SpanRanges' Python
    # included) against +13 us for record_function's own ops (torch 2.13, CPU:
    # benchmarks/span_ranges_cost.py); Kineto files it as a CPU op
    try:
        from torch._C._profiler import _RecordFunctionFast

        def enter(name: str) -> Any:
            handle = _RecordFunctionFast(name)
            handle.__enter__()
            return handle

        def exit_(handle: Any) -> None:
            handle.__exit__(None, None, None)

    except ImportError:  # record_function's own ops: ~13 us a span
        import torch

        enter_new = torch.ops.profiler._record_function_enter_new

        def enter(name: str) -> Any:
            return enter_new(name, None)

        exit_ = torch.ops.profiler._record_function_exit._RecordFunction
    return enter, exit_


def tear_cupti_down_after_windows(
    cuda_version: str | None, env: MutableMapping[str, str] = os.environ
) -> bool:
    """Ask Kineto to detach CUPTI when a window stops (the module doc, **CUDA**): sets
    ``TEARDOWN_CUPTI=1`` where the CUDA runtime is 12.6 or later and nobody has set the
    variable (a user's choice, or torch.compile's CUDA graphs setting it to 0, stands).
    Whether it was set by this call."""
    if "TEARDOWN_CUPTI" in env or not cuda_version:
        return False
    try:
        major, minor = (int(part) for part in cuda_version.split(".")[:2])
    except ValueError:
        return False
    if (major, minor) < (12, 6):
        return False
    env["TEARDOWN_CUPTI"] = "1"
    return True


def start_kineto_window(trace_only: bool = True) -> Window:
    """Every thread's ops with their input shapes (and CUDA's kernels, copies and runtime
    calls when the target initialised CUDA). Raises with the reason when it cannot.
    ``trace_only`` False: torch also builds its list of events as the window closes (a
    benchmark's comparison)."""
    try:
        return _KinetoWindow(trace_only)
    except (ImportError, AttributeError, TypeError) as e:
        raise RuntimeError(f"torch's profiler could not be started here ({e})") from None


def a_forward_pass_is_running(exclude: set[int]) -> bool:
    """Is any thread (not in ``exclude``) inside an ``nn.Module`` call now?"""
    with collector_held_off():  # a read of other threads' frames (see collection)
        frames = sys._current_frames()
        frames.pop(threading.get_ident(), None)
        f = None
        try:
            for ident, frame in frames.items():
                if ident in exclude:
                    continue
                f = frame
                while f is not None:
                    code = f.f_code
                    if code.co_name in MODULE_CALLS and code.co_filename.endswith(MODULE_CALL_FILE):
                        return True
                    f = f.f_back
            return False
        finally:
            del frames, f  # no frame outlives the read (see StackSampler._sample)


def python_threads_cpu_ns(exclude: set[int]) -> dict[int, int] | None:
    """The CPU time (ns, each thread's CPU clock: ``stacks.thread_cpu_ns``) of each Python
    thread of this process but the caller's and those in ``exclude`` (probe's own), by
    native thread id; None where no such thread's clock can be read (none left, or a
    kernel without Linux's per-thread clocks). Python threads, not every task: the
    model's thread runs Python; a native pool's threads may spin without the model
    moving."""
    me = threading.get_ident()
    cpu: dict[int, int] = {}
    for t in threading.enumerate():
        if t.ident in exclude or t.ident == me or t.native_id is None:
            continue
        ns = thread_cpu_ns(t.native_id)
        if ns is not None:  # None: the thread ended since the list was taken
            cpu[t.native_id] = ns
    return cpu or None


# A window is short of the target's work when its wall cap closed it with under this
# share of its length of the target's CPU: not what the target does, but a stretch it was
# idle or stalled in (a CI host stall: the decoder's main thread in kernel state D 3.7 s of
# 4 s, its window 5 ms of CPU at the cap, 0 of its ops -- 2026-12-03). A half, chosen: a
# target at a tenth of a core still fills its window by the cap (``longest``).
SHORT_OF_WORK = 0.5


def _short_of_work(target_cpu_s: float | None, window_s: float) -> bool:
    return target_cpu_s is not None and target_cpu_s < SHORT_OF_WORK * window_s


def _cpu_ran_s(before: dict[int, int], now: dict[int, int]) -> float:
    """CPU seconds the threads ran between two readings: a thread started since counts
    from zero; one that ended since counts nothing (its last reading is gone)."""
    return sum(ns - before.get(tid, 0) for tid, ns in now.items()) / 1e9


class TorchWindows:
    """Takes the windows on a thread of its own; see the module docstring. ``origin`` is
    ``clock()`` at the session's start: windows are placed in seconds from it."""

    def __init__(
        self,
        run_dir: Path,
        settings: TorchWindowSettings,
        *,
        exclude: set[int],
        origin: float,
        start_window: Callable[[], Window] = start_kineto_window,
        forward_seen: Callable[[set[int]], bool] = a_forward_pass_is_running,
        target_cpu: Callable[[set[int]], dict[int, int] | None] | None = None,
        clock: Callable[[], float] = time.monotonic,
        unix_clock: Callable[[], int] = time.time_ns,
        poll_s: float = 0.2,
    ) -> None:
        self.dir = run_dir / "torch"
        self.settings = settings
        self._exclude = exclude
        self._start_window, self._forward_seen = start_window, forward_seen
        self._target_cpu = target_cpu or python_threads_cpu_ns
        self._clock, self._poll_s = clock, poll_s
        self._unix_clock = unix_clock
        self._origin = origin
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.forward_at_s: float | None = None
        self.taken: list[dict[str, Any]] = []
        self.unavailable = ""

    @property
    def ident(self) -> int | None:
        return self._thread.ident if self._thread is not None else None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="probe-torch-windows", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 30.0) -> None:
        """Close an open window (written, marked cut) and end the thread."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)

    def _at(self) -> float:
        return round(self._clock() - self._origin, 3)

    def _run(self) -> None:
        begin_probes_thread()
        s = self.settings
        while self.forward_at_s is None:
            if self._forward_seen(self._exclude):
                self.forward_at_s = self._at()
            # at a random point of each poll period: polled every ``poll_s`` exactly, the
            # poll fell in the same phase of a periodic target's cycle each time -- after
            # the first, always where the target let the GIL go, in its sleep -- and saw
            # none of a service's 10-ms bursts of forward passes in 6 s (a burst every 40
            # ms: 0 polls of 20 inside one; at random points, 7 of 19; /tmp experiment)
            elif self._stop.wait(self._poll_s * random.uniform(0.5, 1.5)):
                return
        due = self._clock() + s.warmup_s
        first_opening: float | None = None  # of the first window that counted
        spent = 0.0  # the windows' cost so far: opening, holding and closing
        last_cost = 0.0  # the last counted window's: the next one's, before it opens
        counted = skipped = 0
        while counted < s.windows:
            if self._stop.wait(max(0.0, due - self._clock())):
                return
            n = counted + skipped + 1
            opening = self._clock()
            try:
                window = self._start_window()
            except Exception as e:  # never raised into the target: said in meta.json
                self.unavailable = str(e) or type(e).__name__
                return
            started = self._clock()
            cut, target_cpu_s = self._hold_open(started)
            path = self.dir / f"window-{n}.json"
            closing = self._clock()
            # on Kineto's clock (Unix time): a range ending after it was open at the stop
            closed_unix_ns = self._unix_clock()
            try:
                self.dir.mkdir(exist_ok=True)
                window.save(path)
                # Kineto reports a file it could not open on stderr, not by raising
                written = path.stat().st_size
            except Exception as e:
                self.unavailable = f"window {n} could not be written: {e}"
                return
            ended = self._clock()
            close_s = round(ended - closing, 3)
            short = not cut and _short_of_work(target_cpu_s, s.window_s)
            self.taken.append(
                {
                    "file": f"torch/{path.name}",
                    "start_s": round(started - self._origin, 3),
                    "end_s": round(closing - self._origin, 3),
                    "open_s": round(started - opening, 3),
                    "probe_tid": threading.get_native_id(),
                    "close_s": close_s,
                    # the target's Python threads stopped while it closed: all of it with
                    # the GIL held, none without (it still took close_s of a core)
                    "stall_s": 0.0 if closes_off_the_gil(window) else close_s,
                    "target_cpu_s": None if target_cpu_s is None else round(target_cpu_s, 3),
                    "closed_unix_ns": closed_unix_ns,
                    "cut": cut,
                    "short_of_work": short,
                    "bytes": written,
                }
            )
            if cut:
                return
            # holding a window costs the target per op recorded, so its CPU in the window,
            # not the wall time a target idle or stalled kept it open
            held = (
                closing - started if target_cpu_s is None else min(closing - started, target_cpu_s)
            )
            cost = (started - opening) + held + (ended - closing)
            spent += cost
            if short and skipped < s.windows:
                # not a window of the target's work: another, soon, in its place; at most
                # ``windows`` of them, so a target that never runs still ends its windows
                skipped += 1
                due = self._clock() + s.retry_s
                if first_opening is not None:
                    due = max(due, first_opening + (spent + last_cost) / s.budget)
                continue
            counted += 1
            last_cost = cost
            first_opening = opening if first_opening is None else first_opening
            due = max(opening + s.every_s, first_opening + (spent + cost) / s.budget)

    def _hold_open(self, started: float) -> tuple[bool, float | None]:
        """Keep a window open until the target's threads have run ``window_s`` of CPU in
        it, or ``longest`` times that has passed: (cut by the run's end, the CPU seconds
        they ran; None where the threads' CPU cannot be read, the window then lasting
        ``window_s``)."""
        s = self.settings
        before = self._target_cpu(self._exclude)
        latest = started + s.window_s * s.longest
        wait = s.window_s
        while True:
            cut = self._stop.wait(wait)
            now = self._target_cpu(self._exclude)
            ran = None if before is None or now is None else _cpu_ran_s(before, now)
            left = latest - self._clock()
            if cut or ran is None or ran >= s.window_s or left <= 0:
                return cut, ran
            # the CPU still owed takes at least that long in wall time
            wait = min(left, max(s.window_s - ran, 0.01))

    def figures(self) -> dict[str, Any]:
        """What meta.json says of the windows: when the first forward pass was seen, each
        window taken (file, start/end in seconds from the session's start, cut short by
        the run's end, size), and why none could be taken."""
        return {
            "settings": asdict(self.settings),
            "forward_at_s": self.forward_at_s,
            "windows": list(self.taken),
            "unavailable": self.unavailable
            or ("" if self.forward_at_s is not None else "no nn.Module call was seen"),
        }
