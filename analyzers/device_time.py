"""The GPU work each span launched, not the time its host code took.

CUDA launches are asynchronous: a stage that launches a large model returns at once, and
its GPU time lands in whichever later call waits for the GPU (``.item()``, ``.cpu()``, a
synchronisation) -- so a stage table built from host wall clocks blames the wrong stage.
Kineto ties each kernel and copy to the runtime call that launched it (``correlation``),
and that call ran on a host thread at a moment: a span's device work is what the runtime
calls made on its thread while it was open launched -- and what a thread with no spans of
its own launched meanwhile, when no other thread had a span open then: autograd's engine
thread launches a training step's backward while the step's span waits in
``loss.backward()`` (two thirds of ResNet-50's kernels in the shared V100 trace). Work
launched by such a thread while spans of two threads were open belongs to neither.
Nested spans each count the work launched inside them (a parent includes its
children's), as their host times do.

Per span: ``host_ns`` (its wall time on the host), ``device_ns`` (the GPU time of the work
it launched), ``launches``, ``device_end_ns`` (when the last of that work finished) and
``lag_ns`` (how long after the span returned its work was still running: the time a
host clock hands to whoever synchronises next).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

__all__ = ["device_time", "device_time_by_name"]


def device_time(
    spans: pd.DataFrame, runtime: pd.DataFrame, kernels: pd.DataFrame, copies: pd.DataFrame
) -> pd.DataFrame:
    """``spans`` (``name``, ``tid``, ``ts_ns``, ``dur_ns``) with the device time of what
    each launched (the module doc); work whose launch is not in the trace counts nowhere."""
    parts = [
        t[["correlation"]].assign(device_ns=t["dur_ns"], end_ns=t["ts_ns"] + t["dur_ns"])
        for t in (kernels, copies)
        if len(t)
    ]
    work = (
        pd.concat(parts, ignore_index=True)
        .dropna(subset=["correlation"])
        .groupby("correlation")
        .agg(device_ns=("device_ns", "sum"), end_ns=("end_ns", "max"))
        if parts
        else pd.DataFrame(columns=["device_ns", "end_ns"])
    )
    launches = runtime.dropna(subset=["correlation", "tid"]).merge(
        work, left_on="correlation", right_index=True, how="inner"
    )
    out = spans[["name", "tid", "ts_ns", "dur_ns"]].copy().reset_index(drop=True)
    out["host_ns"] = out["dur_ns"]
    launches = launches.assign(owner=_owners(launches, out))
    device, count, last = [], [], []
    by_owner = {int(t): g.sort_values("ts_ns") for t, g in launches.groupby("owner")}
    for tid, start, dur in out[["tid", "ts_ns", "dur_ns"]].itertuples(index=False):
        calls = by_owner.get(int(tid)) if tid == tid else None
        times = calls["ts_ns"].to_numpy() if calls is not None else np.array([])
        lo, hi = np.searchsorted(times, start, "left"), np.searchsorted(times, start + dur, "right")
        inside = calls.iloc[lo:hi] if calls is not None else calls
        device.append(int(inside["device_ns"].sum()) if inside is not None else 0)
        count.append(len(inside) if inside is not None else 0)
        last.append(float(inside["end_ns"].max()) if inside is not None and len(inside) else np.nan)
    out["device_ns"] = device
    out["launches"] = count
    out["device_end_ns"] = last
    out["lag_ns"] = (out["device_end_ns"] - (out["ts_ns"] + out["dur_ns"])).clip(lower=0)
    return out.drop(columns=["dur_ns"])


def _owners(launches: pd.DataFrame, spans: pd.DataFrame) -> np.ndarray:
    """The span thread each launch belongs to: its own thread when that thread has spans;
    for a thread without spans, the one span thread with a span open at the launch (NaN
    when none or several are)."""
    span_tids = {int(t) for t in spans["tid"].dropna()}
    tids = launches["tid"].to_numpy(dtype="float64")
    owner = np.where(np.isin(tids, list(span_tids)), tids, np.nan)
    helper = np.isnan(owner)
    if not helper.any() or not span_tids:
        return owner
    at = launches["ts_ns"].to_numpy(dtype="float64")[helper]
    covering = np.zeros(len(at), dtype="int64")
    which = np.full(len(at), np.nan)
    for tid, g in spans.dropna(subset=["tid"]).groupby("tid"):
        start = g["ts_ns"].to_numpy(dtype="float64")
        order = np.argsort(start)
        start, end = start[order], (start + g["dur_ns"].to_numpy(dtype="float64"))[order]
        reach = np.maximum.accumulate(end)
        i = np.searchsorted(start, at, side="right") - 1  # the last span opened by then
        inside = (i >= 0) & (reach[np.clip(i, 0, None)] >= at)
        covering += inside
        which = np.where(inside, float(tid), which)
    owner[helper] = np.where(covering == 1, which, np.nan)
    return owner


def device_time_by_name(per_span: pd.DataFrame) -> pd.DataFrame:
    """``device_time``'s spans summed by name: count, host and device time side by side,
    most device time first."""
    g = per_span.groupby("name", observed=True)
    out = g.agg(
        spans=("host_ns", "size"),
        host_ns=("host_ns", "sum"),
        device_ns=("device_ns", "sum"),
        launches=("launches", "sum"),
        lag_ns=("lag_ns", "max"),
    )
    return out.sort_values("device_ns", ascending=False).reset_index()
