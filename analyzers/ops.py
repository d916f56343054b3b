"""CPU-side patterns in a model's ops (torch.profiler with ``record_shapes``).

``growing_prefix(ops)``: a decoder that generates without a KV cache runs the same op
sequence once per token on the whole sequence so far -- the inputs of its linear layers
are ``[batch, T, d]`` with T one longer each step (T0, T0+1, T0+2, ...). With a cache each
step after the first runs on the one new token. The finding names the op and shapes, the
steps, and what a cache buys: each step's time is fitted as ``a + b*T`` (a: the per-step
cost that does not grow, b: the cost per token of prefix), and with a cache the first
step (the prompt) stays ``a + b*T0`` while every later one becomes ``a + b``. Attention
over the cached keys still grows with T, which the model leaves out; but at a short
generation's lengths a cached step costs less than ``a + b``, not more: measured
unprofiled on the decoder (``benchmarks/kv_step_costs.py``, 2026-12-07), 0.69-0.88 of the
fit's ``a + b`` and flat in T, so there the estimate runs low. The step's cost is not a
line below the prompt's length: the whole sequence re-run at T = 1 costs 513-653 us
where the line through T 17-39 says 823-886, and a cached step costs about that T = 1
step; a trace holds no step shorter than its prompt, so nothing in it shows the bend.

A trace carries the profiler's own cost per op (``op_cost_ns``, read off the trace's
ops: ``op_breakdown.profiler_op_cost_ns``). Every op of a step pays it, with a cache or
without, so left in it reads as a per-step cost that does not grow and understates what
a cache buys; it is taken off each step as its op count times ``op_cost_ns`` before the
fit. With the cost the windows calibrated on probe's thread until 2026-12-07 (0.2-0.4
of what the decoder's ops paid) two windows of the decoder read 1.50x and 1.42x, and
1.73x and 1.58x with the trace's own, against 1.95x and 2.00x realised (generation time,
unprofiled, the same hour; read at a gap ratio of 2.0, before it was measured at 1.85:
tests/torch_corpus/decoder.truth.md).

A window is 0.1 s of the target's work, and the host can change the process's speed for
much of it (a shared machine: the decoder's steps ran 2.2x longer for 80 ms of one window
while its thread stayed on a CPU, the other core idle, so nothing in /proc shows it). A
stretch of slowed steps at the longer prefixes reads as growth per token: that window's
fit gave a = 0 and 14.9x where the 59 other windows of 60 runs gave 1.7-2.8x. The ops of
a step whose input shapes do not change from step to step (the weights' transposes, the
head on the last token) time the host's speed: a step whose such ops ran ``_OFF_SPEED``
times slower or faster than at the window's median step has its time scaled to that
speed (``rescaled_steps``); the rest are fitted as measured. Scaling every step instead
would take out a real growth of those ops with the prefix (~5% over 20 tokens in the
decoder's windows: longer activations evict the weights from the caches, work a cache
saves too), and leaving the off-speed steps out instead (the rule before) took the
window's fastest steps for its speed: where the host ran fast for the first 11 of 60
steps, it left 37 out and found no growth at all (2026-12-06).

The line is fitted a segment of the step at a time, and the segments' lines summed
(``segments``): a segment runs from one op called from Python (one not inside another)
to the next, the Python between them included, so the segments of a step add up to
it. Under ``probe run`` a window's steps are interrupted -- the stack sampler's tick
takes the GIL, a page fault, the other core's work -- and each interruption lands in one
segment: the decoder's profiled steps spread 1.0-3.2 ms where the same work takes ~1 ms,
and a step-at-a-time fit on a 0.1-s window (~2 generations) read 1.22-2.46x in 16 runs
(0.1-s windows, one sitting, 2026-12-07), the segments' 1.36-1.98x in the same windows;
the usual-speed model over unprofiled steps (a, b from ``benchmarks/kv_step_costs.py``)
gives ~1.45x. Only the steps running the sequence of calls most of them run are fitted so
(a step the window opened inside has fewer); where no sequence is most steps' (control
flow that varies from step to step), the steps' times are fitted whole.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
import pandas as pd

from probe.analyzers.op_breakdown import input_shapes

__all__ = ["PrefixFinding", "growing_prefix"]

# ops whose first input carries the sequence: the work that grows with the prefix
_SEQUENCE_OPS = ("aten::linear", "aten::addmm", "aten::matmul", "aten::mm", "aten::bmm")
# at least this many steps of +1 in a row: fewer could be a coincidence of shapes
_MIN_STEPS = 4
# the segments' fit pairs at most this many steps (~20,000 pairs; a block of 64 segments'
# slopes, ~10 MB): a bound on memory, not on accuracy (a 0.2-s window of the decoder
# holds ~100 steps)
_PAIRED_STEPS = 200
# a step ran off the host's usual speed when its shape-constant ops took this many times
# (or this fraction of) their time at the window's median step. In 5,514 steps of 59
# windows of the decoder (tests/torch_corpus/decoder.py, 2026-12-06) that ratio against
# the window's fastest tenth had a median of 1.04 and a 90th percentile of 1.11, and a
# window's slowed stretches read 1.8-2.5: any bound from 1.25 to 1.5 took the slowed
# window's estimate from 14.9x to 1.9x and moved no other window's median, 2.0 left
# transitional steps in. Against the median step, 30 windows of a noisier sitting
# (2026-12-06, later): see the README's KV-cache paragraph
_OFF_SPEED = 1.5


@dataclass(frozen=True)
class PrefixFinding:
    op: str
    shape: str  # the first input's shape, the growing axis as "T"
    first_length: int  # T at the first step (the prompt) of the first run
    steps: int  # every run's together
    runs: int  # the generations seen (one a request)
    step_ns: tuple[int, ...]  # each step's wall time on its thread, less the profiler's
    per_step_ns: float  # a: the cost of a step that does not grow with T
    per_token_ns: float  # b: the cost per token of prefix
    speedup: float  # the steps' time over their time with a KV cache (the model above)
    tid: int = 0  # the thread the steps ran on
    rescaled_steps: int = 0  # the host ran them off its usual speed: scaled (module doc)
    segments: int = 0  # the fit's, per step (module doc); 0: the steps' times were fitted


def growing_prefix(ops: pd.DataFrame, op_cost_ns: float = 0.0) -> PrefixFinding | None:
    """The op and shape whose sequence length grows by one token a step over the most
    steps (the module doc), with the KV cache's estimate; None when none grows so.
    ``op_cost_ns``: the profiler's own cost per op, taken off each step (module doc)."""
    shaped = ops[ops["name"].astype(str).isin(_SEQUENCE_OPS) & ops["input_dims"].notna()]
    best: tuple[str, int, str, list[_Run]] | None = None  # name, tid, shape, runs
    for (name, tid), calls in shaped.groupby(["name", "tid"], observed=True):
        found = _on_one_thread(calls)
        if found is not None and (best is None or _steps(found[1]) > _steps(best[3])):
            best = (str(name), int(tid), *found)
    if best is None:
        return None
    name, tid, masked, runs = best
    thread = _ThreadOps.of(ops[ops["tid"] == tid])
    return replace(_estimate(name, masked, runs, thread, op_cost_ns), tid=tid)


