"""The collection session: the one process-wide object of a run.

A ``Session`` owns the run directory writer, the span recorder and the samplers, and two
daemon threads: the stack sampler (``hz``, default 100) and the collector (resources and
GPU at ``resource_hz``, memory snapshots every ``memory_interval_s``, and a flush of
everything to the run directory at least every second). ``start()``/``stop()`` bracket
the target; ``stop()`` is safe to call from any exit path and more than once.

After ``os.fork()`` the child stops recording (its copies of our buffers are emptied
under the writer lock, so nothing is written twice); its resources are still sampled by
the parent as part of the process tree.
"""

from __future__ import annotations

import json
import os
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from probe import spans
from probe.rundir.writer import RunWriter
from probe.samplers import GpuSampler, MemorySampler, ResourceSampler, StackSampler, Ticker
from probe.samplers.stacks import thread_cpu_ns

__all__ = ["Session", "Settings"]


@dataclass(frozen=True)
class Settings:
    hz: float = 100.0
    resource_hz: float = 10.0
    memory: bool = False
    memory_interval_s: float = 5.0
    memory_frames: int = 5
    flush_interval_s: float = 1.0
    gpu: bool = True
    log_spans: bool = False


class Session:
    """Collection for one run; see the module docstring."""

    def __init__(
        self,
        run_dir: Path,
        settings: Settings,
        *,
        meta: dict[str, Any],
        stack_sampler: StackSampler | None = None,
        resource_sampler: ResourceSampler | None = None,
        gpu_sampler: GpuSampler | None = None,
        memory_sampler: MemorySampler | None = None,
        clock: Any = time.perf_counter_ns,
    ) -> None:
        self.run_dir = run_dir
        self.settings = settings
        self.meta = meta
        self._clock = clock
        self.writer = RunWriter(run_dir)
        self._write_lock = threading.Lock()
        self.recorder = spans.SpanRecorder()
        self.stacks = stack_sampler or StackSampler(clock=clock)
        self.resources = resource_sampler or ResourceSampler(clock=clock)
        self.gpu = gpu_sampler or GpuSampler(clock=clock, pids=self.resources.tree_pids)
        self.memory = (
            memory_sampler or MemorySampler(clock=clock, frames=settings.memory_frames)
            if settings.memory
            else None
        )
        self._known_threads: set[tuple[int, int | None]] = set()  # (ident, native id)
        self._stack_ticker = Ticker("probe-stack-sampler", 1.0 / settings.hz, self.stacks.sample)
        self._collector = Ticker("probe-collector", 1.0 / settings.resource_hz, self._collect)
        self._last_flush = 0
        self._last_memory = 0
        self._started = False
        self._stopped = False
        self._forked_child = False

    # -- lifecycle ---------------------------------------------------------------------
    def start(self) -> None:
        self.meta["gpus"] = (
            self.gpu.start()
            if self.settings.gpu
            else {"available": False, "reason": "disabled (--no-gpu)"}
        )
        self.meta["settings"] = asdict(self.settings)
        self.writer.write_meta(self.meta)
        if self.memory is not None:
            self.memory.start()
        spans.activate(self.recorder)
        if self.settings.log_spans:
            spans.log_spans(True)
        self._last_flush = self._last_memory = self._clock()
        self._collector.start()
        self._stack_ticker.start()
        self.stacks.exclude.update(
            i for i in (self._stack_ticker.ident, self._collector.ident) if i is not None
        )
        os.register_at_fork(
            before=self._before_fork,
            after_in_parent=self._after_fork_parent,
            after_in_child=self._after_fork_child,
        )
        self._started = True

    def stop(
        self, *, exit_status: int | None, ended_by: str, extra: dict[str, Any] | None = None
    ) -> dict[str, Any]:
        """Stop collecting, write everything, finish meta.json; returns the final meta."""
        if self._stopped or self._forked_child:
            return self.meta
        self._stopped = True
        spans.activate(None)
        self._stack_ticker.stop()
        self._collector.stop()
        self.stacks.sample()  # close every thread's last interval
        self.resources.sample()
        self._flush()
        if self.memory is not None:
            self.memory.stop()
        self.gpu.close()
        self.meta.update(extra or {})
        self.meta["end_unix_ns"] = time.time_ns()
        self.meta["end"] = _iso(self.meta["end_unix_ns"])
        self.meta["duration_s"] = round(
            (self.meta["end_unix_ns"] - self.meta["start_unix_ns"]) / 1e9, 6
        )
        self.meta["exit"] = {"status": exit_status, "ended_by": ended_by}
        self.meta["collector"] = self._collector_figures()
        with self._write_lock:
            self.writer.close()
            self.writer.write_meta(self.meta)
        return self.meta

    def _collector_figures(self) -> dict[str, Any]:
        threads = [t for t in (self._stack_ticker, self._collector) if t._thread is not None]
        cpu = {}
        for t in threads:
            native = t._thread.native_id if t._thread is not None else None
            value = thread_cpu_ns(native) if native is not None else None
            cpu[t.name] = round(value / 1e9, 6) if value is not None else None
        return {
            "peak_rss_bytes": self.resources.peak_rss,
            "stack_ticks": self.stacks.ticks,
            "distinct_stacks": self.stacks.distinct_stacks,
            "rows_written": dict(self.writer.rows_written),
            "sampler_errors": self._stack_ticker.errors + self._collector.errors,
            "collector_cpu_s": cpu,
            "gpu_notes": self.gpu.notes,
        }

    # -- collector thread --------------------------------------------------------------
    def _collect(self) -> None:
        self.resources.sample()
        self.gpu.sample()
        now = self._clock()
        if (
            self.memory is not None
            and now - self._last_memory >= self.settings.memory_interval_s * 1e9
        ):
            self._last_memory = now
            self.memory.sample()
        if now - self._last_flush >= self.settings.flush_interval_s * 1e9:
            self._last_flush = now
            self._flush()

    def _flush(self) -> None:
        with self._write_lock:
            if self._forked_child:
                return
            tables: dict[str, list[Any]] = {"spans": [], "threads": []}
            for buf, records in self.recorder.drain():
                if (buf.ident, buf.native_id) not in self._known_threads:
                    self._known_threads.add((buf.ident, buf.native_id))
                    tables["threads"].append(
                        (buf.ident, buf.native_id, buf.thread_name, records[0][4])
                    )
                tables["spans"].extend(
                    (
                        sid,
                        parent,
                        name,
                        cat,
                        buf.ident,
                        start,
                        end,
                        req,
                        json.dumps(attrs, default=str) if attrs else None,
                    )
                    for sid, parent, name, cat, start, end, req, attrs in records
                )
            sources = [self.stacks.drain(), self.resources.drain(), self.gpu.drain()]
            if self.memory is not None:
                sources.append(self.memory.drain())
            for source in sources:
                for table, rows in source.items():
                    if table == "threads":  # idents are reused: a thread is (ident, tid)
                        rows = [r for r in rows if (r[0], r[1]) not in self._known_threads]
                        self._known_threads.update((r[0], r[1]) for r in rows)
                    tables.setdefault(table, []).extend(rows)
            for table, rows in tables.items():
                self.writer.append(table, rows)
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
        if not self._started or self._stopped:
            return
        self._forked_child = True
        spans.activate(None)
        self.writer._files.clear()  # emptied by the pre-fork flush; the parent owns them
        self._write_lock = threading.Lock()


def _iso(unix_ns: int) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(unix_ns / 1e9)) + (
        f".{unix_ns % 1_000_000_000 // 1000:06d}Z"
    )
