"""Dynamic batching: the batch size that buys the most throughput within a latency budget.

``batch_curve(calls)`` -> the stage's latency by batch size, from one row per call
(``batch``, ``latency_s``): measured by ``probe batch-sweep`` or read from stage spans that
carry a ``batch`` attribute. ``advise(curve, ...)`` -> ``BatchAdvice``.

The model (what a dynamic batcher does: Triton's ``max_batch_size`` and
``max_queue_delay``, TorchServe's ``batch_size`` and ``max_batch_delay``):

* **A batch's service time** ``L(b)``: the measured median of calls at batch ``b`` --
  where a sweep timed them in passes, the least of its passes' medians (a slow spell of
  the host slows a pass, and slowdowns only add time) --, ``L99(b)`` their 99th
  percentile. Only measured sizes are recommended; between them nothing is
  interpolated, beyond them nothing extrapolated. The straight line
  ``L(b) = fixed + b x per_item`` (least squares on the medians) is reported as the
  reason batching pays or not: ``fixed`` is what a call costs whatever its size
  (dispatch, reading the weights), paid once a batch instead of once a request.
* **The rest of a request** ``r``: what a request costs on the same path outside the stage
  (parsing, labelling), from a run of the service at the batch size ``b0`` it serves at
  (``--against``): the stage took a share ``p`` of the run's path, so the rest is
  ``r = (L(b0) / b0) x (1 - p) / p`` a request, on the sweep's clock. A worker that runs a
  batch's requests and then the stage, one after the other, spends ``b x r + L(b)`` a
  batch, so ``X(b) = b / (b x r + L(b))`` requests a second at most (the bottleneck law on
  the one worker), and the run's own rate changes by ``X(b) / X(b0)`` -- which is Amdahl's
  law on the stage, ``1 / ((1 - p) + p x (L(b) / b) / (L(b0) / b0))``. Without a run,
  ``r = 0``: the stage's own ceiling, said as such.
* **The loop around the call** ``g``: in a batch job, the share of the run its callers'
  own code took while the stage was being called (``glue_share``: the loop, stacking
  inputs into a batch, splitting the outputs) runs once a call, not once a request:
  ``c = L(b0) x g / p`` a call, and a batch costs ``b x r + c + L(b)`` with ``r`` from
  ``1 - p - g``. Counted per request, it had the bundled batch_scorer's job gaining
  1.54-1.71x where it realised 1.96-2.06x (stacking one row, a generator and a list's
  extend once a request: 0.14-0.24 s of the ~2.5-s plain job at batch 1, 0.02-0.03 s at
  128, by in-process timers; tests/serving_corpus/batching.truth.md). A caller whose own
  code does per-request work inline would gain less than that says: the figure with
  ``g`` counted per request (``floor_over_run``) is reported beside it. A served run has
  none: each request runs its handler whatever the batch.
* **Latency** below that ceiling: a request waits at most for its batch to fill (the
  maximum queue delay ``d``), for the batch in service to finish, and for its own:
  ``p99 <= d + 2 x (b x r + L99(b))``. A bound, not a mean: a request arriving as a batch
  starts waits the longest.
* **The choice**: among the sizes whose bound with ``d = 0`` fits the SLA (all, without
  one), the smallest whose ceiling is within the sweep's noise of the best one's -- more
  requests in a batch cost each of them latency, and buy nothing the noise cannot hide.
* **The maximum queue delay**: what the SLA leaves after the bound (a batcher may wait that
  long for company and still keep its promise); without an SLA, one batch's service time
  ``b x r + L(b)`` (a batch fills while the previous one runs: the worker never idles for
  want of a full batch, and a lone request waits at most one batch). With an arrival rate,
  never longer than the rate takes to fill the batch.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import pandas as pd

from probe.analyzers.constants import constant
from probe.analyzers.spantree import span_attrs

__all__ = [
    "BATCHING",
    "BatchAdvice",
    "BatchSettings",
    "LinearFit",
    "advise",
    "batch_curve",
    "calls_unsampled_around",
    "glue_share",
    "linear_fit",
    "span_calls",
    "spans_advice",
    "stage_share",
]


@dataclass(frozen=True)
class BatchSettings:
    near_best: float = constant(
        0.95,
        "a ceiling within 5% of the best counts as the best: five sweeps of the bundled "
        "batch_scorer on this machine class moved its top sizes' ceilings by 4-7% "
        "(tests/serving_corpus/batching.truth.md)",
    )
    min_calls: int = constant(
        3,
        "a batch size measured fewer times is not judged: one call can be a page fault "
        "or a cache miss's worth of its own",
    )
    moved: float = constant(
        1.10,
        "the sweep's passes alone predicting gains more than 10% apart: beyond the 4-7% "
        "five sweeps of batch_scorer on a calm host moved by (batching.truth.md); a "
        "busy host's moved 1.7-2.1x within one sweep (2026-12-02)",
    )


BATCHING = BatchSettings()


@dataclass(frozen=True)
class LinearFit:
    fixed_s: float  # what a call costs whatever its size
    per_item_s: float  # what each request in it adds
    r2: float  # the line's fit to the medians (1: a straight line)

    @property
    def fixed_share(self) -> float:
        """The fixed cost's share of a lone request's call: what batching can amortise."""
        one = self.fixed_s + self.per_item_s
        return self.fixed_s / one if one > 0 else 0.0


@dataclass(frozen=True)
class BatchAdvice:
    batch: int
    max_queue_delay_s: float
    throughput: float  # requests a second at most, at ``batch``
    throughput_at_1: float | None  # the same at batch 1, when it was measured
    p99_bound_s: float  # latency below the ceiling, the queue delay included
    rest_s: float  # the rest of a request, per request (0: the stage alone)
    run_batch: int | None  # the size the run it was set against served at (None: no run)
    sla_s: float | None
    rate: float | None
    curve: pd.DataFrame  # by batch: calls, p50_s, p99_s, cycle_s, cycle99_s, throughput, fits_sla
    fit: LinearFit | None
    notes: list[str] = field(default_factory=list)
    stage: str = ""  # the stage's name, where it came from a run's spans
    glue_s: float = 0.0  # the loop around the call, per call (module doc)

    @property
    def speedup(self) -> float | None:
        if not self.throughput_at_1:
            return None
        return self.throughput / self.throughput_at_1

    @property
    def speedup_over_run(self) -> float | None:
        """What the run's own rate gains at ``batch`` (Amdahl on the stage); None without
        a run, or when the run's size was not swept."""
        if self.run_batch is None or self.run_batch not in self.curve.index:
            return None
        return self.throughput / float(self.curve.loc[self.run_batch, "throughput"])

    @property
    def floor_over_run(self) -> float | None:
        """``speedup_over_run`` with the loop around the call counted once a request, as
        the run served them: the least the run gains at ``batch`` by this model."""
        if self.run_batch is None or self.run_batch not in self.curve.index:
            return None
        per_request = self.rest_s + self.glue_s / self.run_batch
        rates = _with_ceilings(self.curve, per_request, 0.0, None)["throughput"]
        return float(rates[self.batch] / rates[self.run_batch])

    def to_dict(self) -> dict[str, Any]:
        return {
            **({"stage": self.stage} if self.stage else {}),
            "batch": self.batch,
            "max_queue_delay_ms": round(self.max_queue_delay_s * 1e3, 3),
            "throughput": round(self.throughput, 3),
            "throughput_at_1": _rounded(self.throughput_at_1, 3),
            "speedup": _rounded(self.speedup, 3),
            "p99_bound_ms": round(self.p99_bound_s * 1e3, 3),
            "rest_ms": round(self.rest_s * 1e3, 4),
            "glue_ms": round(self.glue_s * 1e3, 4),
            "basis": "stage" if self.speedup_over_run is None else "service",
            "run_batch": self.run_batch,
            "speedup_over_run": _rounded(self.speedup_over_run, 3),
            "floor_over_run": _rounded(self.floor_over_run, 3),
            "sla_ms": None if self.sla_s is None else round(self.sla_s * 1e3, 3),
            "rate": self.rate,
            "fit": None if self.fit is None else _fit_dict(self.fit),
            "curve": _curve_records(self.curve),
            "notes": self.notes,
        }