def _steps(runs: list[_Run]) -> int:
    return sum(len(run.lengths) for run in runs)


def _on_one_thread(calls: pd.DataFrame) -> tuple[str, list[_Run]] | None:
    """The masked shape of one op's calls whose runs of growing length hold the most
    steps, with those runs."""
    shapes = [_first_shape(d) for d in calls["input_dims"]]
    keyed: dict[str, list[tuple[int, int, int]]] = {}
    ends = (calls["ts_ns"] + calls["dur_ns"]).to_numpy()
    for ts, end, shape in zip(calls["ts_ns"].to_numpy(), ends, shapes, strict=True):
        if shape is None:
            continue
        for axis, length in enumerate(shape):
            masked = "[" + ",".join("T" if i == axis else str(v) for i, v in enumerate(shape)) + "]"
            keyed.setdefault(masked, []).append((int(ts), int(end), int(length)))
    best: tuple[str, list[_Run]] | None = None
    for masked, seen in keyed.items():
        runs = _growing_runs(seen)
        if runs and (best is None or _steps(runs) > _steps(best[1])):
            best = (masked, runs)
    return best


def _first_shape(dims: str) -> tuple[int, ...] | None:
    shapes = input_shapes(dims)
    return shapes[0] if shapes and shapes[0] else None


@dataclass(frozen=True)
class _ThreadOps:
    """One thread's ops in start order: a step's ops are a range of them."""

    starts: np.ndarray
    durations: np.ndarray
    keys: np.ndarray  # one code per (name, input shapes)
    names: np.ndarray  # one code per name
    top: np.ndarray  # not inside an op that started before it: called from Python

    @classmethod
    def of(cls, ops: pd.DataFrame) -> _ThreadOps:
        ordered = ops.sort_values("ts_ns", kind="stable")
        name = ordered["name"].astype(str)
        keys, _ = pd.factorize(name + "|" + ordered["input_dims"].astype(str))
        names, _ = pd.factorize(name)
        starts = ordered["ts_ns"].to_numpy(dtype="int64")
        durations = ordered["dur_ns"].to_numpy(dtype="float64")
        ends = starts + durations.astype("int64")
        covered = np.maximum.accumulate(np.r_[np.iinfo("int64").min, ends[:-1]])
        return cls(starts, durations, keys, names, starts >= covered)


