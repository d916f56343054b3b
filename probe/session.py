"""The collection session: the one process-wide object of a run.

A ``Session`` owns the run directory writer, the span recorder and the samplers, and two
daemon threads: the stack sampler (``hz``, default 100) and the collector (a flush of
everything to the run directory every second, pymalloc's allocated blocks at
``resource_hz`` and, with ``--memory``, tracemalloc snapshots and gc counts by type every
``memory_interval_s``). The process tree and GPUs are sampled
by ``probe run``'s sidecar process (``probe.samplers.tree``), outside the target; with
``sample_tree=True`` the session samples them itself at ``resource_hz`` (the fallback when
no sidecar runs).
``start()``/``stop()`` bracket the target; ``stop()`` is safe to call from any exit path
and more than once.

After ``os.fork()`` the child stops recording into this session (its copies of our
buffers are emptied under the writer lock, so nothing is written twice) and, with
``follow_workers``, records itself into a shard of the run (``probe.workers``); its
resources are sampled with the rest of the process tree.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from probe import spans
from probe.errors import ProbeError
from probe.rundir.writer import RunWriter
from probe.samplers.gc_pauses import GcPauses
from probe.samplers.gil import SwitchInterval
from probe.samplers.heap import HeapSampler, malloc_in_use_reader
from probe.samplers.peek import TickPeek
from probe.samplers.stacks import StackSampler
from probe.samplers.thread_ends import ThreadEnds
from probe.samplers.ticker import Ticker, TickPacer
from probe.samplers.torch_windows import TorchWindowSettings
from probe.watchdog.limits import cgroup_cpu_throttling

if TYPE_CHECKING:
    from probe.samplers.memory import MemorySampler
    from probe.samplers.tasks import TaskSampler
    from probe.samplers.torch_windows import TorchWindows
    from probe.samplers.tree import TreeSampler

__all__ = ["Session", "Settings"]

# How long a stop waits for served requests still open to end: a response already sent
# ends its span within microseconds once its thread runs again, which under CPU
# contention can take a few scheduler slices (~10 ms); a request still being computed
# is not waited for past this.
_OPEN_REQUEST_GRACE_S = 0.2


@dataclass(frozen=True)
class Settings:
    hz: float = 100.0
    # The most of one core the stack sampler's ticks may take; where they cost more (a
    # tick's work grows with the threads that ran), it samples less often than ``hz``
    # (probe.samplers.ticker.TickPacer). 5%: what a one-thread service pays at 100 Hz
    # (W1's ticks, 2.2-4.4% of a core over three runs, 2026-11-27), so that no service
    # pays more for its samples than that; a 35-thread service's ticks took 13-15% of a
    # core at 100 Hz, and held the GIL for it (image_io_bound --fixed: 14% slower under
    # probe, median of 10, against plain runs alternated with them). 0: always ``hz``.
    sampler_share: float = 0.05
    resource_hz: float = 10.0
    memory: bool = False
    memory_interval_s: float = 5.0
    # tracemalloc traceback depth: on W1, 1 frame costs ~5x, 5 frames ~18x.
    memory_frames: int = 1
    flush_interval_s: float = 1.0
    # Flushes this often in the first second, then every flush_interval_s: with the
    # first at 1 s, a process killed (SIGKILL, the OOM killer) in its first second kept
    # nothing (7 of 30 kills before 1.07 s left no spans); with one at 0.2 s and the next
    # at 1.2 s, 6 kills in 98 still kept no span (benchmarks/kill_salvage.py).
    first_flush_s: float = 0.2
    gpu: bool = True
    log_spans: bool = False
    # The sampler thread needs the GIL to read stacks. With CPython's default 5 ms switch
    # interval it gets the GIL early at any GIL-releasing call (numpy, I/O) but waits 5 ms
    # while the target runs pure Python, so samples pile up at those calls: on
    # sample_services/tagging_cpu_bound.py its model stage is charged 2.9x its share at
    # 5 ms, 1.5x at 1 ms, 0.6x at 0.2 ms (benchmarks/sampling_bias.py). In effect while
    # the target's own threads do not contend for the GIL (probe.samplers.gil). 0 leaves
    # the target's own setting throughout. Kept where the stacks are read at the tick
    # too (probe.samplers.gil's docstring says why).
    switch_interval_s: float = 0.0001
    # torch.profiler windows once the target runs a forward pass (probe.samplers.
    # torch_windows); windows=0 takes none.
    torch_windows: TorchWindowSettings = TorchWindowSettings()
    # Served ASGI/WSGI apps wrapped in request spans as their server is imported
    # (probe.serving); False leaves every server as it is.
    http_spans: bool = True
    # Child processes (server workers, process pools) each record a shard of the run
    # (probe.workers); False: the root process only.
    follow_workers: bool = True
    # Not collection: the latency a served app's p99 must stay within (probe run --sla),
    # kept with the run's settings for its analysis (analyzers.capacity) and re-analyses.
    sla_s: float | None = None


class Session:
    """Collection for one run; see the module docstring."""

    def __init__(
        self,
        run_dir: Path,
        settings: Settings,
        *,
        meta: dict[str, Any],
        stack_sampler: StackSampler | None = None,
        tree_sampler: TreeSampler | None = None,
        memory_sampler: MemorySampler | None = None,
        heap_sampler: HeapSampler | None = None,
        sample_tree: bool = False,
        clock: Any = time.perf_counter_ns,
        top_dir: Path | None = None,
        cpu_throttling: Callable[[], dict[str, float] | None] = cgroup_cpu_throttling,
    ) -> None:
        self.run_dir = run_dir
        # the run directory whose workers/ folder holds the shards: this one, or for a
        # worker's shard session the run it belongs to
        self.top_dir = top_dir if top_dir is not None else run_dir
        self.settings = settings
        self.meta = meta
        self._clock = clock
        self.writer = RunWriter(run_dir)
        self._write_lock = threading.Lock()
        self.recorder = spans.SpanRecorder()
        # the tick's reads are timed on CLOCK_MONOTONIC: perf_counter_ns's clock on Linux
        peek = TickPeek() if clock is time.perf_counter_ns else None
        self.stacks = stack_sampler or StackSampler(
            clock=clock, peek=peek, thread_ends=ThreadEnds(clock=clock)
        )
        if tree_sampler is None and sample_tree:
            from probe.samplers.tree import TreeSampler  # psutil: only when sampled here

            tree_sampler = TreeSampler(os.getpid(), gpu=settings.gpu, clock=clock)
        self.tree = tree_sampler
        self.memory = None
        if settings.memory:  # tracemalloc and pickle imported only for --memory
            from probe.samplers.memory import MemorySampler

            self.memory = memory_sampler or MemorySampler(
                clock=clock, frames=settings.memory_frames
            )
        self.heap = heap_sampler or HeapSampler(clock=clock, malloc_in_use=malloc_in_use_reader())
        self.gc_pauses = GcPauses(clock=clock)
        self.tasks: TaskSampler | None = None  # once the target imports asyncio
        self.torch: TorchWindows | None = None  # once the target imports torch
        self._monotonic_start = 0.0
        self._known_threads: set[int] = set()  # thread ids (OS TIDs)
        # probe's own threads in the target (OS TIDs): the process's other threads that
        # are not Python's are the libraries' native ones (``analyzers.intra_op``)
        self._own_tids: set[int] = set()
        self.switch: SwitchInterval | None = None  # set at start, from the target's own
        share = settings.sampler_share
        pacer = TickPacer(1.0 / settings.hz, share) if share > 0 else None
        self._stack_ticker = Ticker(
            "probe-stack-sampler",
            1.0 / settings.hz,
            self._sample_stacks,
            pacer=pacer,
            waiter=self.stacks if self.stacks.peek is not None else None,
            excluded=self.gc_pauses.collected_here_s,
        )
        # the live heap at the resource cadence: the leak verdict fits its trend in halves
        # of a few-second run beside the RSS series, which the sidecar reads at that rate
        collect_every = min(settings.flush_interval_s, 1.0 / settings.resource_hz)
        if self.memory is not None:
            collect_every = min(collect_every, settings.memory_interval_s)
        self._collector = Ticker("probe-collector", collect_every, self._collect)
        self._last_flush = 0
        self._started_ns = 0
        self._last_memory = 0
        self._started = False
        self._full_collection: dict[str, Any] | None = None
        self._stopped = False
        self._forked_child = False
        self._saved_switch_interval = sys.getswitchinterval()
        # the CPU quota's throttling counters (a container's CPU limit), read at the start
        # and the end: what the kernel held the run back by, for the verdict to say
        self._cpu_throttling = cpu_throttling
        self._throttling_at_start: dict[str, float] | None = None

    # -- lifecycle ---------------------------------------------------------------------
    def start(self) -> None:
        if self.tree is not None:
            self.meta["gpus"] = self.tree.start()
        self.meta["settings"] = asdict(self.settings)
        self.writer.write_meta(self.meta)
        if self.memory is not None:
            self.memory.start()
        self._saved_switch_interval = sys.getswitchinterval()
        self._throttling_at_start = self._cpu_throttling()
        if self.settings.switch_interval_s > 0:
            self.switch = SwitchInterval(
                self.settings.switch_interval_s, self._saved_switch_interval
            )
            self.switch.start()
        spans.activate(self.recorder)
        if self.settings.log_spans:
            spans.log_spans(True)
        if self.settings.http_spans:
            from probe import serving

            serving.install()
        if self.settings.follow_workers:
            from probe import workers

            workers.follow(self)
        self._last_flush = self._last_memory = self._started_ns = self._clock()
        self._monotonic_start = time.monotonic()
        if self.stacks.thread_ends is not None:
            self.stacks.thread_ends.install()
        self.gc_pauses.install()
        self._collector.start()
        self._stack_ticker.start()
        self.stacks.exclude.update(
            i for i in (self._stack_ticker.ident, self._collector.ident) if i is not None
        )
        self._note_own_threads()
        os.register_at_fork(
            before=self._before_fork,
            after_in_parent=self._after_fork_parent,
            after_in_child=self._after_fork_child,
        )
        self._started = True

    def _sample_stacks(self) -> None:
        self.stacks.sample()
        if self.switch is not None:
            self.switch.tick(self.stacks.gil_waiters > 0)
        if self.tasks is None and "asyncio" in sys.modules:
            # only once the target has imported asyncio: importing it for the target
            # would change what it loads (and cost it ~10 ms)
            from probe.samplers.tasks import TaskSampler

            self.tasks = TaskSampler(
                stack_of=self.stacks.await_stack_id,
                thread_of=self.stacks.thread_id_of,
                clock=self._clock,
                excluded=self.gc_pauses.collected_here_s,
            )
        if self.tasks is not None:
            self.tasks.sample(self.stacks.last_ns)
        if self.torch is None and "torch" in sys.modules and self.settings.torch_windows.windows:
            self._start_torch_windows()

    def _start_torch_windows(self) -> None:
        # on the sampler's thread: its first forward pass comes after the import, and the
        # windows' thread imports torch.profiler only when a window opens
        from probe.samplers.torch_windows import TorchWindows

        self.torch = TorchWindows(
            self.run_dir,
            self.settings.torch_windows,
            exclude=self.stacks.exclude,
            origin=self._monotonic_start,
        )
        self.torch.start()
        if self.torch.ident is not None:
            self.stacks.exclude.add(self.torch.ident)
            self._note_own_threads()

    def _note_own_threads(self) -> None:
        """The OS TIDs of the threads the sampler leaves out as probe's, while they run."""
        exclude = self.stacks.exclude
        self._own_tids.update(
            t.native_id
            for t in threading.enumerate()
            if t.ident in exclude and t.native_id is not None
        )

    @property
    def stopped(self) -> bool:
        return self._stopped

    def stop(
        self, *, exit_status: int | None, ended_by: str, extra: dict[str, Any] | None = None
    ) -> dict[str, Any]:
        """Stop collecting, write everything, finish meta.json; returns the final meta."""
        if self._stopped or self._forked_child:
            return self.meta
        self._stopped = True
        if self.torch is not None:
            self.torch.stop()  # an open window is closed and written while spans still run
        if self.settings.http_spans:
            from probe.serving.routes import wait_for_open_requests

            wait_for_open_requests(_OPEN_REQUEST_GRACE_S)
        spans.activate(None)
        if self.settings.http_spans:
            from probe import serving

            serving.uninstall()  # servers imported from now on are left as they are
        self._stack_ticker.stop()
        self._collector.stop()
        sys.setswitchinterval(self._saved_switch_interval)
        self.stacks.sample()  # close every thread's last interval
        if self.stacks.thread_ends is not None:
            self.stacks.thread_ends.uninstall()
        self.stacks.close()
        if self.tree is not None:
            self.tree.sample()
        if self.memory is not None:
            self.memory.sample()  # the last snapshot: what was still held at the end
        self.gc_pauses.uninstall()  # the census and the collection below are probe's
        # with --memory, types are counted once more beside the last snapshot, always: the
        # growth from the first count to the last spans the run. Skipping a count under a
        # second old (as before) lost the run's last 10 of 30 entries in a CI run whose
        # snapshot fell behind its loop. (At stop the target's threads may still run: the
        # hazard of _collect, accepted with --memory as it always was.)
        self.heap.sample(count_types=self.memory is not None, force=True)
        # after the census above: what a full collection frees (the leak verdict's witness)
        self._full_collection = self.heap.full_collection()
        try:
            self._flush()
        except OSError as e:  # disk full, directory removed: still finish meta.json
            self.meta.setdefault("notes", []).append(f"last flush failed: {e}")
        if self.memory is not None:
            self.memory.stop()
        self.meta.update(extra or {})
        self.meta["end_unix_ns"] = time.time_ns()
        self.meta["end"] = _iso(self.meta["end_unix_ns"])
        self.meta["duration_s"] = round(
            (self.meta["end_unix_ns"] - self.meta["start_unix_ns"]) / 1e9, 6
        )
        self.meta["exit"] = {"status": exit_status, "ended_by": ended_by}
        throttled = _throttled_since(self._throttling_at_start, self._cpu_throttling())
        if throttled is not None:
            self.meta["cpu_throttling"] = throttled
        self.meta["collector"] = self._collector_figures()
        with self._write_lock:
            self.writer.close()
            try:
                self.writer.write_meta(self.meta)
            except OSError as e:
                raise ProbeError(f"{self.run_dir}: could not write meta.json ({e})") from None
        return self.meta

    def _collector_figures(self) -> dict[str, Any]:
        cpu = {t.name: t.cpu_s for t in (self._stack_ticker, self._collector)}
        figures: dict[str, Any] = {
            "stack_ticks": self.stacks.ticks,
            # how far the sampler's own cost spaced its ticks out (Settings.sampler_share)
            "stack_pacing": pacer.figures() if (pacer := self._stack_ticker.pacer) else None,
            "distinct_stacks": self.stacks.distinct_stacks,
            "rows_written": dict(self.writer.rows_written),
            "sampler_errors": self._stack_ticker.errors + self._collector.errors,
            "collector_cpu_s": cpu,
            "own_tids": sorted(self._own_tids),
            "heap_type_counts": self.heap.counted,
            "heap_type_count_s": round(self.heap.count_cost_s, 4),
            "full_collection_at_end": self._full_collection,
            "kernel_states": {
                "reads": self.stacks.kernel.reads,
                "skipped": self.stacks.kernel_reads_skipped,
                "stale": self.stacks.kernel_states_stale,
                "at_tick": self.stacks.kernel_states_at_tick,
                "unavailable": self.stacks.kernel.unavailable,
            },
            # threads' own readings at their ends (probe.samplers.thread_ends): rows of
            # the CPU since their last tick; those never read, counted in no stack
            "thread_ends": {
                "tails": self.stacks.ended_tails,
                "unseen_threads": self.stacks.unseen_threads,
                # their CPU, in stacks drawn from the threads like them that were read
                "unseen_cpu_s": round(self.stacks.unseen_placed_ns / 1e9, 4),
                # CPU of ended threads placed in no stack (none like them read yet)
                "unplaced_cpu_s": round(self.stacks.unplaced_ns / 1e9, 4),
            },
            # where empty, samples.queued_ns holds each interval's wait for a CPU
            "run_queue_unavailable": self.stacks.run_queue.unavailable,
            # threads that ran but were not read that tick (the budget spent): their
            # wait is credited at a later reading
            "run_queue_reads_skipped": self.stacks.run_queue_reads_skipped,
            # stacks read at the tick's instant / read there but not checked out (read
            # with the GIL instead); None where the tick's reads are not available
            "stacks_at_tick": (
                {
                    "read": peek.read,
                    "refused": peek.refused,
                    # threads that ended between the tick and the GIL: rows from the tick
                    "ended": self.stacks.ended_at_tick,
                    # threads born since the tick before, read at the tick
                    "born": peek.born,
                    # read at the tick with no Python frame: read with the GIL instead
                    "frameless": peek.frameless,
                }
                if (peek := self.stacks.peek) is not None
                else None
            ),
        }
        if self.switch is not None:
            figures["switch_interval"] = self.switch.figures()
        if self.torch is not None:
            figures["torch"] = self.torch.figures()
        if self.settings.http_spans:
            from probe.serving import hooks

            figures["http_spans"] = {
                "servers": list(hooks.patched),
                "failures": hooks.failures,
                "limits": hooks.limits,
                "notes": hooks.notes,
                "unrecognised": [m for m in hooks.UNRECOGNISED if m in sys.modules],
            }
        if self.tree is not None:
            figures.update(self.tree.stop())
        return figures

    # -- collector thread --------------------------------------------------------------
    def _collect(self) -> None:
        if self.tree is not None:
            self.tree.sample()
        now = self._clock()
        snapshot_due = self.memory is not None and _due(
            now, self._last_memory, self.settings.memory_interval_s
        )
        # types are counted only with --memory, at its snapshots: gc.get_objects() from this
        # thread can hand the target a tuple still under construction with a second
        # reference, and CPython's tuple(generator) then fails ("SystemError: bad argument
        # to internal function", seen in CI on the tagging sample)
        self.heap.sample(count_types=snapshot_due)
        if snapshot_due and self.memory is not None:
            self._last_memory = now
            self.memory.sample()
        early = now - self._started_ns < 1e9
        interval = self.settings.first_flush_s if early else self.settings.flush_interval_s
        if _due(now, self._last_flush, min(interval, self.settings.flush_interval_s)):
            self._last_flush = now
            self._flush()

    def _flush(self) -> None:
        with self._write_lock:
            if self._forked_child:
                return
            threads: list[Any] = []
            for buf, records in self.recorder.drain():
                tid = buf.native_id if buf.native_id is not None else buf.ident
                if tid not in self._known_threads:
                    self._known_threads.add(tid)
                    threads.append((tid, buf.ident, buf.thread_name, records[0][4]))
                # The recorder's tuples as they are: one encode per thread and second
                # (compiled where it is built: probe.spans.encode_batch).
                line = spans.encode_batch(tid, records)
                if line is not None:
                    self.writer.append_line("spans", line, len(records))
                else:
                    self.writer.append("spans", records, prefix=(tid,))
            sources = [self.stacks.drain(), self.heap.drain(), self.gc_pauses.drain()]
            if self.tasks is not None:
                sources.append(self.tasks.drain())
            if self.tree is not None:
                sources.append(self.tree.drain())
            if self.memory is not None:
                sources.append(self.memory.drain())
            for source in sources:
                for table, rows in source.items():
                    if table == "threads":
                        rows = [r for r in rows if r[0] not in self._known_threads]
                        self._known_threads.update(r[0] for r in rows)
                        threads.extend(rows)
                    else:
                        self.writer.append(table, rows)
            self.writer.append("threads", threads)
            self.writer.flush()

    # -- fork safety -------------------------------------------------------------------
    def _before_fork(self) -> None:
        if self._started and not self._stopped:
            self._write_lock.acquire()
            self.writer.flush()

    def _after_fork_parent(self) -> None:
        if self._started and not self._stopped and self._write_lock.locked():
            self._write_lock.release()

    def _after_fork_child(self) -> None:
        # _forked_child: a session of an ancestor, already left behind in this lineage
        if not self._started or self._stopped or self._forked_child:
            return
        self._forked_child = True
        spans.activate(None)
        self.gc_pauses.uninstall()  # the child's own session, if it has one, times its own
        if self.stacks.thread_ends is not None:
            self.stacks.thread_ends.uninstall()  # no sampler here takes them
        self.writer._files.clear()  # emptied by the pre-fork flush; the parent owns them
        self._write_lock = threading.Lock()
        if self.settings.follow_workers:
            from probe import workers

            workers.start_after_fork(self)


def _due(now_ns: int, last_ns: int, interval_s: float) -> bool:
    # Ticks jitter by a few ms around their schedule: a strict `>= interval` skips every
    # other one when the tick and the interval are equal (a 0.5 s snapshot every 1 s).
    return now_ns - last_ns >= interval_s * 0.9e9


def _throttled_since(
    start: dict[str, float] | None, end: dict[str, float] | None
) -> dict[str, float] | None:
    """The CPU quota's throttling over the run: the counters' growth from ``start`` to
    ``end`` (``limits.cgroup_cpu_throttling``); None where either was not read."""
    if start is None or end is None:
        return None
    grown = {key: max(0.0, end[key] - start.get(key, 0.0)) for key in end}
    return {k: round(v, 6) if k == "throttled_s" else int(v) for k, v in grown.items()}


def _iso(unix_ns: int) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(unix_ns / 1e9)) + (
        f".{unix_ns % 1_000_000_000 // 1000:06d}Z"
    )