def _rounded(x: float | None, digits: int) -> float | None:
    return None if x is None or not math.isfinite(x) else round(x, digits)


def _fit_dict(fit: LinearFit) -> dict[str, float]:
    return {
        "fixed_ms": round(fit.fixed_s * 1e3, 4),
        "per_item_ms": round(fit.per_item_s * 1e3, 4),
        "fixed_share": round(fit.fixed_share, 4),
        "r2": round(fit.r2, 4),
    }


def _curve_records(curve: pd.DataFrame) -> list[dict[str, Any]]:
    return [
        {
            "batch": int(b),
            "calls": int(row["calls"]),
            "p50_ms": round(float(row["p50_s"]) * 1e3, 4),
            "p99_ms": round(float(row["p99_s"]) * 1e3, 4),
            "throughput": round(float(row["throughput"]), 3),
            "fits_sla": bool(row["fits_sla"]),
        }
        for b, row in curve.iterrows()
    ]


def batch_curve(calls: pd.DataFrame, settings: BatchSettings = BATCHING) -> pd.DataFrame:
    """By batch size (ascending): ``calls``, ``p50_s`` (with a ``pass`` column, the least
    of the passes' medians), ``p99_s`` (the 99th percentile of the calls; their maximum
    where fewer than 100 were made). Sizes measured fewer than ``min_calls`` times are
    left out; non-positive sizes and latencies are not calls."""
    valid = calls[(calls["batch"] > 0) & (calls["latency_s"] > 0)]
    valid = valid[np.isfinite(valid["latency_s"].to_numpy(dtype=float))]
    sizes = valid["batch"].astype(int)
    grouped = valid.groupby(sizes)["latency_s"]
    if "pass" in valid.columns:
        passes = valid.groupby([sizes, valid["pass"]])["latency_s"].median()
        p50 = passes.groupby(level=0).min()
    else:
        p50 = grouped.median()
    curve = pd.DataFrame(
        {
            "calls": grouped.size(),
            "p50_s": p50,
            "p99_s": grouped.quantile(0.99, interpolation="higher"),
        }
    )
    curve.index.name = "batch"
    return curve[curve["calls"] >= settings.min_calls].sort_index()


