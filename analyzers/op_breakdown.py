"""Where a model's host time goes, op by op (torch.profiler's CPU ops, with shapes).

``op_breakdown(ops)`` nests each thread's ops (an op inside another one's interval on the
same thread is its child: ``aten::linear`` holds ``aten::t`` and ``aten::addmm``) and
gives, by op name:

- ``self_ns``: time in the op less its children's -- what the op itself costs, the
  figure to rank ops by (inclusive time counts ``aten::linear`` and its ``aten::addmm``
  twice);
- ``total_ns`` / ``calls``: inclusive time of its outermost calls (a recursive op's
  inner calls are in it already);
- ``dtype``: the most common element type of its first input, in torch's names
  (Kineto writes c10's: ``float`` is float32, ``c10::BFloat16`` bfloat16), for which
  precision the GEMMs run in.

The ``record_function`` ranges the older schema records as ops are left out: they are
spans (``trace_diagnosis``'s stages), and as ops they would hold every op of a step.

And for each thread that ran ops (``OpBreakdown.threads``): its traced span, the time
inside top-level ops, the gaps between them (``gap_share``: time outside any op -- the
Python between ops (module calls, the service's own code, the framework's glue) and the
thread's waits: a synchronisation, a data loader, a queue), the top-level op count and
its median duration. A thread with many short top-level ops and a large gap share that
is not waiting is paying per-op and per-call overhead rather than computing: what eager
mode costs at batch 1. The gap share says where to look; it is not an estimate of what a
runtime buys (the waits in it are not separated here).

The profiler's own cost per op (``op_cost_ns``: probe run's windows measure it as each
one opens, ``probe.samplers.torch_windows``) is in every op's interval; it is taken off
each op's self time (never below 0), so that a window's thousands of tiny ops do not read
as their own cost. A trace recorded elsewhere leaves it 0.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

__all__ = ["OpBreakdown", "op_breakdown", "recorded_ranges"]

# Kineto's names of tensors' element types (c10's C++ names) -> torch's
_DTYPES = {
    "float": "float32", "double": "float64", "c10::Half": "float16",
    "c10::BFloat16": "bfloat16", "long int": "int64", "int": "int32", "short int": "int16",
    "signed char": "int8", "unsigned char": "uint8", "bool": "bool",
    "c10::complex<float>": "complex64", "c10::complex<double>": "complex128",
    "c10::Float8_e4m3fn": "float8_e4m3fn", "c10::Float8_e5m2": "float8_e5m2",
}  # fmt: skip
# what an op's first argument is when it is not a tensor
_NOT_TENSORS = {"", "Scalar", "ScalarList", "TensorList", "GenericList", "String", "Device"}

OP_COLUMNS = ["name", "calls", "self_ns", "self_share", "total_ns", "mean_ns", "dtype"]
THREAD_COLUMNS = ["tid", "span_ns", "in_ops_ns", "gap_share", "top_level_ops", "median_op_ns"]


@dataclass(frozen=True)
class OpBreakdown:
    ops: pd.DataFrame  # OP_COLUMNS, by self time, most first
    threads: pd.DataFrame  # THREAD_COLUMNS, by time inside ops, most first
    op_cost_ns: float  # the profiler's cost per op taken off each op's self time

    @property
    def empty(self) -> bool:
        return self.ops.empty


def op_breakdown(ops: pd.DataFrame, *, op_cost_ns: float = 0.0) -> OpBreakdown:
    """``ops``: the trace's ops table (name, tid, ts_ns, dur_ns, input_types)."""
    if ops.empty:
        return OpBreakdown(
            pd.DataFrame(columns=OP_COLUMNS), pd.DataFrame(columns=THREAD_COLUMNS), op_cost_ns
        )
    frame = ops[["name", "tid", "ts_ns", "dur_ns", "input_types"]].copy()
    frame["name"] = frame["name"].astype(str)
    frame["dur_ns"] = _without_the_stop(frame)  # the stop: the final end of ranges too
    frame = frame[~recorded_ranges(frame["name"])]
    # a thread's ops by start, the enclosing one first where two start together
    frame = frame.sort_values(["tid", "ts_ns", "dur_ns"], ascending=[True, True, False])
    frame = frame.reset_index(drop=True)
    parent = _parents(frame)
    frame["parent"] = parent
    frame["self_ns"] = _self_times(frame["dur_ns"].to_numpy("int64"), parent, op_cost_ns)
    frame["outermost"] = _outermost_of_name(frame["name"].to_numpy(), parent)
    return OpBreakdown(_by_name(frame), _by_thread(frame), op_cost_ns)


def recorded_ranges(names: pd.Series) -> pd.Series:
    """True for the ``record_function`` ranges and profiler steps that the older Kineto
    schema records as ops ("ProfilerStep#5", "Optimizer.step#SGD.step",
    "enumerate(DataLoader)#..."): spans around ops, not ops."""
    named = names.astype(str)
    return named.str.contains("#", regex=False) & ~named.str.startswith("aten::")


