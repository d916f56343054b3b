"""The torch.profiler windows' events on the run's clock, for the run's timeline.

``probe run`` takes short torch.profiler windows (``probe.samplers.torch_windows``), each a
Kineto trace in the run directory. On a timeline beside the spans and stack samples they
show what the model did meanwhile: the host's ops (``aten::addmm`` ...),
``record_function`` ranges and CUDA runtime calls on the thread that ran them, and on the
GPU each stream's kernels and copies.

Clocks. Kineto stamps events in Unix time: ``baseTimeNanoseconds`` (a top-level key of
the trace, torch 2.x) plus each event's ``ts``; older traces put the whole Unix time in
``ts`` (no base). Measured with torch 2.13 on this machine: an ``aten::mm`` recorded
between two ``time.time_ns()`` reads fell between them once the base was added. The
run's clock is ``perf_counter_ns`` (CLOCK_MONOTONIC); meta.json's clock pair, read
together at the run's start, turns one into the other (``shift_ns = unix_ns -
perf_ns``). The two clocks can drift apart while NTP slews the wall clock (at most 500
ppm: 0.5 ms over a 1-s window, 50 ms after 100 s of a run); the windows come minutes
apart at most, so an event may sit up to a few tens of ms off the spans around it on a
long run.

Bounded: whole windows, in time order, while their events fit ``limit`` (events thinned
across a window would leave ops without the ranges around them); a first window larger
than the bound keeps its first part, in time. The notes say what was left out.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

__all__ = ["TORCH_EVENT_COLUMNS", "torch_events"]

# kind: op, annotation, runtime (host: pid and thread_id), kernel, copy (GPU: device,
# stream; pid and thread_id -1); window: its file in the run directory
TORCH_EVENT_COLUMNS = [
    "window", "kind", "name", "pid", "thread_id", "device", "stream", "start_ns", "end_ns",
]  # fmt: skip

# Kineto table -> the kind its events are on the timeline (host-side annotations only:
# the GPU mirrors of record_function ranges repeat the host's)
_HOST = {"ops": "op", "annotations": "annotation", "runtime": "runtime"}
_GPU = {"kernels": "kernel", "copies": "copy"}


def torch_events(
    windows: list[tuple[dict[str, Any], Any]],
    *,
    shift_ns: int,
    limit: int | None,
    notes: list[str],
) -> tuple[pd.DataFrame, tuple[int, int]]:
    """The windows' events (``Run.torch_windows``: meta.json's entry and its
    ``KinetoTrace``) on the run's clock, ``TORCH_EVENT_COLUMNS``; and (kept, recorded)."""
    frames = [_placed(_window_events(e, t, shift_ns), e, notes) for e, t in windows]
    frames = [f for f in frames if not f.empty]
    recorded = sum(len(f) for f in frames)
    kept: list[pd.DataFrame] = []
    room = recorded if limit is None else limit
    for frame in sorted(frames, key=lambda f: int(f["start_ns"].min())):
        if len(frame) > room:
            if not kept:  # one window is more than the bound: its first part
                kept.append(frame.sort_values("start_ns", kind="stable").head(room))
            break
        kept.append(frame)
        room -= len(frame)
    out = pd.concat(kept, ignore_index=True) if kept else _empty()
    if len(out) < recorded:
        whole = sum(len(k) == len(f) for k, f in zip(kept, frames, strict=False))
        notes.append(
            f"torch.profiler events: kept {len(out):,} of {recorded:,}: "
            + (
                f"the first {whole} of {len(frames)} windows whole"
                if whole
                else "the first part of the first window"
            )  # fmt: skip
            + " (--full keeps all)"
        )
    return out, (len(out), recorded)


def _placed(events: pd.DataFrame, entry: dict[str, Any], notes: list[str]) -> pd.DataFrame:
    """The events a timeline can hold: none before its clock's zero (a trace recorded
    before the run -- copied into its directory, or stamped on another clock -- has
    nowhere to go; the timeline's formats take unsigned times)."""
    before = events["start_ns"] < 0
    if before.any():
        notes.append(
            f"torch.profiler events: {int(before.sum()):,} of {len(events):,} in "
            f"{entry.get('file') or 'a window'} left out: they are stamped before the "
            "run's clock began (a trace recorded before the run, or on another clock)"
        )
    return events[~before]


def _empty() -> pd.DataFrame:
    return pd.DataFrame({c: pd.Series(dtype="object" if c in ("window", "kind", "name") else
                                      "int64") for c in TORCH_EVENT_COLUMNS})  # fmt: skip


def _window_events(entry: dict[str, Any], trace: Any, shift_ns: int) -> pd.DataFrame:
    base = int(trace.meta.get("baseTimeNanoseconds") or 0)
    parts = []
    for table, kind in (*_HOST.items(), *_GPU.items()):
        rows = trace.tables.get(table)
        if rows is None or rows.empty:
            continue
        if table == "annotations":
            rows = rows[rows["side"].astype(str) != "gpu"]
        host = table in _HOST
        n = len(rows)
        start = rows["ts_ns"].to_numpy(dtype="int64") + base - shift_ns
        parts.append(
            pd.DataFrame(
                {
                    "window": str(entry.get("file") or ""),
                    "kind": kind,
                    "name": rows["name"].astype(str).to_numpy(),
                    "pid": _ints(rows, "pid", n) if host else np.full(n, -1),
                    "thread_id": _ints(rows, "tid", n) if host else np.full(n, -1),
                    "device": np.full(n, -1) if host else _ints(rows, "device", n),
                    "stream": np.full(n, -1) if host else _ints(rows, "stream", n),
                    "start_ns": start,
                    "end_ns": start + np.maximum(rows["dur_ns"].to_numpy(dtype="int64"), 0),
                }
            )
        )
    return pd.concat(parts, ignore_index=True) if parts else _empty()


def _ints(rows: pd.DataFrame, column: str, n: int) -> np.ndarray:
    if column not in rows:
        return np.full(n, -1, dtype="int64")
    return pd.to_numeric(rows[column], errors="coerce").fillna(-1).to_numpy(dtype="int64")