def linear_fit(curve: pd.DataFrame) -> LinearFit | None:
    """``L(b) = fixed + b x per_item`` by least squares on the medians; None below two sizes."""
    if len(curve) < 2:
        return None
    b = curve.index.to_numpy(dtype=float)
    y = curve["p50_s"].to_numpy(dtype=float)
    per_item, fixed = np.polyfit(b, y, 1)
    residual = float(np.sum((y - (fixed + per_item * b)) ** 2))
    total = float(np.sum((y - y.mean()) ** 2))
    r2 = 1.0 - residual / total if total > 0 else 1.0
    return LinearFit(fixed_s=float(fixed), per_item_s=float(per_item), r2=r2)


def advise(
    curve: pd.DataFrame,
    *,
    run_share: float | None = None,
    run_batch: int = 1,
    run_glue: float = 0.0,
    sla_s: float | None = None,
    rate: float | None = None,
    settings: BatchSettings = BATCHING,
) -> BatchAdvice | None:
    """The batch size and maximum queue delay to configure (module docstring), from
    ``batch_curve``'s table; ``run_share``: the stage's share of a run's path at
    ``run_batch`` requests a call; ``run_glue``: its callers' own share there, the loop
    around the call (``glue_share``). None when no size was measured."""
    if curve.empty:
        return None
    notes: list[str] = []
    rest, glue = _rest_per_request(curve, run_share, run_batch, run_glue, notes)
    table = _with_ceilings(curve, rest, glue, sla_s)
    choice, why = _choose(table, settings)
    notes += why
    row = table.loc[choice]
    delay = _queue_delay(choice, float(row["cycle_s"]), float(row["cycle99_s"]), sla_s, rate)
    if rate is not None and rate >= float(row["throughput"]):
        notes.append(
            f"{rate:g} requests/s is more than batch {choice} serves ({row['throughput']:.0f}/s "
            "at most): the queue grows without bound; add workers or replicas"
        )
    one = float(table.loc[1, "throughput"]) if 1 in table.index else None
    return BatchAdvice(
        batch=int(choice),
        max_queue_delay_s=delay,
        throughput=float(row["throughput"]),
        throughput_at_1=one,
        p99_bound_s=delay + 2.0 * float(row["cycle99_s"]),
        rest_s=rest,
        run_batch=run_batch if run_share is not None and run_batch in table.index else None,
        sla_s=sla_s,
        rate=rate,
        curve=table,
        fit=linear_fit(curve),
        notes=notes,
        glue_s=glue,
    )


@dataclass(frozen=True)
class PassSpread:
    """What the sweep's passes, each on its own, predict the run gains at the advised
    size: a host whose speed moves while the sweep runs (a busy neighbour on a shared
    cache slows a one-row call that streams its weights far more than a batch that reads
    them once) moves them apart, where the advice takes each size's fastest pass."""

    low: float
    high: float
    run_batch: int
    run_batch_s: tuple[float, float]  # the run's size: its fastest and slowest pass medians

    def note(self, settings: BatchSettings = BATCHING) -> str | None:
        """What to say when the passes' figures lie further apart than a calm host's."""
        if self.high < settings.moved * self.low:
            return None
        fast, slow = (x * 1e6 for x in self.run_batch_s)
        return (
            f"the host's speed moved while the sweep ran: its passes alone predict "
            f"{self.low:.2f}-{self.high:.2f}x (batch {self.run_batch} took {fast:,.0f}-"
            f"{slow:,.0f} us a call across them). The figure is from each size's fastest "
            "pass, a quiet host's; on a host this busy the gain may differ by as much: "
            "sweep again when it is quiet, or time the stage in the service (@probe.stage)"
        )


