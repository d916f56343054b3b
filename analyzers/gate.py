"""A CI gate over a run's figures: assertions, and regressions against a baseline judged
by the runs' own noise (``probe check``).

Assertions (``parse_assertion``) are small expressions on the figures a diagnosis holds:

    p99(POST /predict) < 200ms     p50 < 40ms            throughput >= 500/s
    errors(POST /predict) == 0     error_rate < 1%       requests >= 1000
    share(cpu/python) < 0.6        no leak

``pXX(NAME)`` is an endpoint's latency percentile (a served app's route), else a stage's;
without a name, the run's requests'. ``share(KIND[/SUBKIND])`` is the share of the run's
time the diagnosis's findings give that limit (0 where none names it). ``no leak`` holds
unless the leak verdict is "leak" (an undetermined one holds, and says why). Each is
evaluated on the diagnosis as ``diagnosis.json`` has it (``evaluate``), so a run
directory and a saved diagnosis are judged alike.

Regressions (``regressions``): for each request name both runs served, the p50 and p99
latency, and the throughput of the run. A figure regressed when it is worse than the
baseline by more than ``max_regression`` *and* the difference is beyond the runs' noise:
the 95% interval of the ratio lies wholly above 1. For a percentile, the interval is a
bootstrap of each run's slices in time, the percentile read over the requests of the
slices drawn (``_pooled_ratio_interval``); with too few requests to slice, it runs from
the far ends of each run's distribution-free interval of it (order statistics:
``_quantile_interval``), which holds its coverage in the tail where resampling does not;
for throughput, it is a bootstrap of each run's completions in ten equal slices of its
serving window (batch means). So an unchanged service passes however noisy its tail, and
a slowdown larger than allowed fails once the runs hold enough requests to show it.
Against a baseline that is only a ``diagnosis.json`` there are no requests to resample:
figures are judged by the threshold alone, and the result says so. Where a side's
threads waited for CPUs other processes held, each figure is judged again with that wait
taken out of each request, and regressed only where both judgements say so
(``regressions``) -- where the requests' threads did nothing else; where they did (a
served app's worker threads), a slower figure is inconclusive, with no figure without it.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence, Sized
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import pandas as pd

from probe.rundir.schema import RUNNABLE_REASONS

__all__ = [
    "Assertion",
    "CheckResult",
    "GateSyntaxError",
    "Regression",
    "change_text",
    "evaluate",
    "parse_assertion",
    "regressions",
    "request_latencies",
    "request_names",
]

PERCENTILES = ("p50", "p90", "p95", "p99")
_TIME_UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0}
_RATE_UNITS = {"": 1.0, "/s": 1.0, "rps": 1.0, "req/s": 1.0, "/min": 1 / 60}
_FRACTION_UNITS = {"": 1.0, "%": 0.01}
_COUNT_UNITS = {"": 1.0}
# figure -> (the units it takes, how its values are shown)
_FIGURES: dict[str, tuple[dict[str, float], str]] = {
    **{p: (_TIME_UNITS, "time") for p in PERCENTILES},
    "throughput": (_RATE_UNITS, "rate"),
    "requests": (_COUNT_UNITS, "count"),
    "errors": (_COUNT_UNITS, "count"),
    "error_rate": (_FRACTION_UNITS, "fraction"),
    "share": (_FRACTION_UNITS, "fraction"),
}
_OPS = {
    "<": np.less,
    "<=": np.less_equal,
    ">": np.greater,
    ">=": np.greater_equal,
    "==": np.equal,
}
# bootstrap resamples: 2,000 put the 2.5% and 97.5% points within ~1% of where more
# resamples put them (Efron & Tibshirani, An Introduction to the Bootstrap, ch. 13)
BOOTSTRAP_RESAMPLES = 2_000
# Batch means: each run cut into up to 10 slices in time (the usual 10-30 batches of the
# method; Law & Kelton, Simulation Modeling and Analysis, 9.5.3), each slice holding
# enough requests for its percentile to mean something: 20 for a median, 200 for a p99
# (two requests above it); a side needs 4 slices for an interval at all.
SLICES_PER_RUN = 10
_PER_SLICE = {50: 20, 90: 50, 95: 100, 99: 200}
MIN_SLICES = 4
# quantiles a slice is summarized by for the percentiles' bootstrap (``_summarized``)
_SLICE_POINTS = 500


# A request's wait for a CPU is read from its own thread only where that thread did at
# least this share of its process's sampled CPU, and spent this share of its serving
# window in requests (``_lone_request_threads``): the rest -- other threads' CPU, or the
# thread's own work between requests -- is time whose waits are not the machine's part
# of a request (other threads hold the GIL the request's thread waits on) or move the
# throughput without being in any request. At 95% that error stays within half the
# default --max-regression (10%). Measured (2026-12-04): a one-thread service beside 0
# or 4 CPU hogs 1.000 of the CPU, 0.999 of its time in requests (probe's sampler is not
# sampled); uvicorn's sync route 0.28-0.32 of the CPU (the loop thread); gunicorn's sync
# workers 0.99 of the CPU, 0.65-0.84 of their time in requests.
LONE_THREAD_SHARE = 0.95


class GateSyntaxError(ValueError):
    """An assertion that does not parse: what is wrong, and at which character."""

    def __init__(self, message: str, column: int) -> None:
        super().__init__(message)
        self.column = column


@dataclass(frozen=True)
class Assertion:
    text: str
    figure: str  # "p99", "throughput", ..., "leak"
    subject: str | None = None  # a route or stage; for share, KIND[/SUBKIND]
    op: str = ""
    threshold: float = 0.0  # base units: seconds, per second, a fraction, a count


@dataclass(frozen=True)
class CheckResult:
    text: str
    value: float | None  # None: the figure is not in this run
    shown: str  # the value as read, with its unit
    held: bool
    note: str = ""


@dataclass(frozen=True)
class Regression:
    figure: str  # "p50(POST /predict)", "throughput"
    baseline: float
    value: float
    slowdown: float  # > 1: worse (latency new/base; throughput base/new)
    interval: tuple[float, float] | None  # 95% bootstrap interval of the slowdown
    regressed: bool
    unit: str = "s"  # "s" or "/s"
    notes: list[str] = field(default_factory=list)
    worse: bool = False  # worse than allowed (regressed, or inconclusive within the noise)
    # where a side waited for a CPU other processes held: the slowdown and its interval
    # with that wait taken out of the requests (``regressions``); None elsewhere
    without_the_machine: tuple[float, tuple[float, float] | None] | None = None

    @property
    def state(self) -> str:
        return "regressed" if self.regressed else "inconclusive" if self.worse else "ok"


def parse_assertion(text: str) -> Assertion:
    if re.fullmatch(r"\s*no\s+leak\s*", text, flags=re.IGNORECASE):
        return Assertion(text=text.strip(), figure="leak")
    m = re.match(r"\s*([A-Za-z_][A-Za-z0-9_]*)\s*", text)
    if not m:
        raise GateSyntaxError("expected a figure (p99, throughput, share, ...)", _col(text, 0))
    figure, at = m.group(1).lower(), m.end()
    if figure not in _FIGURES:
        known = ", ".join([*_FIGURES, "no leak"])
        raise GateSyntaxError(f"unknown figure {m.group(1)!r}; figures are {known}", m.start(1))
    subject = None
    if text.startswith("(", at):
        close = text.find(")", at)
        if close < 0:
            raise GateSyntaxError("missing ')'", len(text))
        subject = text[at + 1 : close].strip() or None
        at = close + 1
    m = re.compile(r"\s*(<=|>=|==|<|>)\s*").match(text, at)
    if not m:
        raise GateSyntaxError("expected a comparison (<, <=, >, >=, ==)", _col(text, at))
    op, at = m.group(1), m.end()
    m = re.compile(r"([0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)\s*").match(text, at)
    if not m:
        raise GateSyntaxError("expected a number", at)
    number, at = float(m.group(1)), m.end()
    unit = text[at:].strip()
    units, _ = _FIGURES[figure]
    if units is _TIME_UNITS and not unit:
        raise GateSyntaxError(f"{figure} needs a unit (ns, us, ms or s)", at)
    if unit not in units:
        allowed = ", ".join(repr(u) for u in units if u) or "none"
        raise GateSyntaxError(f"unknown unit {unit!r} for {figure} (units: {allowed})", at)
    return Assertion(text.strip(), figure, subject, op, number * units[unit])


def _col(text: str, at: int) -> int:
    return len(text) - len(text[at:].lstrip()) if at < len(text) else at


def evaluate(assertion: Assertion, diagnosis: dict[str, Any]) -> CheckResult:
    """``assertion`` on a diagnosis as ``diagnosis.json`` holds it."""
    if assertion.figure == "leak":
        leak = diagnosis.get("leak") or {}
        state = str(leak.get("state") or ("leak" if leak.get("detected") else "no_leak"))
        note = str(leak.get("reason") or "") if state != "no_leak" else ""
        return CheckResult(assertion.text, None, state.replace("_", " "), state != "leak", note)
    value, note = _figure(assertion, diagnosis)
    if value is None:
        return CheckResult(assertion.text, None, "not in this run", False, note)
    held = bool(_OPS[assertion.op](value, assertion.threshold))
    return CheckResult(assertion.text, value, _shown(assertion.figure, value), held, note)


def _shown(figure: str, value: float) -> str:
    kind = _FIGURES[figure][1]
    if kind == "time":
        return f"{value * 1e3:,.2f} ms" if value < 10 else f"{value:,.2f} s"
    if kind == "rate":
        return f"{value:,.1f}/s"
    if kind == "fraction":
        return f"{value:.1%}"
    return f"{value:,.0f}"


def _figure(a: Assertion, d: dict[str, Any]) -> tuple[float | None, str]:
    run = d.get("run") or {}
    if a.figure == "share":
        return _share(a.subject, d.get("findings") or []), ""
    if a.subject is None:
        return _run_figure(a.figure, run, d)
    row = _named(a.subject, d)
    if row is None:
        return None, f"no endpoint or stage named {a.subject!r} ({_names_in(d)})"
    if a.figure in PERCENTILES:
        ms = row.get(f"{a.figure}_ms")
        return (None, f"{a.figure} not recorded") if ms is None else (float(ms) / 1e3, "")
    if a.figure in ("requests", "errors"):
        count = row.get(a.figure, row.get("count"))
        return (None, f"no {a.figure} count") if count is None else (float(count), "")
    if a.figure == "error_rate":
        n = float(row.get("requests") or 0)
        return (float(row.get("errors") or 0) / n, "") if n else (None, "no requests")
    tput = row.get("throughput_per_s")
    return (None, "no throughput recorded") if tput is None else (float(tput), "")


def _run_figure(figure: str, run: dict[str, Any], d: dict[str, Any]) -> tuple[float | None, str]:
    if figure in PERCENTILES:
        ms = (run.get("latency_ms") or {}).get(figure)
        return (None, f"the run has no {figure}") if ms is None else (float(ms) / 1e3, "")
    if figure == "throughput":
        tput = run.get("throughput_per_s")
        return (None, "the run has no throughput") if tput is None else (float(tput), "")
    if figure == "requests":
        return float(run.get("requests") or 0), ""
    routes = ((d.get("endpoints") or {}).get("routes")) or []
    errors = float(sum(int(r.get("errors") or 0) for r in routes))
    if figure == "errors":
        return errors, ""
    n = float(run.get("requests") or 0)
    return (errors / n, "") if n else (None, "no requests")


def _named(name: str, d: dict[str, Any]) -> dict[str, Any] | None:
    for row in ((d.get("endpoints") or {}).get("routes")) or []:
        if row.get("name") == name:
            return dict(row)
    for row in d.get("stages") or []:
        if row.get("name") == name:
            return dict(row)
    return None


def _names_in(d: dict[str, Any]) -> str:
    routes = [r["name"] for r in ((d.get("endpoints") or {}).get("routes")) or []]
    stages = [s["name"] for s in d.get("stages") or []]
    shown = ", ".join(repr(n) for n in [*routes, *stages][:8])
    return f"this run has {shown}" if shown else "this run has no endpoints or stages"


def _share(subject: str | None, findings: list[dict[str, Any]]) -> float:
    kind, _, subkind = (subject or "").partition("/")
    return float(
        sum(
            float(f.get("share") or 0)
            for f in findings
            if f.get("kind") == kind and (not subkind or f.get("subkind") == subkind)
        )
    )


def request_latencies(
    spans: pd.DataFrame,
    run: int = 0,
    samples: pd.DataFrame | None = None,
    threads: pd.DataFrame | None = None,
) -> pd.DataFrame:
    """Each request's name, latency (s), end (ns) and ``run`` (which of a side's repeated
    runs it came from): the samples regressions are judged on. With the run's
    ``samples`` (given where other processes held the cores: the diagnosis's
    ``waited_for_cpu``), ``waited_for_cpu_s`` is the time its thread waited for a CPU
    during it (``_waited_for_cpu_during``) -- the machine's part of its latency; else 0.
    NaN where that cannot be read from its thread, which did other work too
    (``_lone_request_threads``; ``threads``: the run's, for which process each is in)."""
    req = spans[spans["category"] == "request"]
    latency = ((req["end_ns"] - req["start_ns"]).clip(lower=0) / 1e9).to_numpy()
    waited = np.zeros(len(req))
    if samples is not None and len(req):
        waited = np.minimum(_waited_for_cpu_during(req, samples), latency)
        alone = req["thread_id"].isin(_lone_request_threads(req, samples, threads))
        waited = np.where(alone.to_numpy(), waited, np.nan)
    return pd.DataFrame(
        {
            "name": req["name"].astype(str).to_numpy(),
            "latency_s": latency,
            "end_ns": req["end_ns"].to_numpy(),
            "run": run,
            "waited_for_cpu_s": waited,
        }
    )


def _lone_request_threads(
    req: pd.DataFrame, samples: pd.DataFrame, threads: pd.DataFrame | None
) -> set[int]:
    """The requests' threads that did nothing else: (nearly) all of their process's
    sampled CPU, and their requests back to back (``LONE_THREAD_SHARE`` of the time from
    the first one's start to the last one's end). Only there is a request's stall read
    from its own thread, as it was measured (a one-thread loop: 1.000 and 0.999). Where
    the work runs on other threads -- a uvicorn app's sync route on AnyIO's worker
    threads, its span on the event loop's (28-32% of the CPU) -- the span's thread waits
    on the GIL the workers hold, which ``_waited_for_cpu_during`` counts as the machine's:
    a real 30% slowdown beside four hogs read "without it 75% faster". Where the thread
    works between requests -- gunicorn's sync workers parse and write outside the span
    (requests 83% of their time quiet, 65-70% beside hogs) -- the machine's wait there
    moves the throughput, not the requests: an unchanged app read "without it 26% faster"
    (2026-12-04)."""
    cpu = samples.groupby("thread_id")["cpu_ns"].sum().astype("float64")
    pid = pd.Series(0, index=cpu.index)  # one process unless the threads table says
    if threads is not None and not threads.empty and "pid" in threads:
        known = threads.dropna(subset=["pid"]).drop_duplicates("thread_id")
        pid = known.set_index("thread_id")["pid"].reindex(cpu.index).fillna(-1)
    share = cpu / cpu.groupby(pid).transform("sum")
    by_thread = req.groupby("thread_id")
    window = (by_thread["end_ns"].max() - by_thread["start_ns"].min()).astype("float64")
    inside = (req["end_ns"] - req["start_ns"]).clip(lower=0).groupby(req["thread_id"]).sum()
    covered = inside / window.where(window > 0)
    lone = share.reindex(covered.index).ge(LONE_THREAD_SHARE) & covered.ge(LONE_THREAD_SHARE)
    return {int(t) for t in lone[lone].index}


def _waited_for_cpu_during(req: pd.DataFrame, samples: pd.DataFrame) -> np.ndarray:
    """Seconds each request's thread waited for a CPU between its start and end, read
    from its sampled intervals (a row covers ``wall_ns`` up to ``ts_ns``; its wait spread
    evenly over it, read where the request begins and ends). An interval's wait is its
    time on a run queue (``queued_ns``: schedstat), or where the sampler found the thread
    runnable (wait reason "", ``gil`` or ``unknown``) all its time off the CPU: a GIL
    wait lasts while the GIL's holder waits for a core. Beside four CPU hogs on 2 cores,
    0.18 s of a 1.89 s run's main thread was neither on a CPU nor on a run queue, all in
    such rows, where schedstat accounts a lone thread's wall time to within 6 ms beside
    0, 2 or 4 hogs (2026-12-03). 0 for a thread the sampler did not read."""
    out = np.zeros(len(req))
    if samples.empty or "queued_ns" not in samples:
        return out
    queued = samples["queued_ns"].astype("float64").fillna(0).clip(lower=0)
    off_cpu = (samples["wall_ns"] - samples["cpu_ns"]).astype("float64").clip(lower=0)
    runnable = samples["wait_reason"].fillna("").isin(("", *RUNNABLE_REASONS))
    rows = samples.assign(waited=np.where(runnable, np.maximum(queued, off_cpu), queued))
    tids = req["thread_id"].to_numpy()
    begins = req["start_ns"].to_numpy(dtype="float64")
    ends_at = req["end_ns"].to_numpy(dtype="float64")
    for tid, thread in rows.sort_values("ts_ns").groupby("thread_id", sort=False):
        at = np.flatnonzero(tids == tid)
        if not len(at):
            continue
        ends = thread["ts_ns"].to_numpy(dtype="float64")
        starts = ends - thread["wall_ns"].to_numpy(dtype="float64")
        starts = np.maximum(starts, np.concatenate(([-np.inf], ends[:-1])))  # no overlap
        waited = thread["waited"].to_numpy()
        done = np.cumsum(waited)
        edges = np.column_stack((starts, ends)).ravel()
        totals = np.column_stack((done - waited, done)).ravel()
        begin, end = begins[at], ends_at[at]
        out[at] = (np.interp(end, edges, totals) - np.interp(begin, edges, totals)) / 1e9
    return np.clip(out, 0.0, None)


def regressions(
    baseline: list[dict[str, Any]],
    current: list[dict[str, Any]],
    max_regression: float,
    *,
    baseline_requests: pd.DataFrame | None,
    current_requests: pd.DataFrame,
    seed: int = 0,
) -> list[Regression]:
    """The figures both sides have, each judged against ``1 + max_regression``. A side is
    one run or several repeats of it (their diagnoses; their requests tagged by run).

    Where a side's requests waited for a CPU other processes held (``waited_for_cpu_s``), each
    figure is judged twice: as measured, and with that wait taken out of every request
    (``_without_the_machine``). A figure regressed only where both say so: a slowdown
    the other tenants' load explains is inconclusive, not a failure (a busy-wait service
    beside two CPU hogs on 2 cores: throughput -24%, its p50 unchanged; the CI run of
    2026-12-03 failed that way on an unchanged run)."""
    measured = _figures(baseline, current, baseline_requests, current_requests,
                        max_regression, np.random.default_rng(seed))  # fmt: skip
    sides = _machine_sides(baseline_requests, current_requests)
    if not sides:
        return measured
    unread = _machine_sides(baseline_requests, current_requests, unread=True)
    if unread:  # the wait not read from the requests' threads: no figure without it
        return [_net_of_unread_waits(r, sides, unread) for r in measured]
    # a saved diagnosis as the baseline has no requests: this run's alone, then
    old = None if baseline_requests is None else _without_the_machine(baseline_requests)
    free = _figures(baseline, current, old, _without_the_machine(current_requests),
                    max_regression, np.random.default_rng(seed))  # fmt: skip
    by_figure = {r.figure: r for r in free}
    return [_net_of_the_machine(r, by_figure.get(r.figure), sides) for r in measured]


def _figures(
    baseline: list[dict[str, Any]],
    current: list[dict[str, Any]],
    baseline_requests: pd.DataFrame | None,
    current_requests: pd.DataFrame,
    max_regression: float,
    rng: np.random.Generator,
) -> list[Regression]:
    limit = 1.0 + max_regression
    out: list[Regression] = []
    theirs = set().union(*(request_names(d, baseline_requests) for d in baseline))
    for name in sorted(set(current_requests["name"]) & theirs):
        new = current_requests[current_requests["name"] == name]
        for q in (50, 99):
            figure = f"p{q}({name})"
            if baseline_requests is None:
                base_value = _baseline_percentile(baseline[0], name, q)
                if base_value is not None:
                    value = _q(new["latency_s"].to_numpy(), q)
                    out.append(_by_threshold(figure, base_value, value, limit, "s"))
                continue
            old = baseline_requests[baseline_requests["name"] == name]
            out.append(_latency(figure, old, new, q, limit, rng))
    out.extend(_throughput(baseline, current, baseline_requests, current_requests, limit, rng))
    return out


def _machine_sides(old: pd.DataFrame | None, new: pd.DataFrame, *, unread: bool = False) -> str:
    """Which side's requests waited for a CPU other processes held: "", "the baseline",
    "this run", or "both sides"; with ``unread``, which side's wait could not be read
    from its requests' threads (NaN: ``request_latencies``)."""
    base, this = (
        requests is not None
        and "waited_for_cpu_s" in requests
        and bool(
            requests["waited_for_cpu_s"].isna().any()
            if unread
            else (requests["waited_for_cpu_s"].gt(0) | requests["waited_for_cpu_s"].isna()).any()
        )
        for requests in (old, new)
    )
    return "both sides" if base and this else "the baseline" if base else "this run" if this else ""


def _without_the_machine(requests: pd.DataFrame) -> pd.DataFrame:
    """The requests as they would have run had no other process held the cores: each
    one's wait for a CPU (``waited_for_cpu_s``) taken out of its latency; ``machine_free`` marks
    them, for the rates (``_slice_rates``, ``_busy_share``) to shrink their windows by
    the share of the requests' time that wait was."""
    if "waited_for_cpu_s" not in requests:
        return requests
    free = (requests["latency_s"] - requests["waited_for_cpu_s"]).clip(lower=0)
    return requests.assign(latency_s=free, machine_free=True)


def _waited_for_cpu_share(requests: pd.DataFrame) -> float:
    """Of the requests' time (machine-free latencies plus their waits), the share their
    threads waited for a CPU other processes held; 0 for requests taken as measured."""
    if "machine_free" not in requests or requests.empty:
        return 0.0
    queued = float(requests["waited_for_cpu_s"].sum())
    total = float(requests["latency_s"].sum()) + queued
    return min(queued / total, 0.95) if total > 0 else 0.0


def _net_of_the_machine(measured: Regression, free: Regression | None, sides: str) -> Regression:
    """``measured``, judged again against ``free`` (the same figure with the wait for a
    CPU other processes held taken out): regressed only where both regressed."""
    if free is None:
        return measured
    measured = replace(measured, without_the_machine=(free.slowdown, free.interval))
    without = f"without it {change_text(free.slowdown, free.interval)}"
    waited = f"{sides} waited for a CPU other processes held (schedstat): {without}"
    if measured.regressed and free.regressed:
        notes = [*measured.notes, f"{waited}; a regression either way"]
        return replace(measured, notes=notes)
    if measured.regressed or free.regressed:
        return _machine_inconclusive(measured, waited)
    return measured


def _machine_inconclusive(measured: Regression, why: str) -> Regression:
    """``measured``, not a regression: the machine's load may explain it (``why``)."""
    notes = [*measured.notes, f"inconclusive: {why}. The runs cannot tell the service's "
             "change from the machine's load: rerun where the cores are free"]  # fmt: skip
    return replace(measured, regressed=False, worse=True, notes=notes)


def _net_of_unread_waits(measured: Regression, sides: str, unread: str) -> Regression:
    """``measured`` where ``sides`` waited for CPUs other processes held and ``unread``'s
    requests' threads did other work too (``_lone_request_threads``), so the wait could
    not be taken out of them: a regression is inconclusive, with no figure without the wait."""
    if not measured.regressed:
        return measured
    if unread == sides:
        whose = "their" if sides == "both sides" else "its"
    else:
        whose = {"this run": "this run's", "the baseline": "the baseline's"}[unread]
    return _machine_inconclusive(
        measured,
        f"{sides} waited for a CPU other processes held (schedstat), and {whose} requests' "
        "threads did other work too (a server's worker threads, or its work between "
        "requests): probe cannot take that wait out of each request",
    )


def change_text(slowdown: float, interval: tuple[float, float] | None) -> str:
    """``+12.0% slower (95% CI +8.1%..+16.2%)``; "n/a" without a figure."""
    if not math.isfinite(slowdown):
        return "n/a"
    text = (f"{(slowdown - 1) * 100:+.1f}% slower" if slowdown >= 1
            else f"{(1 - slowdown) * 100:.1f}% faster")  # fmt: skip
    if interval is not None:
        text += f" (95% CI {(interval[0] - 1) * 100:+.1f}%..{(interval[1] - 1) * 100:+.1f}%)"
    return text


def request_names(d: dict[str, Any], requests: pd.DataFrame | None) -> set[str]:
    """The names of a run's requests: from its request spans where loaded, else its
    diagnosis's endpoints and request stages."""
    if requests is not None:
        return set(requests["name"])
    routes = ((d.get("endpoints") or {}).get("routes")) or []
    stages = [s for s in d.get("stages") or [] if s.get("category") == "request"]
    return {str(r["name"]) for r in [*routes, *stages]}


def _baseline_percentile(d: dict[str, Any], name: str, q: int) -> float | None:
    row = _named(name, d)
    ms = row.get(f"p{q}_ms") if row else None
    return float(ms) / 1e3 if ms is not None else None


def _q(values: np.ndarray, q: int) -> float:
    return float(np.percentile(values, q)) if len(values) else float("nan")


def _latency(
    figure: str,
    old: pd.DataFrame,
    new: pd.DataFrame,
    q: int,
    limit: float,
    rng: np.random.Generator,
) -> Regression:
    base, value = _q(old["latency_s"].to_numpy(), q), _q(new["latency_s"].to_numpy(), q)
    if old.empty or new.empty or base <= 0:
        return Regression(figure, base, value, float("nan"), None, False, "s", ["too few requests"])
    slowdown = value / base
    old_slices, new_slices = _slices(old, q), _slices(new, q)
    if _count(old_slices) >= MIN_SLICES and _count(new_slices) >= MIN_SLICES:
        interval = _pooled_ratio_interval(new_slices, old_slices, q, rng)
        notes: list[str] = []
    else:  # too few requests to see the runs drift: the requests' own spread only
        old_lo, old_hi = _quantile_interval(old["latency_s"].to_numpy(), q)
        new_lo, new_hi = _quantile_interval(new["latency_s"].to_numpy(), q)
        interval = (new_lo / max(old_hi, 1e-12), new_hi / max(old_lo, 1e-12))
        notes = ["too few requests to slice: the interval misses the machine's drift"]
    return _judged(figure, base, value, slowdown, interval, limit, "s", notes)


def _judged(
    figure: str,
    base: float,
    value: float,
    slowdown: float,
    interval: tuple[float, float],
    limit: float,
    unit: str,
    notes: list[str],
) -> Regression:
    worse = slowdown > limit
    regressed = worse and interval[0] > 1
    if worse and not regressed:
        notes = [*notes, "inconclusive: worse than allowed, but within the runs' noise "
                 "(repeat the runs on each side to narrow it)"]  # fmt: skip
    return Regression(figure, base, value, slowdown, interval, regressed, unit, notes, worse)


def _slices(requests: pd.DataFrame, q: int) -> list[list[np.ndarray]]:
    """Per run, its requests' latencies in completion order, cut into up to
    ``SLICES_PER_RUN`` slices of at least ``_PER_SLICE[q]`` requests. A machine whose
    speed drifts (a host's other tenants, frequency) moves whole slices; their spread is
    the noise a figure is judged against, not the requests' own."""
    out: list[list[np.ndarray]] = []
    per = _PER_SLICE.get(q, 100)
    for _, run in requests.groupby("run", sort=False):
        ordered = run.sort_values("end_ns", kind="stable")["latency_s"].to_numpy()
        slices = min(SLICES_PER_RUN, len(ordered) // per)
        if slices >= 1:
            out.append(np.array_split(ordered, slices))
    return out


def _summarized(latencies: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """A slice as at most ``_SLICE_POINTS`` of its quantiles, each weighing the requests
    it stands for: the bootstrap's cost bounded however many requests a run served
    (100,000 a side took 7 s; a slice's percentile read off them moves by at most
    1/``_SLICE_POINTS`` of its distribution)."""
    n = len(latencies)
    if n <= _SLICE_POINTS:
        return latencies, np.ones(n)
    at = (np.arange(_SLICE_POINTS) + 0.5) / _SLICE_POINTS * 100
    return np.percentile(latencies, at), np.full(_SLICE_POINTS, n / _SLICE_POINTS)


def _pooled_ratio_interval(
    new: list[list[np.ndarray]], old: list[list[np.ndarray]], q: int, rng: np.random.Generator
) -> tuple[float, float]:
    """95% interval of the ratio of the two sides' q-th percentiles over all their
    requests -- the figure the gate reports -- by a two-stage (cluster) bootstrap: runs
    resampled, then slices within each, each resample's percentile read over the
    requests of the slices it drew (Davison & Hinkley, Bootstrap Methods and their
    Application, 3.8: slices of one run share its machine's state, so with repeated runs
    the drift between runs counts too). Earlier the interval was of the slices'
    percentiles' mean, another figure than the one shown: beside CPU hogs a p50 read
    "+0.2% slower (95% CI +1.7%..+18.1%)"."""
    ratios = _pooled_percentiles(new, q, rng) / np.maximum(_pooled_percentiles(old, q, rng), 1e-12)
    return float(np.percentile(ratios, 2.5)), float(np.percentile(ratios, 97.5))


def _pooled_percentiles(
    runs: list[list[np.ndarray]], q: int, rng: np.random.Generator
) -> np.ndarray:
    """``BOOTSTRAP_RESAMPLES`` resampled q-th percentiles of a side (``_pooled_ratio_
    interval``): each resample weighs every slice by how often it was drawn, and reads
    the percentile off the weighted requests (the least latency whose weight below and
    at it reaches q% of the total)."""
    b = BOOTSTRAP_RESAMPLES
    slices = [_summarized(s) for run in runs for s in run]
    values = np.concatenate([v for v, _ in slices])
    each = np.concatenate([w for _, w in slices])
    owner = np.repeat(np.arange(len(slices)), [len(v) for v, _ in slices])
    order = np.argsort(values, kind="stable")
    values, owner, each = values[order], owner[order], each[order]
    # how often each slice is drawn in each resample: runs drawn, then slices in each
    drawn = np.zeros((b, len(slices)))
    run_draws = rng.integers(0, len(runs), (b, len(runs)))
    first = 0
    for j, run in enumerate(runs):
        times = (run_draws == j).sum(axis=1)  # resamples x 1: how often run j was drawn
        picks = rng.integers(0, len(run), (b, len(run)))
        counts = np.zeros((b, len(run)))
        np.add.at(counts, (np.arange(b)[:, None], picks), 1.0)
        drawn[:, first : first + len(run)] = counts * times[:, None]
        first += len(run)
    out = np.empty(b)
    chunk = max(1, 4_000_000 // len(values))  # resamples a pass, bounding the matrix
    for lo in range(0, b, chunk):
        weights = np.cumsum(drawn[lo : lo + chunk][:, owner] * each, axis=1)
        at = (weights >= weights[:, -1:] * (q / 100)).argmax(axis=1)
        out[lo : lo + chunk] = values[at]
    return out


def _count(runs: Sequence[Sized]) -> int:
    """The slices over a side's runs (each run's slices: an array of figures, or a list
    of slices' requests)."""
    return sum(len(r) for r in runs)


def _ratio_interval(
    new: list[np.ndarray], old: list[np.ndarray], rng: np.random.Generator
) -> tuple[float, float]:
    """95% interval of mean(new) / mean(old) over the slices, by a two-stage (cluster)
    bootstrap: runs resampled, then slices within each -- slices of one run share its
    machine's state, so with repeated runs the drift between runs counts too (Davison &
    Hinkley, Bootstrap Methods and their Application, 3.8)."""
    ratios = _cluster_means(new, rng) / np.maximum(_cluster_means(old, rng), 1e-12)
    return float(np.percentile(ratios, 2.5)), float(np.percentile(ratios, 97.5))


def _cluster_means(clusters: list[np.ndarray], rng: np.random.Generator) -> np.ndarray:
    b = BOOTSTRAP_RESAMPLES
    # each run's slices resampled b times: one row per run, one column per resample
    within = np.stack([c[rng.integers(0, len(c), (b, len(c)))].mean(axis=1) for c in clusters])
    runs = rng.integers(0, len(clusters), (b, len(clusters)))
    means: np.ndarray = within[runs, np.arange(b)[:, None]].mean(axis=1)
    return means


def _quantile_interval(values: np.ndarray, q: int) -> tuple[float, float]:
    """The q-th percentile's distribution-free 95% interval: the order statistics
    x(l) <= x(u) with P(l <= B < u) >= 0.95, B ~ Binomial(n, q/100) the number of
    requests below the true percentile (Conover, Practical Nonparametric Statistics,
    3.2). Its coverage holds however skewed the latencies -- where resampling a tail
    percentile runs narrow -- and with too few requests for a bound it is unbounded on
    that side (0 or infinity), which no regression can be read from."""
    x = np.sort(values)
    n, p = len(x), q / 100
    k = np.arange(n + 1)
    lgamma = np.vectorize(math.lgamma)
    log_pmf = lgamma(n + 1) - lgamma(k + 1) - lgamma(n - k + 1)
    log_pmf += k * math.log(p) + (n - k) * math.log1p(-p)
    cdf = np.cumsum(np.exp(log_pmf - log_pmf.max()))
    cdf /= cdf[-1]
    below = np.flatnonzero(cdf <= 0.025)  # l - 1 candidates: P(B <= l - 1) <= 2.5%
    above = np.flatnonzero(1 - cdf <= 0.025)  # u - 1 candidates: P(B >= u) <= 2.5%
    lower = float(x[below[-1]]) if len(below) else 0.0  # x(l), l = below[-1] + 1
    u = int(above[0]) + 1 if len(above) else n + 1
    upper = float(x[u - 1]) if u <= n else math.inf
    return lower, upper


def _by_threshold(figure: str, base: float, value: float, limit: float, unit: str) -> Regression:
    slowdown = value / base if unit == "s" else base / value
    note = "no requests to see the baseline's noise by: judged by the threshold alone"
    worse = slowdown > limit
    return Regression(figure, base, value, slowdown, None, worse, unit, [note], worse)


def _throughput(
    baseline: list[dict[str, Any]],
    current: list[dict[str, Any]],
    old: pd.DataFrame | None,
    new: pd.DataFrame,
    limit: float,
    rng: np.random.Generator,
) -> list[Regression]:
    base, value = _mean_throughput(baseline), _mean_throughput(current)
    if not base or not value:
        return []
    base, value = base / _busy_share(old), value / _busy_share(new)
    if old is None:
        return [_by_threshold("throughput", base, value, limit, "/s")]
    old_slices, new_slices = _slice_rates(old), _slice_rates(new)
    if _count(old_slices) < MIN_SLICES or _count(new_slices) < MIN_SLICES:
        return [_by_threshold("throughput", base, value, limit, "/s")]
    interval = _ratio_interval(old_slices, new_slices, rng)  # base over new: > 1 is worse
    return [_judged("throughput", base, value, base / value, interval, limit, "/s", [])]


def _mean_throughput(diagnoses: list[dict[str, Any]]) -> float:
    values = [float((d.get("run") or {}).get("throughput_per_s") or 0) for d in diagnoses]
    return float(np.mean(values)) if values and all(values) else 0.0


def _busy_share(requests: pd.DataFrame | None) -> float:
    """1, or where the requests are taken without the machine's wait for a CPU
    (``_without_the_machine``), the share of their time left without it: a throughput
    divided by this is the rate it would have had."""
    if requests is None:
        return 1.0
    return 1.0 - float(
        np.mean([_waited_for_cpu_share(r) for _, r in requests.groupby("run")] or [0.0])
    )


def _slice_rates(requests: pd.DataFrame) -> list[np.ndarray]:
    """Per run, completions per second in ``SLICES_PER_RUN`` equal slices of its window
    from its first completion to its last (runs with too few requests: none); taken
    without the machine's wait for a CPU, each slice's time shrunk by the share of its
    requests' time that wait was (``_waited_for_cpu_share``)."""
    out: list[np.ndarray] = []
    for _, run in requests.groupby("run", sort=False):
        ends = run["end_ns"].to_numpy()
        lo, hi = (float(ends.min()), float(ends.max())) if len(ends) else (0.0, 0.0)
        if len(ends) < 2 * SLICES_PER_RUN or hi <= lo:
            continue
        edges = np.linspace(lo, hi, SLICES_PER_RUN + 1)
        counts, _ = np.histogram(ends, bins=edges)
        # np.histogram's bins: the last one holds its right edge, the others do not
        which = np.clip(np.searchsorted(edges, ends, side="right") - 1, 0, SLICES_PER_RUN - 1)
        left = np.array(
            [1.0 - _waited_for_cpu_share(run[which == k]) for k in range(SLICES_PER_RUN)]
        )
        out.append(counts / ((hi - lo) / 1e9 / SLICES_PER_RUN * left))
    return out
