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

The profiler's own cost per op (``op_cost_ns``) is read off the trace itself
(``profiler_op_cost_ns``: the gaps between an op's children are its bookkeeping, at the
speed the host ran the traced thread) and taken off the self times where it falls
(``_self_times``: part inside each op's interval, part between it and its neighbours,
inside its parent's), never below 0, so that a window's thousands of tiny ops do not
read as their own cost. Until 2026-12-07
probe run's windows calibrated it on probe's own thread as each opened (small view ops,
the least of 12 calls): on five models that read 0.2-0.4 of what the target's ops paid,
the ops' shapes recorded for more inputs and the target's caches colder
(``benchmarks/profiler_op_cost.py``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

__all__ = [
    "OpBreakdown", "input_shapes", "op_breakdown", "op_parents", "ops_in_ranges",
    "PAID_OVER_GAP", "paused_outside_ops", "profiler_op_cost_ns", "recorded_ranges",
]  # fmt: skip

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
THREAD_COLUMNS = [
    "tid", "span_ns", "in_ops_ns", "gap_share", "top_level_ops", "ops", "median_op_ns",
]  # fmt: skip


@dataclass(frozen=True)
class OpBreakdown:
    ops: pd.DataFrame  # OP_COLUMNS, by self time, most first
    threads: pd.DataFrame  # THREAD_COLUMNS, by time inside ops, most first
    op_cost_ns: float  # the profiler's cost per op taken off each op's self time
    # each thread's top-level ops (tid, ts_ns, dur_ns; the stop taken out), by start
    top_level: pd.DataFrame = field(
        default_factory=lambda: pd.DataFrame(columns=["tid", "ts_ns", "dur_ns"])
    )

    @property
    def empty(self) -> bool:
        return self.ops.empty

    @property
    def host_span_ns(self) -> float:
        """The host's traced span: the first op's start to the last op's end, the
        profiler's stop taken out (``_without_the_stop``); 0 without ops."""
        top = self.top_level
        if top.empty:
            return 0.0
        return float((top["ts_ns"] + top["dur_ns"]).max() - top["ts_ns"].min())


def op_breakdown(
    ops: pd.DataFrame, *, op_cost_ns: float | None = 0.0, runtime: pd.DataFrame | None = None
) -> OpBreakdown:
    """``ops``: the trace's ops table (name, tid, ts_ns, dur_ns, input_types).
    ``op_cost_ns`` None: read off these ops (``profiler_op_cost_ns``, with ``runtime``)."""
    if ops.empty:
        return OpBreakdown(
            pd.DataFrame(columns=OP_COLUMNS),
            pd.DataFrame(columns=THREAD_COLUMNS),
            op_cost_ns or 0.0,
        )
    frame, parent = _nested(ops[["name", "tid", "ts_ns", "dur_ns", "input_types"]])
    if op_cost_ns is None:
        op_cost_ns = _cost_from_gaps(frame, parent, runtime) or 0.0
    frame["parent"] = parent
    frame["self_ns"] = _self_times(frame["dur_ns"].to_numpy("int64"), parent, op_cost_ns)
    frame["outermost"] = _outermost_of_name(frame["name"].to_numpy(), parent)
    top = frame[parent < 0][["tid", "ts_ns", "dur_ns"]].reset_index(drop=True)
    ops_per_thread = frame.groupby("tid").size()
    return OpBreakdown(_by_name(frame), _by_thread(top, ops_per_thread), op_cost_ns, top)


def _nested(ops: pd.DataFrame) -> tuple[pd.DataFrame, np.ndarray]:
    """The ops without the profiler's stop and the recorded ranges, a thread's by start
    (the enclosing one first where two start together), and each one's parent row."""
    frame = ops.copy()
    frame["name"] = frame["name"].astype(str)
    frame["dur_ns"] = _without_the_stop(frame)  # the stop: the final end of ranges too
    frame = frame[~recorded_ranges(frame["name"])]
    frame = frame.sort_values(["tid", "ts_ns", "dur_ns"], ascending=[True, True, False])
    frame = frame.reset_index(drop=True)
    return frame, op_parents(frame)


def ops_in_ranges(
    ranges: pd.DataFrame, top_level: pd.DataFrame, pauses: pd.DataFrame | None = None
) -> pd.DataFrame:
    """By range name (``record_function`` ranges, probe's spans): ``tid``, the thread that
    held most of its time, and on that thread ``spans``, their summed time ``range_ns``,
    ``in_ops_ns``, the part of it inside top-level ops -- the rest is the Python between
    the ops it ran, and its waits -- ``top_ops``, how many top-level ops started in it
    (each leaves a part of the profiler's cost in that rest: ``profiler_op_cost_ns``),
    and ``paused_ns``, the part of that rest held by the
    process's collections (``pauses``: see ``paused_outside_ops``). One thread's: a
    window's shares are of one thread's time, and a request span summed over eight pool
    threads had 1.4 times a 0.12-s window outside ops (score_api, 2026-12-05)."""
    columns = ["name", "tid", "spans", "range_ns", "in_ops_ns", "top_ops", "paused_ns"]
    if ranges.empty:
        return pd.DataFrame(columns=columns)
    starts = ranges["ts_ns"].to_numpy("int64")
    ends = starts + ranges["dur_ns"].to_numpy("int64")
    tids = ranges["tid"].to_numpy()
    inside = np.zeros(len(ranges))
    for tid, ops in top_level.groupby("tid"):
        mine = np.flatnonzero(tids == tid)
        if len(mine):
            inside[mine] = _covered(
                ops["ts_ns"].to_numpy("int64"), ops["dur_ns"].to_numpy("int64"),
                starts[mine], ends[mine],
            )  # fmt: skip
    each = pd.DataFrame(
        {"name": ranges["name"].astype(str).to_numpy(), "tid": tids, "range_ns": ends - starts,
         "in_ops_ns": inside, "top_ops": _starts_in(top_level, tids, starts, ends),
         "paused_ns": paused_outside_ops(pauses, top_level, tids, starts, ends)}
    )  # fmt: skip
    table = each.groupby(["name", "tid"]).agg(
        spans=("range_ns", "size"), range_ns=("range_ns", "sum"), in_ops_ns=("in_ops_ns", "sum"),
        top_ops=("top_ops", "sum"), paused_ns=("paused_ns", "sum"),
    )  # fmt: skip
    # the thread that held most of the name's time (a stage may run on several)
    table = table.reset_index().sort_values(["range_ns", "tid"], kind="stable")
    table = table.drop_duplicates("name", keep="last").sort_values("name")
    for held in ("in_ops_ns", "paused_ns"):
        table[held] = table[held].round().astype("int64")
    return table.reset_index(drop=True)[columns]


def paused_outside_ops(
    pauses: pd.DataFrame | None,
    top_level: pd.DataFrame,
    tids: np.ndarray,
    a: np.ndarray,
    b: np.ndarray,
) -> np.ndarray:
    """For each interval [a, b) on thread ``tids``: its part inside the process's
    collections (``pauses``: ``ts_ns``, ``dur_ns`` on the trace's clock, a run's full
    collections on any thread) while that thread ran no top-level op. A collection
    holds the GIL: a thread's Python waits it out, where an op already under way in
    native code runs on, and that part was the op's."""
    paused = np.zeros(len(a))
    if pauses is None or pauses.empty:
        return paused
    ops = {tid: own for tid, own in top_level.groupby("tid")}
    starts, took = pauses["ts_ns"].to_numpy("int64"), pauses["dur_ns"].to_numpy("int64")
    for start, end in zip(starts, starts + took, strict=True):
        lo, hi = np.maximum(a, start), np.minimum(b, end)
        hit = np.flatnonzero(hi > lo)
        for tid in np.unique(tids[hit]):
            mine = hit[tids[hit] == tid]
            paused[mine] += hi[mine] - lo[mine]
            if tid in ops:
                own = ops[tid]
                paused[mine] -= _covered(
                    own["ts_ns"].to_numpy("int64"), own["dur_ns"].to_numpy("int64"),
                    lo[mine], hi[mine],
                )  # fmt: skip
    return paused


def _covered(
    op_starts: np.ndarray, op_durations: np.ndarray, a: np.ndarray, b: np.ndarray
) -> np.ndarray:
    """For each interval [a, b), its overlap with a thread's top-level ops (never
    overlapping each other): the ops wholly inside by prefix sums, less the parts of the
    edge ops outside it."""
    order = np.argsort(op_starts, kind="stable")
    s, e = op_starts[order], op_starts[order] + op_durations[order]
    before = np.concatenate([[0], np.cumsum(e - s)])
    first = np.searchsorted(e, a, side="right")  # the first op ending after a
    last = np.searchsorted(s, b, side="left")  # past the last op starting before b
    total = (before[last] - before[first]).astype("float64")
    some = last > first
    head = np.where(some, np.clip(a - s[np.minimum(first, len(s) - 1)], 0, None), 0)
    tail = np.where(some, np.clip(e[np.maximum(last - 1, 0)] - b, 0, None), 0)
    return np.clip(total - head - tail, 0, None)


def recorded_ranges(names: pd.Series) -> pd.Series:
    """True for the ``record_function`` ranges and profiler steps that the older Kineto
    schema records as ops ("ProfilerStep#5", "Optimizer.step#SGD.step",
    "enumerate(DataLoader)#..."): spans around ops, not ops."""
    named = names.astype(str)
    return named.str.contains("#", regex=False) & ~named.str.startswith("aten::")


def _without_the_stop(frame: pd.DataFrame) -> np.ndarray:
    """Durations with the profiler's stop taken out: an op still running when the
    profiler stopped is written as ending at the stop (probe run's decoder windows: a
    linear and its addmm, or an addmm alone, "took" 80-96 ms, the window's close, and
    nearly doubled a 0.1-s window), so the ops that end at the trace's final end are cut
    at their thread's last start or earlier end instead. A trace whose last op really
    ended last loses only that op's tail past the cut."""
    starts = frame["ts_ns"].to_numpy("int64")
    ends = starts + frame["dur_ns"].to_numpy("int64")
    cut = ends == ends.max()
    kept = pd.Series(np.where(cut, starts, ends), index=frame.index)
    last = kept.groupby(frame["tid"]).transform("max").to_numpy("int64")
    return np.where(cut, np.maximum(last - starts, 0), ends - starts)


def input_shapes(dims: object) -> list[tuple[int, ...]]:
    """An op's input shapes from Kineto's "Input Dims" (JSON: ``[[32,256,768],[]]``): the
    leading ones, up to the first input that is not a shape (a list input such as
    ``cat``'s, or a scalar); none where the text is not such a list."""
    try:
        parsed = json.loads(str(dims))
    except (TypeError, ValueError):
        return []
    shapes = []
    for d in parsed if isinstance(parsed, list) else []:
        if not isinstance(d, list) or not all(isinstance(x, int) for x in d):
            break
        shapes.append(tuple(d))
    return shapes


# What torch.profiler adds to an op, over the median gap between two ops one after the
# other inside the same op (aten::linear's aten::t and aten::addmm): the extra CPU time of
# turns with the thread's recording switched on over turns with it off (alternated, the
# profiler on), over the ops a turn recorded, against that gap in the same window. Five
# models (a decoder with and without a KV cache, an MLP, a small convnet, a loop of three
# tiny ops), 67 windows in five sittings (2026-12-07; `python
# benchmarks/profiler_op_cost.py`): 1.26-2.47, median 1.84, the sittings' medians
# 1.56-2.02. The gap holds one op's bookkeeping between two intervals, the rest of it
# falls inside them; the cost it reads is within 0.75-1.47 of what was paid.
PAID_OVER_GAP = 1.85
# fewer gaps than this and the median is not the thread's speed at its bookkeeping
_MIN_GAPS = 20


def profiler_op_cost_ns(ops: pd.DataFrame, runtime: pd.DataFrame | None = None) -> float | None:
    """What torch.profiler's recording cost each op of this trace, read off the trace
    itself: ``PAID_OVER_GAP`` times the median gap between consecutive ops inside one
    C++ op (``namespace::name``: nothing of the model's own runs between them, the gap is
    the profiler's bookkeeping at the speed the host ran the traced thread). Not inside a
    compiled region ("Torch-Compiled Region: 0/0": its generated code runs between its
    ops, 25 us a gap on a BF16 encoder's trace), nor a gap in which the thread made a
    CUDA runtime call (``runtime``: a cuDNN op launches between its children). None
    where the trace has too few such gaps (``_MIN_GAPS``). Measured on traces recorded
    with shapes and without stacks (probe run's windows, ``record_shapes=True``)."""
    if ops.empty:
        return None
    return _cost_from_gaps(*_nested(ops[["name", "tid", "ts_ns", "dur_ns"]]), runtime)


def _cost_from_gaps(
    frame: pd.DataFrame, parent: np.ndarray, runtime: pd.DataFrame | None
) -> float | None:
    """``profiler_op_cost_ns`` on ops already nested (``_nested``)."""
    starts = frame["ts_ns"].to_numpy("int64")
    ends = starts + frame["dur_ns"].to_numpy("int64")
    # rows in (tid, start) order: a child's next sibling is the next row with its parent
    nested = np.flatnonzero(parent >= 0)
    order = nested[np.argsort(parent[nested], kind="stable")]
    first, then = order[:-1], order[1:]
    cpp = frame["name"].str.fullmatch(r"\w+::\w+").to_numpy()
    kept = (parent[then] == parent[first]) & cpp[np.maximum(parent[then], 0)]
    first, then = first[kept], then[kept]
    if runtime is not None and not runtime.empty:
        tids = frame["tid"].to_numpy()
        calls = _starts_in(runtime, tids[first], ends[first], starts[then])
        first, then = first[calls == 0], then[calls == 0]
    if len(first) < _MIN_GAPS:
        return None
    return PAID_OVER_GAP * float(np.median(np.maximum(starts[then] - ends[first], 0)))


def _starts_in(events: pd.DataFrame, tids: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """For each interval [a, b) on thread ``tids``: how many of ``events`` (``tid``,
    ``ts_ns``) started in it."""
    found = np.zeros(len(a), dtype="int64")
    for tid, mine_events in events.groupby("tid"):
        mine = np.flatnonzero(tids == tid)
        at = np.sort(mine_events["ts_ns"].to_numpy("int64"))
        found[mine] = np.searchsorted(at, b[mine]) - np.searchsorted(at, a[mine])
    return found


def op_parents(frame: pd.DataFrame) -> np.ndarray:
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
    """Each op's time less its children's and the profiler's bookkeeping inside its
    interval: its own, less the part that falls outside an op (one gap's worth,
    ``op_cost_ns / PAID_OVER_GAP``), and that part of each of its children, which falls
    between them (never below 0)."""
    nested = parent >= 0
    children = np.bincount(parent[nested], weights=durations[nested], minlength=len(durations))
    count = np.bincount(parent[nested], minlength=len(durations))
    outside = op_cost_ns / PAID_OVER_GAP
    return np.maximum(durations - children - (op_cost_ns - outside) - count * outside, 0.0)


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


def _by_thread(top: pd.DataFrame, ops_per_thread: pd.Series) -> pd.DataFrame:
    """``top``: the top-level ops; ``ops_per_thread``: every op, nested or not, by tid."""
    rows = []
    for tid, calls in top.groupby("tid"):
        starts = calls["ts_ns"].to_numpy("int64")
        ends = starts + calls["dur_ns"].to_numpy("int64")  # the stop taken out already
        span = int(ends.max() - starts.min())
        # top-level ops do not overlap (one starts once the last has ended: op_parents)
        inside = int((ends - starts).sum())
        rows.append(
            {
                "tid": int(tid),
                "span_ns": span,
                "in_ops_ns": inside,
                "gap_share": round(1 - inside / span, 4) if span > 0 else 0.0,
                "top_level_ops": len(calls),
                "ops": int(ops_per_thread[tid]),
                "median_op_ns": int(np.median(ends - starts)),
            }
        )
    table = pd.DataFrame(rows, columns=THREAD_COLUMNS)
    return table.sort_values("in_ops_ns", ascending=False).reset_index(drop=True)