def across_passes(
    calls: pd.DataFrame, advice: BatchAdvice, run_share: float, run_glue: float
) -> PassSpread | None:
    """The gain over the run at ``advice.batch`` that each pass of the sweep (``calls``'
    ``pass`` column) predicts on its own medians, as ``advise`` does on the fastest; None
    without passes, a run, or a pass that timed both sizes."""
    b0 = advice.run_batch
    if b0 is None or "pass" not in calls.columns or calls["pass"].nunique() < 2:
        return None
    gains, medians = [], []
    for _, one in calls.groupby("pass"):
        curve = batch_curve(one.drop(columns="pass"))
        if advice.batch not in curve.index or b0 not in curve.index:
            continue
        rest, glue = _rest_per_request(curve, run_share, b0, run_glue, [])
        rates = _with_ceilings(curve, rest, glue, None)["throughput"]
        gains.append(float(rates[advice.batch] / rates[b0]))
        medians.append(float(curve.loc[b0, "p50_s"]))
    if len(gains) < 2:
        return None
    return PassSpread(min(gains), max(gains), b0, (min(medians), max(medians)))


def _rest_per_request(
    curve: pd.DataFrame, run_share: float | None, run_batch: int, run_glue: float, notes: list[str]
) -> tuple[float, float]:
    """(``r`` a request, ``c`` a call) on the sweep's clock, from the stage's and its
    callers' shares of the run's path (0, 0: no run)."""
    if run_share is None:
        return 0.0, 0.0
    if run_batch not in curve.index:
        notes.append(
            f"the run served {run_batch} requests a call, a size the sweep did not measure: "
            "the stage's own ceilings, without the rest of the request"
        )
        return 0.0, 0.0
    p = min(max(run_share, 1e-6), 1.0)
    g = min(max(run_glue, 0.0), 1.0 - p)
    call = float(curve.loc[run_batch, "p50_s"])
    return call / run_batch * (1.0 - p - g) / p, call * g / p


def _with_ceilings(
    curve: pd.DataFrame, rest: float, glue: float, sla_s: float | None
) -> pd.DataFrame:
    b = curve.index.to_numpy(dtype=float)
    cycle = b * rest + glue + curve["p50_s"].to_numpy(dtype=float)
    cycle99 = b * rest + glue + curve["p99_s"].to_numpy(dtype=float)
    fits = 2.0 * cycle99 <= sla_s if sla_s is not None else np.ones(len(b), dtype=bool)
    return curve.assign(cycle_s=cycle, cycle99_s=cycle99, throughput=b / cycle, fits_sla=fits)


def _choose(table: pd.DataFrame, settings: BatchSettings) -> tuple[int, list[str]]:
    """The smallest size within the noise of the best ceiling among those that fit."""
    fitting = table[table["fits_sla"]]
    if fitting.empty:
        smallest = int(table.index[0])
        return smallest, [
            f"no measured batch size keeps p99 within the SLA (batch {smallest}: "
            f"{2e3 * table['cycle99_s'].iloc[0]:.1f} ms at most): batching cannot hold it; "
            "a faster stage or more replicas must"
        ]
    best = float(fitting["throughput"].max())
    near = fitting[fitting["throughput"] >= settings.near_best * best]
    choice = int(near.index[0])
    notes = []
    largest = int(table.index[-1])
    if choice == largest:
        notes.append(
            f"the largest size swept ({largest}) is the best: a larger batch may serve more; "
            "sweep further (--sizes) to find where it stops paying"
        )
    return choice, notes


def _queue_delay(
    batch: int, cycle: float, cycle99: float, sla_s: float | None, rate: float | None
) -> float:
    delay = max(0.0, sla_s - 2.0 * cycle99) if sla_s is not None else cycle
    if rate is not None and rate > 0:
        delay = min(delay, (batch - 1) / rate)  # the batch's last request arrives by then
    return delay


