"""GPU busy and idle time from a Kineto trace, and each idle gap's cause on the host.

The GPU runs what the host launched, in order per stream; when it has nothing to run it
waits, and the trace says why by what the host was doing meanwhile. For each device the
kernels and copies are merged into busy intervals; every stretch between two of them
inside the traced window is an idle gap, judged by the activity that ended it and the
runtime call that launched that activity (Kineto's ``correlation`` id):

* ``queued``: its launch had returned before the gap began -- the work was waiting on the
  GPU side (an event, another stream, a copy the driver stages from pageable memory);
* otherwise the host was late, and the host thread that launched it spent the gap in:
  ``sync`` -- a synchronisation (``cudaStreamSynchronize``, ``cudaDeviceSynchronize``, a
  synchronous copy: ``.item()``, ``.cpu()``) still waiting when the GPU went idle, so
  everything the host did next left the GPU idle; ``warm_up`` -- allocation, module
  loading, context creation for most of the gap (not a steady state); ``launch`` --
  launch calls for most of the gap (launch-bound: many small kernels); ``input`` -- a data
  loader's ops for most of the gap (the input pipeline); ``framework`` -- ops that launch
  GPU work (the model's own ops being dispatched: eager mode's per-op host cost, what
  CUDA graphs and ``torch.compile`` remove); ``host`` -- any other host work (Python,
  CPU ops on CPU tensors, pre- and post-processing);
* ``unknown``: its launch is not in the trace (launched before the window opened, or a
  trace without correlation ids).

"Most of" is a majority: the cause that holds more than half of the time it is judged
over. No other constant: what is idle and why comes from the trace's own intervals.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
import pandas as pd

__all__ = ["GAP_CAUSES", "GpuTimeline", "gpu_timeline"]

GAP_CAUSES = ("queued", "sync", "warm_up", "launch", "input", "framework", "host", "unknown")

# runtime and driver calls by what they do (CUDA and HIP names)
_SYNC = re.compile(r"Synchronize|^cudaMemcpy$|^cudaMemcpy2D$|^hipMemcpy$|StreamWaitEvent")
_LAUNCH = re.compile(r"LaunchKernel|LaunchCooperative|MemcpyAsync|MemsetAsync|GraphLaunch")
_WARM_UP = re.compile(
    r"Malloc|Free|HostAlloc|HostRegister|ModuleLoad|LibraryLoad|GetDeviceProperties|"
    r"DeviceGetStreamPriorityRange|StreamCreate|EventCreate|CtxCreate|DevicePrimaryCtx|"
    r"FuncGetAttributes|FuncSetAttribute|GetFuncBySymbol"
)
# a data loader's work as torch.profiler records it
_INPUT = re.compile(r"DataLoader|_MultiProcessingDataLoaderIter|_SingleProcessDataLoaderIter")


@dataclass(frozen=True)
class GpuTimeline:
    """``devices``: per device, the traced window, busy time and share; ``gaps``: every
    idle gap (device, start, end, duration, cause); ``by_cause``: idle time by cause,
    with its share of the window (all devices together)."""

    devices: pd.DataFrame
    gaps: pd.DataFrame
    by_cause: pd.DataFrame

    @property
    def steady(self) -> bool:
        """False when warm-up holds most of the idle time: not a steady state to judge."""
        idle = float(self.by_cause["idle_ns"].sum())
        warm = self.by_cause.loc[self.by_cause["cause"] == "warm_up", "idle_ns"].sum()
        return not (idle > 0 and warm / idle > 0.5)


def gpu_timeline(
    kernels: pd.DataFrame,
    copies: pd.DataFrame,
    runtime: pd.DataFrame,
    ops: pd.DataFrame,
    annotations: pd.DataFrame,
) -> GpuTimeline:
    """The GPU's busy and idle time, and each gap's cause (the module doc); the tables as
    ``probe.rundir.kineto`` reads them. Empty frames when the trace has no GPU work."""
    work = pd.concat(
        [t[["ts_ns", "dur_ns", "device", "correlation"]] for t in (kernels, copies) if len(t)]
        or [pd.DataFrame(columns=["ts_ns", "dur_ns", "device", "correlation"])],
        ignore_index=True,
    )
    work = work.dropna(subset=["device"])
    if work.empty:
        return GpuTimeline(_empty_devices(), _empty_gaps(), _by_cause(_empty_gaps(), {}))
    host = _HostThreads(runtime, ops, annotations)
    device_rows, gap_frames = [], []
    for device, acts in work.groupby("device"):
        busy, gaps = _busy_and_gaps(acts)
        window = int(acts["ts_ns"].min()), int((acts["ts_ns"] + acts["dur_ns"]).max())
        span = window[1] - window[0]
        device_rows.append(
            {"device": int(device), "start_ns": window[0], "window_ns": span, "busy_ns": busy,
             "busy_share": busy / span if span > 0 else np.nan}
        )  # fmt: skip
        if len(gaps):
            gaps["device"] = int(device)
            gaps["cause"] = [host.cause(*g) for g in gaps[["start_ns", "end_ns", "next_corr"]]
                             .itertuples(index=False)]  # fmt: skip
            gap_frames.append(gaps)
    devices = pd.DataFrame(device_rows)
    gaps = pd.concat(gap_frames, ignore_index=True) if gap_frames else _empty_gaps()
    gaps = gaps[["device", "start_ns", "end_ns", "dur_ns", "cause"]]
    windows = dict(zip(devices["device"], devices["window_ns"], strict=True))
    return GpuTimeline(devices, gaps, _by_cause(gaps, windows))


def _busy_and_gaps(acts: pd.DataFrame) -> tuple[int, pd.DataFrame]:
    """Busy time (the union of the activities) and the gaps between busy intervals, each
    with the correlation id of the activity that ended it."""
    acts = acts.sort_values("ts_ns", kind="stable")
    start = acts["ts_ns"].to_numpy(dtype="int64")
    end = start + acts["dur_ns"].to_numpy(dtype="int64")
    corr = acts["correlation"].to_numpy(dtype="float64", na_value=np.nan)
    reach = np.maximum.accumulate(end)  # how far the busy time reaches by each activity
    opens = np.flatnonzero(start[1:] > reach[:-1]) + 1  # an activity after an idle stretch
    busy = int((reach[np.r_[opens - 1, len(end) - 1]] - start[np.r_[0, opens]]).sum())
    gaps = pd.DataFrame(
        {
            "start_ns": reach[opens - 1],
            "end_ns": start[opens],
            "dur_ns": start[opens] - reach[opens - 1],
            "next_corr": corr[opens],
        }
    )
    return busy, gaps


class _HostThreads:
    """The host's intervals by thread and kind, for the gaps' causes."""

    def __init__(self, runtime: pd.DataFrame, ops: pd.DataFrame, annotations: pd.DataFrame):
        rt = runtime.dropna(subset=["tid"])
        names = rt["name"].astype(str)
        self._launch_of = {
            int(c): (int(t), int(ts), int(ts + d))
            for c, t, ts, d in rt[["correlation", "tid", "ts_ns", "dur_ns"]]
            .dropna()
            .itertuples(index=False)
        }
        self._kinds: dict[str, dict[int, _Intervals]] = {}
        for kind, pattern in (("sync", _SYNC), ("launch", _LAUNCH), ("warm_up", _WARM_UP)):
            self._kinds[kind] = _by_thread(rt[names.str.contains(pattern)])
        host_named = pd.concat(
            [t[["ts_ns", "dur_ns", "tid", "name"]] for t in (ops, annotations) if len(t)]
            or [pd.DataFrame(columns=["ts_ns", "dur_ns", "tid", "name"])]
        )
        loading = host_named["name"].astype(str).str.contains(_INPUT)
        self._kinds["input"] = _by_thread(host_named[loading].dropna(subset=["tid"]))
        self._kinds["framework"] = _by_thread(_launching_ops(ops, rt[names.str.contains(_LAUNCH)]))

    def cause(self, start: int, end: int, next_corr: float) -> str:
        launch = None if next_corr != next_corr else self._launch_of.get(int(next_corr))
        if launch is None:
            return "unknown"
        tid, launched_at, returned_at = launch
        if returned_at <= start:
            return "queued"
        sync = self._kinds["sync"].get(tid)
        if sync is not None and sync.waiting_at(start, launched_at):
            return "sync"
        late = (start, max(start + 1, min(end, launched_at)))
        for kind in ("warm_up", "launch", "input", "framework"):
            intervals = self._kinds[kind].get(tid)
            if intervals is not None and intervals.covered(*late) > 0.5 * (late[1] - late[0]):
                return kind
        return "host"


def _launching_ops(ops: pd.DataFrame, launches: pd.DataFrame) -> pd.DataFrame:
    """The framework's ops that launched GPU work (a launch call on their thread while
    they ran): the model's own ops being dispatched. record_function ranges ("name#...",
    the older schema's way of recording them) are not ops."""
    if ops.empty or launches.empty:
        return pd.DataFrame(columns=["ts_ns", "dur_ns", "tid"])
    named = ops["name"].astype(str)
    ops = ops[~named.str.contains("#", regex=False)].dropna(subset=["tid"])
    keep = []
    by_thread = {int(t): np.sort(g["ts_ns"].to_numpy()) for t, g in launches.groupby("tid")}
    for tid, g in ops.groupby("tid"):
        at = by_thread.get(int(tid))
        if at is None:
            continue
        start = g["ts_ns"].to_numpy()
        first = np.searchsorted(at, start, side="left")  # the first launch at/after start
        inside = (first < len(at)) & (at[np.minimum(first, len(at) - 1)] <= start + g["dur_ns"])
        keep.append(g[inside])
    return pd.concat(keep) if keep else pd.DataFrame(columns=["ts_ns", "dur_ns", "tid"])