@dataclass
class _Run:
    starts: list[int]  # when each step's first call began
    lengths: list[int]
    last_end: int  # when the last step's last call ended


def _growing_runs(seen: list[tuple[int, int, int]]) -> list[_Run]:
    """Runs of steps, in time order, whose length is one more than the step before (a
    request's generation); a length that repeats is the same step's other calls (its
    layers). Runs shorter than ``_MIN_STEPS`` are left out."""
    runs: list[_Run] = []
    run: _Run | None = None
    for ts, end, length in sorted(seen):
        if run is not None and length == run.lengths[-1]:
            run.last_end = max(run.last_end, end)
            continue
        if run is not None and length == run.lengths[-1] + 1:
            run.starts.append(ts)
            run.lengths.append(length)
            run.last_end = end
            continue
        if run is not None and len(run.lengths) >= _MIN_STEPS:
            runs.append(run)
        run = _Run([ts], [length], end)
    if run is not None and len(run.lengths) >= _MIN_STEPS:
        runs.append(run)
    return runs


def _theil_sen(t: np.ndarray, y: np.ndarray, most: int = 1000) -> tuple[float, float]:
    """Slope and intercept of ``y ~ a + b*t`` by Theil-Sen: the median of the pairwise
    slopes, then the median of ``y - b*t``. One step in a window stretched 100x (a
    decoder's last step under probe run, while torch.profiler's window opened) took a
    least-squares slope to 0; the medians hold until nearly a third of the steps are
    off. Over ``most`` steps, an even subsample keeps the pairs' count bounded."""
    if len(t) > most:
        keep = np.linspace(0, len(t) - 1, most).astype(int)
        t, y = t[keep], y[keep]
    i, j = np.triu_indices(len(t), k=1)
    dt = t[j] - t[i]
    varies = dt != 0
    b = float(np.median((y[j] - y[i])[varies] / dt[varies]))
    return b, float(np.median(y - b * t))


def _estimate(
    name: str, masked: str, runs: list[_Run], thread: _ThreadOps, op_cost_ns: float
) -> PrefixFinding:
    """Each step's time (its first call to the next step's; the last, to its last call)
    less the profiler's cost of its ops, those the host ran off its usual speed scaled to
    it, the fit a + b*T over every run's steps, and the cache's speedup over them all."""
    step_ns: list[float] = []
    bounds: list[tuple[int, int]] = []  # each step's ops: a range of the thread's
    lengths: list[int] = []
    whole: list[bool] = []  # the step's time runs to the next step's start
    cached = 0.0
    for run in runs:
        ends = [*run.starts[1:], run.last_end]
        for s, e in zip(run.starts, ends, strict=True):
            first, last = (int(i) for i in np.searchsorted(thread.starts, [s, e]))
            bounds.append((first, last))
            step_ns.append(max(e - s - (last - first) * op_cost_ns, 0.0))
        lengths += run.lengths
        whole += [True] * (len(run.lengths) - 1) + [False]
    t = np.array(lengths, dtype="float64")
    # Fitted without each run's last step: it ends at its last call of the op, not at
    # the next step's start, so it reads short at the run's longest prefix and pulls the
    # slope down (on 14 windows of the decoder: the cache's gain read 1.60x at the
    # median, 1.77x without them, against 1.84-1.86x realised: decoder.truth.md)
    fit = np.array(whole)
    scale = _off_speed(thread, bounds, fit)
    y = np.array(step_ns, dtype="float64") / scale
    tf, yf = t[fit], y[fit]
    by_segment = _segment_fit(thread, bounds, fit, t, scale, op_cost_ns)
    if by_segment is not None:  # the module doc: a line for each segment, summed
        b, a = float(by_segment[0].sum()), float(by_segment[1].sum())
    else:
        b, a = _theil_sen(tf, yf) if len(set(tf)) > 1 else (0.0, float(np.median(y)))
    b, a = max(float(b), 0.0), max(float(a), 0.0)
    for run in runs:
        cached += (a + b * run.lengths[0]) + (len(run.lengths) - 1) * (a + b)
    # the fitted steps on both sides: a step stretched by something else (the profiler
    # window's own start, a pause of the process) is not work a cache would save
    uncached = float(np.sum(a + b * t))
    speedup = uncached / cached if cached > 0 else 1.0
    return PrefixFinding(
        op=name,
        shape=masked,
        first_length=runs[0].lengths[0],
        steps=len(lengths),
        runs=len(runs),
        step_ns=tuple(int(v) for v in step_ns),  # as measured: the share of the thread
        per_step_ns=a,
        per_token_ns=b,
        speedup=max(1.0, speedup),
        rescaled_steps=int((scale != 1.0).sum()),
        segments=0 if by_segment is None else len(by_segment[0]),
    )