def _without_the_stop(frame: pd.DataFrame) -> np.ndarray:
    """Durations with the profiler's stop taken out: an op still running when the
    profiler stopped is written as ending at the stop (a window's linear and its addmm
    "took" 80-96 ms: trace_diagnosis._host_window), so the ops that end at the trace's
    final end are cut at their thread's last start or earlier end instead. A trace whose
    last op really ended last loses only that op's tail past the cut."""
    starts = frame["ts_ns"].to_numpy("int64")
    ends = starts + frame["dur_ns"].to_numpy("int64")
    cut = ends == ends.max()
    kept = pd.Series(np.where(cut, starts, ends), index=frame.index)
    last = kept.groupby(frame["tid"]).transform("max").to_numpy("int64")
    return np.where(cut, np.maximum(last - starts, 0), ends - starts)


def _parents(frame: pd.DataFrame) -> np.ndarray:
    """Each op's enclosing op on its thread (its row), or -1 at the top level. An op
    ends its enclosing ones' turn only once it starts after they ended: Kineto's ops
    nest on a thread, and an op whose end overruns its parent's by clock rounding is
    still its child."""
    tids = frame["tid"].to_numpy()
    starts = frame["ts_ns"].to_numpy("int64")
    ends = starts + frame["dur_ns"].to_numpy("int64")
    parent = np.full(len(frame), -1, dtype="int64")
    stack: list[int] = []
    previous_tid = None
    for i in range(len(frame)):
        if tids[i] != previous_tid:
            stack.clear()
            previous_tid = tids[i]
        while stack and ends[stack[-1]] <= starts[i]:
            stack.pop()
        if stack:
            parent[i] = stack[-1]
        stack.append(i)
    return parent


def _self_times(durations: np.ndarray, parent: np.ndarray, op_cost_ns: float) -> np.ndarray:
    nested = parent >= 0
    children = np.bincount(parent[nested], weights=durations[nested], minlength=len(durations))
    return np.maximum(durations - children - op_cost_ns, 0.0)


def _outermost_of_name(names: np.ndarray, parent: np.ndarray) -> np.ndarray:
    """True where no enclosing op has the same name (its inclusive time counts once).
    One pass per level of nesting (a model's ops nest ~10 deep), over every op at once."""
    codes = pd.factorize(names)[0]
    outermost = np.ones(len(names), dtype=bool)
    ancestor = parent.copy()
    while (alive := ancestor >= 0).any():
        at = np.flatnonzero(alive)
        outermost[at[codes[ancestor[at]] == codes[at]]] = False
        ancestor[at] = parent[ancestor[at]]
    return outermost


def _by_name(frame: pd.DataFrame) -> pd.DataFrame:
    outer = frame[frame["outermost"]]
    by_name = frame.groupby("name")
    table = pd.DataFrame(
        {
            "calls": by_name.size(),
            "self_ns": by_name["self_ns"].sum(),
            "total_ns": outer.groupby("name")["dur_ns"].sum(),
        }
    )
    table["dtype"] = _first_input_types(frame).reindex(table.index).fillna("")
    table["total_ns"] = table["total_ns"].fillna(0).astype("int64")
    table["self_ns"] = table["self_ns"].round().astype("int64")
    everything = float(table["self_ns"].sum())
    table["self_share"] = table["self_ns"] / everything if everything > 0 else 0.0
    table["mean_ns"] = (table["total_ns"] / table["calls"]).round().astype("int64")
    table = table.rename_axis("name").reset_index()
    table = table.sort_values(["self_ns", "name"], ascending=[False, True])
    return table[OP_COLUMNS].reset_index(drop=True)


def _first_input_types(frame: pd.DataFrame) -> pd.Series:
    """By op name, the most common type of its first input: ``["float","Scalar"]`` ->
    float (ops without a typed first input have none)."""
    first = frame["input_types"].str.extract(r'^\["([^"]*)"', expand=False)
    typed = pd.DataFrame({"name": frame["name"], "type": first}).dropna()
    typed = typed[~typed["type"].isin(_NOT_TENSORS)]
    typed["type"] = typed["type"].map(lambda t: _DTYPES.get(t, t))
    if typed.empty:
        return pd.Series(dtype="object")
    counts = typed.groupby(["name", "type"]).size().sort_values(ascending=False)
    return counts.reset_index().drop_duplicates("name").set_index("name")["type"]


def _by_thread(frame: pd.DataFrame) -> pd.DataFrame:
    top = frame[frame["parent"] < 0]
    rows = []
    for tid, calls in top.groupby("tid"):
        starts = calls["ts_ns"].to_numpy("int64")
        ends = starts + calls["dur_ns"].to_numpy("int64")  # the stop taken out already
        span = int(ends.max() - starts.min())
        # top-level ops do not overlap (one starts once the last has ended: _parents)
        inside = int((ends - starts).sum())
        rows.append(
            {
                "tid": int(tid),
                "span_ns": span,
                "in_ops_ns": inside,
                "gap_share": round(1 - inside / span, 4) if span > 0 else 0.0,
                "top_level_ops": len(calls),
                "median_op_ns": int(np.median(ends - starts)),
            }
        )
    table = pd.DataFrame(rows, columns=THREAD_COLUMNS)
    return table.sort_values("in_ops_ns", ascending=False).reset_index(drop=True)