@dataclass(frozen=True)
class _Intervals:
    """One thread's calls of one kind, sorted (a thread's runtime calls do not overlap;
    nested ops are merged first)."""

    start: np.ndarray
    end: np.ndarray
    cum: np.ndarray  # time covered up to each interval's end

    def covered(self, a: int, b: int) -> float:
        """Time in [a, b] inside the intervals."""
        if b <= a or not len(self.start):
            return 0.0
        i = int(np.searchsorted(self.end, a, side="right"))  # first ending after a
        j = int(np.searchsorted(self.start, b, side="left"))  # first starting at/after b
        if j <= i:
            return 0.0
        inside = float(self.cum[j - 1] - (self.cum[i - 1] if i else 0.0))
        inside -= max(0, a - int(self.start[i]))  # the first one began before a
        inside -= max(0, int(self.end[j - 1]) - b)  # the last one ends after b
        return max(0.0, inside)

    def waiting_at(self, at: int, before: int) -> bool:
        """A call that began before ``at`` and ended at or after it (still waiting when
        the GPU went idle), before ``before`` (the next launch)."""
        i = int(np.searchsorted(self.start, at, side="right")) - 1
        return i >= 0 and int(self.end[i]) >= at and int(self.end[i]) <= before


def _by_thread(calls: pd.DataFrame) -> dict[int, _Intervals]:
    out = {}
    for tid, g in calls.groupby("tid"):
        s = g["ts_ns"].to_numpy(dtype="int64")
        order = np.argsort(s, kind="stable")
        s = s[order]
        e = s + g["dur_ns"].to_numpy(dtype="int64")[order]
        # merge overlaps (nested ops): intervals disjoint and sorted
        reach = np.maximum.accumulate(e)
        opens = np.r_[0, np.flatnonzero(s[1:] > reach[:-1]) + 1]
        closes = np.r_[opens[1:] - 1, len(s) - 1]
        ms, me = s[opens], reach[closes]
        out[int(tid)] = _Intervals(ms, me, np.cumsum(me - ms).astype("float64"))
    return out


def _by_cause(gaps: pd.DataFrame, windows: dict[int, int]) -> pd.DataFrame:
    total = float(sum(windows.values()))
    idle = gaps.groupby("cause")["dur_ns"].agg(["size", "sum"]) if len(gaps) else None
    rows = []
    for cause in GAP_CAUSES:
        n, ns = (
            (int(idle.loc[cause, "size"]), int(idle.loc[cause, "sum"]))
            if (idle is not None and cause in idle.index)
            else (0, 0)
        )
        rows.append({"cause": cause, "gaps": n, "idle_ns": ns,
                     "share": ns / total if total > 0 else np.nan})  # fmt: skip
    return pd.DataFrame(rows)


def _empty_devices() -> pd.DataFrame:
    return pd.DataFrame(columns=["device", "start_ns", "window_ns", "busy_ns", "busy_share"])


def _empty_gaps() -> pd.DataFrame:
    return pd.DataFrame(columns=["device", "start_ns", "end_ns", "dur_ns", "cause"])