def _segment_fit(
    thread: _ThreadOps,
    bounds: list[tuple[int, int]],
    whole: np.ndarray,
    lengths: np.ndarray,
    scale: np.ndarray,
    op_cost_ns: float,
) -> tuple[np.ndarray, np.ndarray] | None:
    """Slopes and intercepts, one per segment of a step (module doc: from one call made
    from Python to the next), of the whole steps that run the usual sequence of such
    calls (that of more than half of them); None where no sequence is, or fewer than
    ``_MIN_STEPS`` steps or one length are left."""
    tops = np.flatnonzero(thread.top)
    by_sequence: dict[bytes, list[int]] = {}
    cuts: list[np.ndarray] = []
    for i, (first, last) in enumerate(bounds):
        inner = tops[(tops > first) & (tops < last)]
        cuts.append(inner)
        if whole[i]:
            by_sequence.setdefault(thread.names[inner].tobytes(), []).append(i)
    if not by_sequence:
        return None
    kept = max(by_sequence.values(), key=len)  # a step the window cut has fewer calls
    usual = 2 * len(kept) > int(whole.sum())  # the sequence of most steps, or none
    if not usual or len(kept) < _MIN_STEPS or len(set(lengths[kept])) < 2:
        return None
    rows = []
    for i in kept:
        first, last = bounds[i]
        edges = np.r_[first, cuts[i], last]  # a whole step ends where the next starts
        ns = np.diff(thread.starts[edges]) - np.diff(edges) * op_cost_ns
        rows.append(np.maximum(ns, 0.0) / scale[i])
    return _theil_sen_columns(lengths[kept].astype("float64"), np.array(rows))


def _theil_sen_columns(t: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``_theil_sen`` on each column of ``y`` (steps x segments). The pairs' slopes are
    held a block of columns at a time, and the steps evenly subsampled to at most
    ``_PAIRED_STEPS``: a bounded memory, whatever the window holds."""
    if len(t) > _PAIRED_STEPS:
        keep = np.linspace(0, len(t) - 1, _PAIRED_STEPS).astype(int)
        t, y = t[keep], y[keep]
    i, j = np.triu_indices(len(t), k=1)
    dt = t[j] - t[i]
    i, j, dt = i[dt != 0], j[dt != 0], dt[dt != 0]
    b = np.concatenate(
        [
            np.median((y[j, k : k + 64] - y[i, k : k + 64]) / dt[:, None], axis=0)
            for k in range(0, y.shape[1], 64)
        ]
    )
    return b, np.median(y - t[:, None] * b, axis=0)


def _off_speed(thread: _ThreadOps, bounds: list[tuple[int, int]], whole: np.ndarray) -> np.ndarray:
    """Each step's speed against the window's median step where the host ran it
    ``_OFF_SPEED`` times slower or faster, else 1 (module doc): in each step, the ops whose
    name and input shapes recur in every whole step, each op's time over its kind's
    median, the step's median of those. The median step is one step's own (the lower
    middle): where the window's steps ran at two speeds in near halves, an average of the
    two could leave both within the bound."""
    ones = np.ones(len(bounds))
    step_of = np.full(len(thread.starts), -1)
    for i, (first, last) in enumerate(bounds):
        step_of[first:last] = i
    in_whole = (step_of >= 0) & whole[np.maximum(step_of, 0)]
    ops = pd.DataFrame(
        {"key": thread.keys[in_whole], "step": step_of[in_whole], "ns": thread.durations[in_whole]}
    )
    recurring = ops.groupby("key")["step"].nunique()
    kept = ops[ops["key"].isin(recurring.index[recurring == int(whole.sum())])]
    if kept.empty or whole.sum() < 2:
        return ones
    relative = kept["ns"] / kept.groupby("key")["ns"].transform("median")
    speed = relative.groupby(kept["step"]).median().reindex(range(len(bounds))).to_numpy()
    usual = float(np.quantile(speed[whole & np.isfinite(speed)], 0.5, method="lower"))
    if not usual > 0:
        return ones
    off = speed / usual
    rescaled = np.isfinite(off) & ((off >= _OFF_SPEED) | (off <= 1 / _OFF_SPEED))
    return np.where(rescaled, off, 1.0)