def span_calls(spans: pd.DataFrame) -> pd.DataFrame:
    """Stage spans that carry an integer ``batch`` attribute, as calls: ``stage``,
    ``batch``, ``latency_s`` (empty when none does)."""
    rows: list[tuple[str, int, float]] = []
    if not spans.empty and "attrs" in spans:
        marked = spans[spans["attrs"].astype("string").fillna("").str.contains('"batch"')]
        for name, attrs, start, end in zip(
            marked["name"], marked["attrs"], marked["start_ns"], marked["end_ns"], strict=True
        ):
            size = _batch_of(attrs)
            if size is not None:
                rows.append((str(name), size, (int(end) - int(start)) / 1e9))
    return pd.DataFrame(rows, columns=["stage", "batch", "latency_s"])


def _batch_of(attrs: object) -> int | None:
    value = span_attrs(attrs).get("batch")
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        return None
    return value


def stage_share(stages: pd.DataFrame, wanted: str) -> tuple[str, float]:
    """(the stage's name, its share of the run's path) for the stage ``wanted`` names: a
    stage of that name, or the function of that name (``score`` is ``score (app.py)``).
    LookupError naming the stages there are, when none matches or several functions do."""
    names = [str(n) for n in stages.index]
    exact = [n for n in names if n == wanted]
    matches = exact or [n for n in names if n.split(" (", 1)[0] == wanted]
    if len(matches) != 1:
        known = ", ".join(names[:8]) + (" ..." if len(names) > 8 else "")
        how = "several stages are" if matches else "no stage is"
        raise LookupError(f"{how} named {wanted!r} in the run (its stages: {known or 'none'})")
    share = float(stages.loc[matches[0], "path_share"])
    return matches[0], share


def glue_share(
    samples: pd.DataFrame, stages: pd.DataFrame, stage: str, callers: frozenset[str]
) -> tuple[float, list[str]]:
    """(the share of the run's path its ``callers``' own code took while ``stage`` was
    being called, those callers by name): the loop around the call (module doc).
    ``samples``: one row per sample, ``ts_ns``, ``user_function`` (``label_stacks``) and
    ``comprehension`` (both ``stacks.label_stacks``'); ``stages``: the breakdown's function
    table, ``path_share`` by name. While: between the stage's first and last sample -- a
    caller's own time before the loop (its set-up, a script's imports when the caller is
    ``<module>``) is not the loop's. Not in a comprehension of the caller's: that loops
    over a batch's items (``[parse(r) for r in chunk]``), once a request."""
    mine = samples.loc[samples["user_function"] == stage, "ts_ns"]
    if mine.empty:
        return 0.0, []
    first, last = int(mine.min()), int(mine.max())
    share, named = 0.0, []
    for caller in sorted(callers):
        if caller == stage or caller not in stages.index:
            continue
        theirs = samples[samples["user_function"] == caller]
        if theirs.empty:
            continue
        at = theirs["ts_ns"]
        looped = theirs["comprehension"].to_numpy(dtype=bool)
        during = float(((at >= first) & (at <= last) & ~looped).mean())
        part = float(stages.loc[caller, "path_share"]) * during
        if part > 0:
            share += part
            named.append(caller)
    return share, named


def calls_unsampled_around(samples: pd.DataFrame, stage: str) -> tuple[int, float]:
    """(the samples taken while ``stage`` was being called, the most of that time its
    callers' own code can have taken, at 95% confidence, when none of those samples fell
    in it: 3 / n, the rule of three for a binomial share with no success in n trials).
    For a loop around the call too brief to draw a sample in a short or sparsely sampled
    run (a few-percent loop, a host slow enough that the pacer spaced the ticks out):
    unmeasured, not absent. ``samples`` as ``glue_share``'s. (0, 1.0) for a stage never
    sampled."""
    at = samples["ts_ns"]
    mine = at[samples["user_function"] == stage]
    if mine.empty:
        return 0, 1.0
    n = int(((at >= int(mine.min())) & (at <= int(mine.max()))).sum())
    return n, min(1.0, 3.0 / n)


def spans_advice(
    spans: pd.DataFrame, sla_s: float | None = None, settings: BatchSettings = BATCHING
) -> BatchAdvice | None:
    """The advice for the stage whose spans carry the most batch sizes (two at least, each
    measured ``min_calls`` times), on the stage's own figures: a run that served at
    several sizes has no one share to scale the rest of a request by."""
    calls = span_calls(spans)
    best: tuple[int, str, pd.DataFrame] | None = None
    for stage, rows in calls.groupby("stage"):
        curve = batch_curve(rows, settings)
        if len(curve) >= 2 and (best is None or len(curve) > best[0]):
            best = (len(curve), str(stage), curve)
    if best is None:
        return None
    advice = advise(best[2], sla_s=sla_s, settings=settings)
    return None if advice is None else replace(advice, stage=best[1])
