"""The catalog of fixes: what triggers each, how its local speedup is modelled, how to do it.

``proposed(findings, bd, facts, ...)`` -> the ``Recommendation`` s the rules propose;
``ranked`` keeps those worth recommending, sorted by estimated end-to-end speedup (a
detected leak's ``fix_leak`` first: a leaking service is killed by the OOM killer
whatever its speed), and ``minor`` the rest; ``recommend`` is the two in one. No
recommendation without evidence: each is
triggered by a named finding and carries the figures that triggered it.

The catalog is data: ``FIXES`` holds one frozen ``Fix`` per recommendation -- its id,
title, how-to, scope, the rule that turns the evidence into a ``Proposal`` (or nothing),
and the ``Model`` constants that rule uses. ``recommend`` loops over it; adding a fix is
one entry, one rule and one test. Ids of DESIGN.md's catalog that no rule produces yet
(here, or among a trace's fixes: ``analyzers.trace_fixes``, whose fixes join a run's
through its torch.profiler windows) are in ``FUTURE``, with the evidence they wait for.

The estimated speedup is of throughput over the serving window (requests per second),
and, for a service serving one request at a time, of latency as well. Each model's
assumed constant is a ``Model`` field with the source of its number; every other input
is measured in the run.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, Literal

import pandas as pd

from probe.analyzers.amdahl import (
    amdahl,
    ceiling,
    local_speedup_for,
    max_throughput,
    mva_throughput,
)
from probe.analyzers.breakdown import Breakdown
from probe.analyzers.collector import over_words
from probe.analyzers.constants import constant
from probe.analyzers.leaks.words import what_holds
from probe.analyzers.rules import (
    THRESHOLDS,
    Finding,
    RunFacts,
    allowed_cores,
    read_together,
    stage_rows,
)
from probe.analyzers.stacks import IMPORTS, NOT_THE_SERVICE
from probe.analyzers.streams import calls_counted, reads_a_stream, shared_connections
from probe.analyzers.tasks import LOOP_LAG

__all__ = [
    "FIXES",
    "FUTURE",
    "MODEL",
    "Fix",
    "Model",
    "Proposal",
    "Recommendation",
    "RuleContext",
    "demands",
    "minor",
    "proposed",
    "ranked",
    "recommend",
]


@dataclass(frozen=True)
class Model:
    io_workers_max: int = constant(
        16,
        "Threads for concurrent I/O: Goetz's sizing rule (Java Concurrency in Practice, "
        "8.2), threads = cores x (1 + wait/service), capped at a pool size that keeps "
        "upstreams and sockets reasonable; the GIL's share is bounded apart (bottleneck law).",
    )
    contention_cpu: float = constant(
        1.15,
        "Requests in flight together cost more CPU each than one at a time: GIL hand-offs "
        "between threads, caches and memory bandwidth shared. Measured on this machine "
        "class (2 vCPUs), per-request CPU of the concurrent run against the sequential "
        "one: +27% for the multimodal sample at 16 threads (5.2 -> 6.6 ms), 0 to +30% "
        "across runs of the image sample; we apply +15%.",
    )
    contention_cpu_least: float = constant(
        0.63,
        "The other way on another host of the class (2026-12-04): the multimodal sample's "
        "per-request CPU, whole process, /usr/bin/time's difference of 150- and 450-request "
        "runs one at a time against 600- and 1,800-request runs at 16 in flight, no probe: "
        "5.8 and 7.0 ms one at a time, 4.4 ms at 16 (0.75x and 0.63x). A request that "
        "arrives after a wait finds its caches cold (a 10-ms sleep made the sampler's tick "
        "15x dearer on this class: README, benchmarks/tick_cold_cost.py); back to back, "
        "they stay warm. The low end of the range the estimate states.",
    )
    contention_cpu_most: float = constant(
        1.30,
        "The most measured the first way: the image sample's runs, +30% (contention_cpu). "
        "The high end of the range the estimate states.",
    )
    instance_efficiency: float = constant(
        0.9,
        "Two BLAS-bound processes reached 1.75-1.8x of one (without probe), measured on "
        "this machine class: each of the instances running together at 0.875-0.9 of one "
        "alone (they share caches and memory bandwidth). Applied to every instance, not "
        "to the extra ones only: that read (1 + 0.9 for two) said 1.9x, past the range "
        "it came from.",
    )
    vectorize: float = constant(
        6.5,
        "Vectorising an interpreted numeric loop with numpy: eight per-request loops (an "
        "embedding normalised, cosine ranking, softmax top-k, a colour histogram, pairwise "
        "IoU, a moving average, tf-idf, anchor decoding; written before any was timed, "
        "none the samples' code) gained 4.9-103x, median 15-16x, three runs "
        "(benchmarks/vectorize_gain.py, 2026-11-28). The gain depends on how many numpy "
        "calls the vectorised form makes for the elements it covers (~1 us each), which "
        "a profile of the loop cannot see: the tagging sample's k-means, vectorised over "
        "pixels but still looping over iterations and clusters, gained 6.0-8.3x on its "
        "stage across hosts of one kind (2026-11-23 to 11-28). 6.5 sits at the corpus's "
        "first quartile (between its second and third lowest): a conservative figure "
        "most loops beat, stated with the range (vectorize_most).",
    )
    vectorize_least: float = constant(
        4.9,
        "The least a loop of benchmarks/vectorize_gain.py gained (anchor decoding: "
        "4.9-5.2x in three runs, 300 boxes of four numbers): the low end of the range the "
        "vectorize_python estimate states.",
    )
    vectorize_most: float = constant(
        100.0,
        "The most a loop of benchmarks/vectorize_gain.py gained (cosine ranking of 64 "
        "candidates of 256 numbers: 65-103x in three runs): the high end of the range the "
        "vectorize_python estimate states.",
    )
    frozen_walk: float = constant(
        0.8,
        "The part of a full collection's walk that freezing start-up's objects takes away, "
        "where the run did not read the live heap at the collections (a run before "
        "2026-12-06): CPython 3.11 makes a full collection only once the "
        "objects promoted to the oldest generation since the last reach a quarter of those "
        "that survived it (gcmodule.c, long_lived_pending > long_lived_total / 4), so the "
        "survivors are at most 4/5 of each walk. Where the heap was read at the collections, "
        "the part every walk since the work began found is measured instead "
        "(collector.start_up_heap): rerank_catalog 0.97, suggest_api 0.997, session_scores "
        "0.18-0.20 (tests/threads_corpus, 2026-12-06).",
    )
    batch: int = constant(
        16,
        "Batch size suggested for dynamic batching (Triton's dynamic batcher and "
        "TorchServe default examples use preferred batch sizes of 8-32); the model "
        "amortises the per-op interpreter time of a stage over the batch.",
    )
    fp16: float = constant(
        2.0,
        "Half precision on a tensor-core GPU: FP16 GEMMs run at 2x or more the FP32 rate "
        "(NVIDIA Mixed Precision Training guide); applied to the GPU time.",
    )
    fusion: float = constant(
        3.0,
        "Kernel fusion / CUDA graphs remove most per-kernel launch cost (PyTorch CUDA "
        "Graphs blog: launch-bound models 1.1-3x); 3x on the CPU-side launch time.",
    )
    transfer: float = constant(
        2.0,
        "Pinned memory and non-blocking copies roughly double effective H2D bandwidth "
        "(NVIDIA, 'How to Optimize Data Transfers in CUDA C/C++').",
    )
    min_speedup: float = constant(
        1.25,
        "Estimated gains below this are within the estimate's own error (the diagnosis is "
        "held to 25% of the realised speedup): not worth a recommendation.",
    )


MODEL = Model()

Scope = Literal["path", "throughput", "memory"]


@dataclass(frozen=True)
class Recommendation:
    id: str
    stage: str
    estimated_speedup: float
    p: float
    s: float
    ceiling: float
    title: str
    how: str
    evidence: dict[str, Any] = field(default_factory=dict)
    model: str = ""
    # ``throughput``: the estimate scales the whole service's request rate (it combines
    # with others by multiplying); ``path``: Amdahl on a share of the path; ``memory``:
    # it buys memory, not time (its speedup is 1).
    scope: Scope = "path"

    def to_dict(self) -> dict[str, Any]:
        def num(x: float) -> float | None:
            return round(x, 3) if math.isfinite(x) else None

        return {
            "id": self.id,
            "stage": self.stage,
            "estimated_speedup": num(self.estimated_speedup),
            "p": num(self.p),
            "s": num(self.s),
            "ceiling": num(self.ceiling),
            "title": self.title,
            "how": self.how,
            "evidence": self.evidence,
            "model": self.model,
            "scope": self.scope,
        }


@dataclass(frozen=True)
class Proposal:
    """What a rule proposes; the engine adds the catalog's title and how-to."""

    stage: str
    p: float  # the share of the path the fix touches
    s: float  # its local speedup
    how: dict[str, Any]  # the figures the how-to's template needs
    evidence: dict[str, Any]
    model: str  # how s (or the speedup) was modelled, in words
    speedup: float | None = None  # from a throughput model; else Amdahl(p, s)
    ceiling: float | None = None  # else Amdahl's ceiling 1 / (1 - p)


@dataclass(frozen=True)
class RuleContext:
    """Everything a rule may look at."""

    findings: list[Finding]
    bd: Breakdown
    facts: RunFacts
    rows: pd.DataFrame  # the stages competing for the path (``rules.stage_rows``)
    demands: dict[str, Any]  # per-request demands (``demands``); empty without requests
    cold: dict[str, Any] | None
    leak: dict[str, Any] | None
    model: Model

    @property
    def sequential(self) -> bool:
        """One request at a time (so overlapping them is a fix)."""
        return self.bd.requests.concurrency < 1.5

    @property
    def cores(self) -> float:
        """The cores the process may run on (a cgroup quota's may be fractional)."""
        return max(1.0, allowed_cores(self.facts))

    @property
    def workers(self) -> int:
        """Processes to run on them: one a core, a part core's included (a quota of 1.5
        cores keeps two busy)."""
        return max(1, math.ceil(self.cores - 1e-9))


FindingRule = Callable[[RuleContext, Finding, pd.Series], Proposal | None]
RunRule = Callable[[RuleContext], Proposal | None]


@dataclass(frozen=True)
class Fix:
    """One entry of the catalog: a fix, the rule that proposes it, how to apply it.

    ``finding_rule`` runs once per finding (a stage holding ``finding_share`` of the
    path) with that stage's breakdown row; ``run_rule`` once per run. Exactly one is set.
    ``constants`` names the ``Model`` fields the rule uses. ``rewrites_stage``: the fix
    is a change to the stage's own code, so it is proposed only for a stage that is the
    service's (not ``stacks.NOT_THE_SERVICE``)."""

    id: str
    title: str  # ``{stage}`` is the stage it targets
    how: str  # a template over the proposal's ``how`` figures, ``{stage}`` and
    # ``{function}`` (the stage as code calls it, in the code sketches)
    scope: Scope
    constants: tuple[str, ...] = ()
    finding_rule: FindingRule | None = None
    run_rule: RunRule | None = None
    rewrites_stage: bool = False

    def __post_init__(self) -> None:
        if (self.finding_rule is None) == (self.run_rule is None):
            raise ValueError(f"{self.id}: give exactly one of finding_rule and run_rule")

    @property
    def rule(self) -> FindingRule | RunRule:
        rule = self.finding_rule or self.run_rule
        assert rule is not None
        return rule

    def recommendation(self, proposal: Proposal) -> Recommendation:
        p, s = proposal.p, proposal.s
        return Recommendation(
            id=self.id,
            stage=proposal.stage,
            estimated_speedup=amdahl(p, s) if proposal.speedup is None else proposal.speedup,
            p=p,
            s=s,
            ceiling=ceiling(p) if proposal.ceiling is None else proposal.ceiling,
            title=self.title.format(stage=proposal.stage),
            how=self.how.format(
                stage=proposal.stage, function=function_of(proposal.stage), **proposal.how
            ),
            evidence=proposal.evidence,
            model=proposal.model,
            scope=self.scope,
        )


def function_of(stage: str) -> str:
    """The stage as code calls it: a sampled stage's label carries its file
    (``split_tokens (tokenize_pool.py)``), which is not code."""
    name = stage.rsplit(" (", 1)[0] if stage.endswith(")") else stage
    return name.split(".<locals>.")[-1]


# -- per-request demands (the bottleneck law) --------------------------------------------
def demands(bd: Breakdown, facts: RunFacts, cold: dict[str, Any] | None) -> dict[str, Any]:
    """Per request: seconds of GIL, of other CPU, and of waiting; the cores free.

    The process's CPU over the serving window (probe's own threads left out), per
    request. Of it, the GIL's: its user time but numeric-library kernels. CPython holds
    the GIL while it interprets and inside C calls unless they release it, which numpy's
    and torch's kernels do, and its I/O calls (the kernel's system time in them). Every
    thread's CPU counts, the service's helpers too; the GIL's leaves out the threads the
    interpreter does not know. A cold start's excess is left out: it happens once.
    """
    req = bd.requests
    if not req.count or not req.throughput_per_s:
        return {}
    cpu = facts.process_cores * req.window_s
    if cold:
        # its CPU, not its wall time: the wall includes its waits for a core, and taking
        # those off the window's CPU took most of multimodal_pipeline's per-request CPU
        # with them (1.7 ms a request against 5.6-6.1 ms measured plainly, from the CPU
        # of 150- and 600-request runs' difference: its 16-way fix predicted 21x, realized 12x)
        taken = cold.get("cpu_s")
        cpu = max(0.0, cpu - float(cold["seconds"] if taken is None else taken))
    # numpy's and torch's kernels and the kernel's syscalls run with the GIL released
    # (shop_api's CPU route under uvicorn: 10% of its CPU in system time; counted as
    # holding the GIL, its ceiling read 216/s against 272/s measured without probe)
    holds_gil = (1.0 - bd.tensor_cpu_s / bd.cpu_s if bd.cpu_s > 0 else 1.0) * facts.user_share
    # and threads the interpreter does not know never hold it: OpenBLAS's idle team spun
    # 0.9 of a core beside an event loop that used 0.3, and the GIL's demand read 5.81 ms
    # a request at 197 requests/s, over a second a second (batch_window_api's first
    # version, session 88)
    holds_gil *= 1.0 - facts.native_cpu_share
    d_cpu = cpu / req.count
    d_gil = d_cpu * holds_gil
    latency = req.total_s / req.count - (float(cold["seconds"]) / req.count if cold else 0.0)
    free = _free_cores(facts)
    bound, which = max_throughput({"cpu": (d_cpu, free), "gil": (d_gil, 1.0)})
    return {
        "cpu_s_per_request": round(d_cpu, 6),
        "gil_s_per_request": round(d_gil, 6),
        "wait_s_per_request": round(max(0.0, latency - d_cpu), 6),
        "cores_available": round(free, 2),
        "max_throughput_per_s": round(bound, 1) if math.isfinite(bound) else None,
        "bound_by": which,
    }


def _bound_ratio(demands: dict[str, Any], bd: Breakdown) -> float | None:
    bound, now = demands.get("max_throughput_per_s"), bd.requests.throughput_per_s
    return bound / now if bound and now else None


def _concurrency_speedup(
    demands: dict[str, Any], workers: int, model: Model, contention: float | None = None
) -> float:
    """Closed-system MVA: ``workers`` requests in flight against one in flight, each
    costing ``contention`` (the model's ``contention_cpu`` by default) times the CPU it
    cost alone."""
    think = float(demands["wait_s_per_request"])
    one = mva_throughput(think, _request_stations(demands, 1.0), 1)
    k = (model.contention_cpu if contention is None else contention) if workers > 1 else 1.0
    many = mva_throughput(think, _request_stations(demands, k), workers)
    return many / one if one > 0 else 1.0


def _request_stations(demands: dict[str, Any], k: float) -> dict[str, tuple[float, int]]:
    """The stations a request queues at (``mva_throughput``'s): the GIL, one server; the
    rest of its CPU, a server a free core; each demand ``k`` times what it cost alone."""
    d_cpu, d_gil = float(demands["cpu_s_per_request"]), float(demands["gil_s_per_request"])
    cores = max(1, round(float(demands["cores_available"])))
    return {"gil": (d_gil * k, 1), "cpu": (max(0.0, d_cpu - d_gil) * k, cores)}


# -- the rules ---------------------------------------------------------------------------
def _evidence(f: Finding) -> dict[str, Any]:
    return {"finding": f"{f.kind}/{f.subkind}", "path_share": round(f.share, 4), **f.evidence}


def _concurrent_io(ctx: RuleContext, f: Finding, row: pd.Series) -> Proposal | None:
    if f.rule == "queued_for_a_limit":
        return _raised_limit(ctx, f, row)
    # Not for sleeps: a sleep on the request path is the service's own choice (polling,
    # back-off, pacing), not a call to overlap.
    if f.kind == "io" and f.subkind == "subprocess" and ctx.sequential:
        return _concurrent_children(ctx, f, row)
    if not (f.kind == "io" and f.subkind in ("network", "disk") and ctx.sequential):
        return None
    if f.subkind == "network" and reads_a_stream(ctx.bd.streams, f.stage):
        return None  # its reads wait for the far end's next item: none to overlap
    p, model, cap = f.share, ctx.model, ctx.demands
    wait = float(row[f"wait_{f.subkind}"])
    # Goetz's rule over the whole request: its waits in this stage against the CPU each
    # request needs (the part that cannot overlap under the GIL).
    n = max(1, ctx.bd.requests.count)
    wait_s = float(row["path_s"]) * wait / n
    service_s = cap.get("cpu_s_per_request") or max(1e-6, float(row["path_s"]) * (1 - wait) / n)
    ratio = wait_s / max(service_s, 1e-9)
    free = float(cap.get("cores_available") or 1.0)
    workers = int(min(model.io_workers_max, math.ceil(free * (1.0 + ratio))))
    offered = _offered_by_the_load(ctx, f.stage)
    if offered is not None:
        workers = min(workers, offered)
    calls = calls_counted(ctx.bd.streams, f.stage)
    if calls is not None:
        workers = min(workers, calls)
    # Whole requests overlap, not only this stage: the estimate is the MVA throughput
    # ratio, which can pass the stage's Amdahl ceiling. A job's calls, where counted,
    # overlap in whole rounds (analyzers.streams).
    local = calls / math.ceil(calls / workers) if calls else float(workers)
    speedup = _concurrency_speedup(cap, workers, model) if cap else amdahl(p, local)
    overlap = _Overlap(p, wait, workers, ratio, speedup, offered, None if cap else calls)
    return _concurrent_io_proposal(ctx, f, row, overlap)


def _concurrent_children(ctx: RuleContext, f: Finding, row: pd.Series) -> Proposal | None:
    """A job waiting on child processes one at a time (a tool run per item:
    ``subprocess.run``, ``Popen.communicate``): overlapped, the children run side by side
    as far as the cores hold their CPU. The children's CPU is the kernel's count of those
    the process waited for (``RunFacts.children_cpu_s``), shared among the stages by their
    waits on children; without it no estimate is made: a child that already keeps every
    core busy (``xz -T0``, an encoder's threads) gains nothing from company, and a child
    that lives between two readings of the process tree is never read itself. Pool size
    by Goetz's rule on a call's off-CPU wait over its CPU (the children's and the stage's
    own); the waits, so many at a time, take no less than the children's CPU over the
    cores, and the rest of the job stays as it ran (a figure from below: the job's own
    work may overlap the children too). A service's requests (per-request demands) are
    left: their MVA has no station for a child's CPU yet. So is a wait on a process kept
    running (a pool's workers, a helper fed through a pipe): calls to it overlap only as
    far as it serves them, which nothing here measures; proposed only where the tree's
    other processes came and went (a child per call)."""
    facts = ctx.facts
    children = facts.children_cpu_s
    if children is None or ctx.demands or ctx.bd.wall_s <= 0:
        return None
    if facts.long_lived_children or facts.short_lived_children < 2:
        return None
    rows = ctx.rows
    waited_all = float((rows["path_s"] * rows["wait_subprocess"]).sum())
    path_s, wait = float(row["path_s"]), float(row["wait_subprocess"])
    waited_s = path_s * wait  # the stage's seconds waiting on its children
    if waited_s <= 0 or waited_all <= 0:
        return None
    child_s = children * waited_s / waited_all
    own_s = path_s * (1.0 - wait)  # the stage's own time besides the waits
    off_cpu = max(0.0, waited_s - child_s)
    ratio = off_cpu / max(child_s + own_s, 1e-9)
    cores = ctx.cores
    # the nearest pool to Goetz's figure: children on the CPU, rounded up from a sliver of
    # off-CPU wait, would only queue for the cores
    workers = int(min(ctx.model.io_workers_max, max(2, round(cores * (1.0 + ratio)))))
    # the wall clock's part the stage's waits held, and what they would hold overlapped
    wall = ctx.bd.wall_s
    before = f.share * wait * wall
    after = max(before / workers, min(before, child_s / cores))
    # and the whole job no shorter than its CPU -- its threads' (sampled, exact) and every
    # child's -- over the cores (bottleneck law): the children compete with the job's own
    # work for them once the waits overlap
    floor = min(wall, (ctx.bd.cpu_s + children) / cores)
    speedup = wall / max(wall - before + after, floor)
    if speedup <= 1.0:
        return None
    c = _Children(wait, waited_s, child_s, ratio, workers, cores, before, floor, speedup)
    return _children_proposal(f, row, c)


@dataclass(frozen=True)
class _Children:
    """What ``_concurrent_children`` worked out for its proposal."""

    wait: float  # of the stage's time, the share waiting on children
    waited_s: float  # those waits' seconds
    child_s: float  # the children's CPU in them
    ratio: float  # off-CPU wait over CPU, Goetz's
    workers: int
    cores: float
    before: float  # the wall's seconds the waits held
    floor: float  # the job's CPU over the cores
    speedup: float


def _children_proposal(f: Finding, row: pd.Series, c: _Children) -> Proposal:
    at_once = c.cores / max(c.child_s / c.waited_s, 1e-9)
    return Proposal(
        stage=f.stage,
        p=f.share,
        s=local_speedup_for(f.share, c.speedup),
        how={
            "what": _WAITED_ON["subprocess"],
            "pace": "one child at a time",
            "wait": c.wait,
            "workers": c.workers,
            "top_call": row["top_call"],
            "sketch": _CHILDREN.format(workers=c.workers, function=function_of(f.stage))
            + f"The children used {c.child_s:.1f} s of CPU in its {c.waited_s:.1f} s of "
            f"waits: {c.cores:g} core(s) run about {at_once:.1f} of them at once. ",
        },
        evidence={
            **_evidence(f),
            "wait_share": round(c.wait, 4),
            "waited_s": round(c.waited_s, 3),
            "children_cpu_s": round(c.child_s, 3),
            "job_cpu_floor_s": round(c.floor, 3),
            "wait_to_service": round(c.ratio, 2),
            "workers": c.workers,
            "cores": round(c.cores, 2),
        },
        model=(
            f"{c.workers} calls in flight (Goetz: {c.cores:g} core(s) x (1 + off-CPU wait / "
            f"CPU = {c.ratio:.2f})); the waits ({c.before:.2f} s of the wall) overlapped, no "
            f"shorter than the children's {c.child_s:.2f} s of CPU over {c.cores:g} core(s), "
            f"the rest of the job as it ran, and the whole no shorter than its {c.floor:.2f} "
            "s of CPU (its threads' and its children's) over the cores (bottleneck law)"
        ),
        speedup=c.speedup,
        ceiling=ceiling(f.share * c.wait),
    )


def _raised_limit(ctx: RuleContext, f: Finding, row: pd.Series) -> Proposal | None:
    """Requests in line for a pool's or a semaphore's permits (``rules``'
    ``queued_for_a_limit``): the limit raised to the requests in flight. By Little's law
    on the tasks counted, a request spends ``in line / throughput`` seconds in line; the
    estimate is the MVA throughput with that time gone from its waits, the requests in
    flight as measured, over the same without the change. An ``asyncio.Lock`` is a
    mutex: shortening what it holds is the fix (``reduce_lock_scope``)."""
    ev, cap, req = f.evidence, ctx.demands, ctx.bd.requests
    if ev.get("queued_in") == "asyncio.Lock":
        return None
    holding = float(ev["in_the_call"])
    in_line = holding * float(ev["in_line_per_call"])
    if not cap or not req.throughput_per_s:
        return _raised_limit_of_a_job(f, row, holding, in_line)
    flight = max(1, round(req.concurrency))
    think = float(cap["wait_s_per_request"])
    shorter = max(0.0, think - in_line / float(req.throughput_per_s))
    stations = _request_stations(cap, ctx.model.contention_cpu if flight > 1 else 1.0)
    now = mva_throughput(think, stations, flight)
    speedup = mva_throughput(shorter, stations, flight) / now if now > 0 else 1.0
    permits = max(flight, math.ceil(holding + in_line))
    return Proposal(
        stage=f.stage,
        p=f.share,
        s=local_speedup_for(f.share, speedup),
        how=_limit_how(f, row, holding, in_line, permits, "requests"),
        evidence={
            **_evidence(f),
            "in_line_s_per_request": round(in_line / float(req.throughput_per_s), 6),
            "workers": permits,
            **cap,
        },
        model=f"{in_line:.1f} requests in line for {holding:.1f} permits at "
        f"{req.throughput_per_s:.1f}/s: {in_line / req.throughput_per_s * 1e3:.0f} ms of each "
        f"request's waits (Little's law), gone with {permits} permits; throughput by "
        f"mean-value analysis of the measured per-request demands with {flight} in flight, "
        "as measured. Assumes the far end serves that many at once: its capacity is not in "
        "the run",
        speedup=speedup,
        ceiling=max(_bound_ratio(cap, ctx.bd) or ceiling(f.share), speedup),
    )


def _raised_limit_of_a_job(f: Finding, row: pd.Series, holding: float, in_line: float) -> Proposal:
    """A job's calls in line for a limit, no requests to count: with as many permits as
    callers, the calls those in line waited for overlap theirs -- the stage's time over
    ``1 + in line per call`` (tests/threads_corpus's pooled_batch: eight threads, a pool
    of two; 3.9x against 3.74x realised with eight connections)."""
    permits = math.ceil(holding + in_line)
    return Proposal(
        stage=f.stage,
        p=f.share,
        s=1.0 + in_line / holding,
        how=_limit_how(f, row, holding, in_line, permits, "callers"),
        evidence={**_evidence(f), "workers": permits},
        model=f"s = 1 + {in_line / holding:.2f}, the callers in line per call: with "
        f"{permits} permits their calls overlap. Assumes the far end serves that many at "
        "once: its capacity is not in the run",
    )


def _limit_how(
    f: Finding, row: pd.Series, holding: float, in_line: float, permits: int, who: str
) -> dict[str, Any]:
    """``concurrent_io``'s words for a raised limit: what the calls wait on, the line
    (``who``: requests, or a job's callers), and the sketch for the limit's kind."""
    waited = max(_WAITED_ON, key=lambda reason: float(row[f"wait_{reason}"]))
    limit = str(f.evidence["queued_in"])
    sketch = _LIMITS_ASYNC if limit.startswith(("asyncio.", "httpx.Async")) else _LIMITS_THREADS
    return {
        "what": _WAITED_ON[waited],
        "pace": f"{holding:.1f} calls at a time, {in_line:.1f} more {who} in line",
        "wait": float(row[f"wait_{waited}"]),
        "workers": permits,
        "top_call": row["top_call"],
        "sketch": (_RAISE_THE_LIMIT + sketch).format(
            holding=holding, in_line=in_line, limit=limit, workers=permits
        ),
    }


@dataclass(frozen=True)
class _Overlap:
    """What ``_concurrent_io`` worked out for its proposal."""

    p: float  # the stage's share of the path
    wait: float  # of the stage's time, the share waiting
    workers: int  # requests in flight
    ratio: float  # wait over service, Goetz's
    speedup: float
    offered: int | None  # the requests the load kept in the server, where it bounds them
    calls: int | None = None  # a job's calls of the stage, where the run counts them


def _offered_by_the_load(ctx: RuleContext, stage: str) -> int | None:
    """Where ``stage`` blocked an event loop that had callbacks queued behind it (a
    blocking call in a coroutine: ``analyzers.tasks.loop_lag``), the requests the load
    kept in the server: the one running and those ready behind it. Overlapped, no more
    than those can be in flight; Goetz's count alone (16) read an undecorated FastAPI
    app's fix 12.1x where its 8 clients realised 7.6x
    (tests/threads_corpus/services/lookup_api.py). None elsewhere."""
    loops = ctx.bd.loops
    if loops.empty or "blocked_in" not in loops:
        return None
    held = loops[(loops["blocked_in"] == stage) & (loops["lagged_share"] >= LOOP_LAG.lagged_share)]
    if held.empty:
        return None
    return max(1, round(1.0 + float(held["ready_mean"].max())))


def _concurrent_io_proposal(ctx: RuleContext, f: Finding, row: pd.Series, o: _Overlap) -> Proposal:
    model, cap = ctx.model, ctx.demands
    # what a request in flight with others costs against one alone goes both ways across
    # hosts of this class (contention_cpu_least, contention_cpu_most): where the CPU binds,
    # the figure is stated with the range those give, up to the largest pool the model
    # sizes (a pool of io_workers_max where Goetz's rule said fewer; no more than the load
    # offered, where it bounds them)
    most = model.io_workers_max if o.offered is None else min(model.io_workers_max, o.offered)
    stated = (
        [
            _concurrency_speedup(cap, o.workers, model, model.contention_cpu_most),
            _concurrency_speedup(cap, most, model, model.contention_cpu_least),
        ]
        if cap
        else []
    )
    ranged = bool(stated) and stated[1] - stated[0] >= 0.01 * o.speedup
    return Proposal(
        stage=f.stage,
        p=o.p,
        s=local_speedup_for(o.p, o.speedup),
        how={
            "what": _WAITED_ON[f.subkind],
            "pace": "one request at a time",
            "wait": o.wait,
            "workers": o.workers,
            "top_call": row["top_call"],
            "sketch": _overlap_sketch(o, row, shared_connections(ctx.bd.streams, f.stage)).format(
                workers=o.workers, function=function_of(f.stage)
            ),
        },
        evidence={
            **_evidence(f),
            "wait_share": round(o.wait, 4),
            "wait_to_service": round(o.ratio, 2),
            "workers": o.workers,
            **cap,
            **({"speedup_range": [round(v, 2) for v in stated]} if ranged else {}),
        },
        model=_overlap_model(o, model, stated if ranged else [], most)
        if cap
        else _overlap_model_of_a_job(o, model),
        speedup=o.speedup,
        ceiling=max(_bound_ratio(cap, ctx.bd) or ceiling(o.p), stated[1] if ranged else 0.0),
    )


def _overlap_sketch(o: _Overlap, row: pd.Series, shared: tuple[int, int] | None) -> str:
    """Blocking the loop from a coroutine: the call off the loop. Awaited in coroutines:
    the loop overlaps them (a thread pool would not help). Else a thread pool. Calls over
    fewer kept-open connections than would be in flight: a connection each, said."""
    if o.offered is not None:
        return _OFF_THE_LOOP
    sketch = _GATHER if float(row["awaited_share"]) >= 0.5 else _THREADS
    if shared is None or shared[0] >= o.workers:
        return sketch
    connections, on = (
        ("one connection", "it") if shared[0] == 1 else (f"{shared[0]} connections", "them")
    )
    return sketch + (
        f"Its calls went over {connections} kept open ({shared[1]} data segments sent on "
        f"{on} while seen, a request before each answer): calls in flight at once need a "
        "connection each -- a pool of {workers} (httpx.Limits(max_connections={workers}), "
        "aiohttp.TCPConnector(limit={workers})) -- unless the protocol multiplexes them "
        "(HTTP/2, gRPC). "
    )


def _overlap_model_of_a_job(o: _Overlap, model: Model) -> str:
    """A job's calls overlapped: Amdahl on the stage, its calls in whole rounds where
    counted."""
    if o.calls:
        rounds = math.ceil(o.calls / o.workers)
        local = f"its {o.calls} calls in {rounds} round{'s' * (rounds > 1)}: s = {o.calls}/{rounds}"
    else:
        local = f"s = {o.workers}"
    return (
        f"{o.workers} calls in flight (Goetz: cores x (1 + wait/service), at most "
        f"{model.io_workers_max}); Amdahl on the stage's share of the run, {local}"
    )


def _overlap_model(o: _Overlap, model: Model, stated: list[float], most: int) -> str:
    offered = (
        f", and at most the {o.offered} the load kept in the server: the one running and "
        "those queued behind it on the event loop"
        if o.offered is not None
        else ""
    )
    ranged = (
        f", each request in flight costing {model.contention_cpu:g}x its CPU alone; "
        f"{model.contention_cpu_least:g}-{model.contention_cpu_most:g}x measured across "
        f"hosts, so {stated[0]:.1f}-{stated[1]:.1f}x (the high end with {most} in flight)"
        if stated
        else ""
    )
    return (
        f"{o.workers} requests in flight (Goetz: cores x (1 + wait/service), at most "
        f"{model.io_workers_max}{offered}); throughput by mean-value analysis of the "
        f"measured per-request demands: waits, the GIL, the cores{ranged}"
    )


def _vectorize_python(ctx: RuleContext, f: Finding, row: pd.Series) -> Proposal | None:
    if not (f.kind == "cpu" and f.subkind == "python" and float(row["tensor_share"]) < 0.5):
        return None
    # the time it waited for a core (runnable, the OS scheduler's: "unknown") is CPU
    # demand too: it shrinks with the CPU the loop needs (on a host short of cores the
    # tagging sample's stage waited 11-16% of its time so, and the estimate, counting it
    # as fixed, said 3.5-4.2x where 7.1-7.3x was realized)
    demand = float(row["cpu_share"]) + float(row.get("wait_unknown", 0.0))
    loop = min(demand, 1.0) * (1.0 - float(row["tensor_share"]))
    m = ctx.model
    # the gain a loop gets is not in its profile: the estimate is conservative, and the
    # range the measured loops span goes with it, end to end on the path
    least, most = (amdahl(f.share, amdahl(loop, g)) for g in (m.vectorize_least, m.vectorize_most))
    return Proposal(
        stage=f.stage,
        p=f.share,
        s=amdahl(loop, m.vectorize),
        how={"py": loop, "top_line": row["top_line"]},
        evidence={
            **_evidence(f),
            "interpreted_share": round(loop, 4),
            "speedup_range": [round(least, 2), round(most, 2)],
        },
        model=f"s = 1/((1-f) + f/{m.vectorize:g}), f = the stage's on-CPU time, and its time "
        "waiting for a core, outside numeric-library ops. A conservative figure: loops "
        f"vectorised with numpy gained {m.vectorize_least:g}-{m.vectorize_most:g}x "
        f"(benchmarks/vectorize_gain.py), so the fix buys {least:.1f}-{most:.1f}x end to end",
    )


def _gc_freeze(ctx: RuleContext, f: Finding, row: pd.Series) -> Proposal | None:
    """Full collections that walk what start-up left alive, again and again: freeze it."""
    if f.rule != "collector_pauses" or not f.evidence.get("full_collections"):
        return None
    measured = f.evidence.get("start_up_heap")
    walk = float(measured) if measured is not None else ctx.model.frozen_walk
    # those made during start-up come before any freeze
    p = float(f.evidence["full_since_work_share"])
    if measured is not None:
        part = (
            f"{walk:.0%} of the live heap they walked once the work had begun (pymalloc's "
            "blocks, read at each one's start) was walked by every one: that part leaves "
            "every walk"
        )
    else:
        part = (
            f"CPython makes a full collection once what was promoted since the last reaches "
            f"a quarter of what survived it, so the survivors are up to {walk:.0%} of each "
            "walk; the live heap was not read beside them, so this assumes the survivors "
            "were alive when start-up ended"
        )
    return Proposal(
        stage=f.stage,
        p=p,
        s=1.0 / (1.0 - walk) if walk < 1.0 else math.inf,
        how={  # all of them, as the count and the mean beside it
            "full_share": float(f.evidence["full_share"]),
            "over": over_words(str(f.evidence.get("over"))),
            "full_collections": int(f.evidence["full_collections"]),
            "mean_full_ms": float(f.evidence["mean_full_ms"]),
        },
        evidence={**_evidence(f), "frozen_part": round(walk, 3)},
        model=f"s = 1/(1 - {walk:.2f}) on the time of the full collections made once the "
        f"work had begun ({p:.0%} of the {over_words(str(f.evidence.get('over')))}, measured "
        f"by the collector's callbacks): {part}",
    )


def _close_held_batches(ctx: RuleContext, f: Finding, row: pd.Series) -> Proposal | None:
    """The batcher's stage, where the requests' batches waited out their window with
    every request in flight in them (``analyzers.batch_window``): closed at the requests
    in flight, the lower of its two bounds (``HeldBatches.speedup``)."""
    held = ctx.bd.batches
    if held is None or f.stage != held.stage or held.speedup is None:
        return None
    size = max(2, round(held.mean_batch))
    return Proposal(
        stage=f.stage,
        p=1.0 - 1.0 / held.speedup,  # the share it takes away: the speedup is all of it
        s=math.inf,
        how={
            "batch": held.mean_batch,
            "bursts": held.bursts,
            "hold": held.hold_ms,
            "closed": held.closed_share,
            "fill": held.fill_ms,
            "sketch": _HELD_BATCHES.format(size=size, wait_s=max(held.fill_ms, 1.0) / 1e3),
        },
        evidence={
            **_evidence(f),
            "batches": held.bursts,
            "mean_batch": round(held.mean_batch, 2),
            "hold_ms": round(held.hold_ms, 2),
            "fill_ms": round(held.fill_ms, 2),
            "cycle_ms": round(held.cycle_ms, 2),
            "closed_share": round(held.closed_share, 3),
            "held_s": round(held.held_s, 3),
            "cycles_s": round(held.cycles_s, 3),
            "loop_cpu_share": round(held.loop_cpu_share or 0.0, 4),
        },
        model=(
            f"a closed loop (each client sends again once answered), bounded twice: the "
            f"holds gone, {held.cycles_s:.2f} s of cycles over {held.cycles_s - held.held_s:.2f}"
            f" s ({held.without_holds:.2f}x); {held.serving} then busy all the time, on "
            f"CPU today {held.loop_cpu_share or 0:.0%} of the cycles (bottleneck law: "
            f"{1 / (held.loop_cpu_share or 1):.2f}x). The lower bound, and low: a request's "
            "work costs less once the loop no longer idles between batches (warm caches)"
        ),
        speedup=held.speedup,
        ceiling=held.speedup,
    )


def _dynamic_batching(ctx: RuleContext, f: Finding, row: pd.Series) -> Proposal | None:
    if not (f.kind in ("cpu", "gpu") and float(row["tensor_share"]) >= 0.5 and ctx.sequential):
        return None
    py = float(row["cpu_share"]) * float(row["python_share"])
    batch = ctx.model.batch
    return Proposal(
        stage=f.stage,
        p=f.share,
        s=amdahl(py, batch),
        how={"py": py, "batch": batch},
        evidence={**_evidence(f), "interpreter_share": round(py, 4)},
        model=f"s = 1/((1-f) + f/{batch}), f = interpreter time between the stage's tensor "
        "ops (amortised over the batch)",
    )


def _multiprocess(ctx: RuleContext, f: Finding, row: pd.Series) -> Proposal | None:
    # contention/gil (threads wait for the GIL more than they run) or cpu/gil (they run
    # more than they wait): either way Python on several threads shares one core
    if f.subkind != "gil":
        return None
    threads = int(row["threads"])
    s = float(min(threads, ctx.cores))
    used = ctx.facts.process_cores
    if used > 0:
        # bottleneck law: the process cannot use more than the cores other processes
        # leave it, whatever its threads do
        s = min(s, max(1.0, _free_cores(ctx.facts) / used))
    return Proposal(
        stage=f.stage,
        p=f.share,
        s=s,
        how={"threads": threads, "gil": float(row["wait_gil"]), "cores": ctx.workers},
        evidence=_evidence(f),
        model="s = min(threads, cores, free cores / cores used): processes run in parallel "
        "without the GIL, on the cores the process does not use yet",
    )


def _reduce_lock_scope(ctx: RuleContext, f: Finding, row: pd.Series) -> Proposal | None:
    if not (f.kind == "contention" and f.subkind == "lock"):
        return None
    if f.rule == "queued_for_a_limit" and f.evidence.get("queued_in") != "asyncio.Lock":
        return None  # a pool's or a semaphore's permits: raised (_raised_limit), not shortened
    queued = f.evidence.get("waiting_threads") or f.evidence.get("in_line_per_call")
    if queued:  # serialised: one thread works under the lock while the others queue on it
        waiting = float(queued)
        return Proposal(
            stage=f.stage,
            p=f.share,
            s=1.0 + waiting,
            how={"lock": waiting / (1.0 + waiting), "top_call": f"held across {row['top_call']}"},
            evidence=_evidence(f),
            model="s = 1 + the threads queued on the lock: their calls overlap once it is "
            "not held across them",
        )
    lock = float(row["wait_lock"])
    return Proposal(
        stage=f.stage,
        p=f.share,
        s=1.0 / max(1e-6, 1.0 - lock),
        how={"lock": lock, "top_call": row["top_call"]},
        evidence=_evidence(f),
        model="s = 1/(1 - lock wait share): the waits removed",
    )


def _fp16(ctx: RuleContext, f: Finding, row: pd.Series) -> Proposal | None:
    if not (f.kind == "gpu" and f.subkind == "gpu_compute"):
        return None
    return Proposal(
        stage=f.stage,
        p=f.share,
        s=ctx.model.fp16,
        how={},
        evidence=_evidence(f),
        model=f"s = {ctx.model.fp16:g} on the GPU-bound stage",
    )


def _kernel_fusion(ctx: RuleContext, f: Finding, row: pd.Series) -> Proposal | None:
    if not (f.kind == "gpu" and f.subkind == "launch_bound"):
        return None
    return Proposal(
        stage=f.stage,
        p=f.share,
        s=amdahl(float(row["cpu_share"]), ctx.model.fusion),
        how={},
        evidence=_evidence(f),
        model=f"s = 1/((1-f) + f/{ctx.model.fusion:g}), f = launch (CPU) share",
    )


def _io_binding(ctx: RuleContext, f: Finding, row: pd.Series) -> Proposal | None:
    if not (f.kind == "gpu" and f.subkind == "transfer"):
        return None
    return Proposal(
        stage=f.stage,
        p=f.share,
        s=amdahl(float(row["wait_gpu_sync"]), ctx.model.transfer),
        how={"top_call": row["top_call"]},
        evidence=_evidence(f),
        model=f"s = 1/((1-f) + f/{ctx.model.transfer:g}), f = copy wait share",
    )


def _split_cpu_gpu_pipeline(ctx: RuleContext, f: Finding, row: pd.Series) -> Proposal | None:
    if not (f.kind == "gpu" and f.subkind == "gpu_starved"):
        return None
    return Proposal(
        stage=f.stage,
        p=f.share,
        s=math.inf,
        how={},
        evidence=_evidence(f),
        model="the CPU stage overlaps the GPU work: its time leaves the path",
    )


def _free_cores(facts: RunFacts) -> float:
    """The cores this process could use: all but those other processes kept busy, and
    no more than its affinity mask or cgroup CPU quota allows; at least one core, or the
    quota where it allows less (half a core bounds throughput at half a core's)."""
    allowed = allowed_cores(facts)
    others = max(0.0, facts.host_cores_busy - facts.process_cores)
    return max(min(1.0, allowed), min(max(1, facts.cpu_count) - others, allowed))


def _held_by_its_cpu(ctx: RuleContext) -> tuple[Finding, dict[str, str]] | None:
    """The finding that leads a process its CPU limits, and how the fix says so: a stage
    on a CPU that leads the path; or, in a served process, where no one stage need lead
    (each instance has its own interpreter): the stages the GIL holds back together
    (``rules.gil_bound_findings``), or its stages all on a CPU or waiting for the GIL
    together (``rules.interpreter_bound_findings``). A job's are read by the CPU's
    reading alone (one stage leading the path; else ``multiprocess`` on its stages): the
    reading across stages was measured on served apps, whose requests another instance
    can take, and on no job run as instances of itself. Start-up's imports are no
    steady state to run more of (``stacks.IMPORTS``)."""
    top = ctx.findings[0]
    if top.stage == IMPORTS:
        return None
    served = bool(ctx.bd.requests.count)
    held, reading = read_together(ctx.findings, served) if served else ([], "")
    if reading == "gil":
        also = f" (the stages it holds back: {_shares_words(held)} of the time)"
        return top, {"bound": "held to one core by the GIL", "also": also}
    if top.kind == "cpu" and top.share >= THRESHOLDS.bottleneck_share:
        return top, {"bound": "CPU-bound", "also": ""}
    if reading == "interpreter":
        also = f" (every stage on a CPU or waiting for the GIL: {_shares_words(held)} of the time)"
        return top, {"bound": "held to one core by its interpreter", "also": also}
    return None


def _shares_words(findings: list[Finding]) -> str:
    """``embed 49%, word_ids 18%``: each finding's stage and its share of the path."""
    return ", ".join(f"{f.stage} {f.share:.0%}" for f in findings)


def _multi_instance(ctx: RuleContext) -> Proposal | None:
    """A CPU-bound service on one core of several: one instance per core (throughput)."""
    facts, model = ctx.facts, ctx.model
    if not ctx.findings or ctx.cores <= 1 or facts.process_cores <= 0:
        return None
    held = _held_by_its_cpu(ctx)
    if held is None:
        return None
    top, words = held
    free = _free_cores(facts)
    # One instance per free core, each as fast as this one alone, until the cores run
    # out; instances running together share caches and memory bandwidth, and each runs
    # at instance_efficiency of one alone.
    instances = float(round(free))
    s = min(instances, free / max(facts.process_cores, 1e-6))
    s = s * model.instance_efficiency if instances > 1 else s
    if s < model.min_speedup:
        return None
    return Proposal(
        stage=top.stage,
        p=1.0,
        s=s,
        how={"used": facts.process_cores, "cores": ctx.workers, **words},
        evidence={
            "finding": f"{top.kind}/{top.subkind}",
            "process_cores": round(facts.process_cores, 2),
            "cpu_count": ctx.cores,
            "host_cores_busy": round(facts.host_cores_busy, 2),
        },
        model="bottleneck law: CPU throughput scales with the cores left free by other processes",
        speedup=s,
        ceiling=free / facts.process_cores,
    )


def _lazy_init(ctx: RuleContext) -> Proposal | None:
    cold = ctx.cold
    if not cold:
        return None
    total = ctx.bd.requests.total_s
    return Proposal(
        stage=cold["stage"],
        p=min(1.0, cold["seconds"] / total) if total > 0 else 0.0,
        s=math.inf,
        how={k: v for k, v in cold.items() if k != "stage"},
        evidence={"finding": "cold_start", **cold},
        model="s = infinite: the initialisation leaves the request path",
    )


# fix_leak's stage where no site is named, and its sketch, by what holds the leak
# (``leaks.what_holds``): small objects in a container (or open), large buffers and
# native memory, threads that never end, descriptors never closed
_UNNAMED = {
    "": "the growing objects",
    "large": "large buffers or native memory",
    "threads": "threads that never end",
    "asyncio tasks": "asyncio tasks never awaited",
    "file descriptors": "sockets or files never closed",
}
# where no site is named: how to name one, where tracemalloc (--memory) can see it --
# not for native memory (it traces Python's allocators only: the large kind's sketch
# says so) nor for what piles up (the pile names it)
_NAME_THE_SITES = {
    "": "Run with --memory to name the sites. ",
    "small": "Run with --memory to name the sites. ",
}
_CACHE_SKETCH = (
    "    from functools import lru_cache     # or cachetools.LRUCache(maxsize=...)\n"
    "    @lru_cache(maxsize=1024)\n"
    "    def cached(key): ..."
)
_LEAK_SKETCH = {
    "": _CACHE_SKETCH,
    "small": _CACHE_SKETCH,
    "large": (
        "    from collections import deque\n"
        "    RECENT = deque(maxlen=10_000)   # the last entries, not a buffer that only grows\n"
        "and free what native code allocates for a request (the library's close/free call, "
        "or a context manager around it); `--memory` names the Python sites of large "
        "allocations, and a growth it does not see is native"
    ),
    "threads": (
        "    from concurrent.futures import ThreadPoolExecutor\n"
        "    POOL = ThreadPoolExecutor(max_workers=8)   # made once, reused by every request\n"
        "    POOL.submit(follow_up, request)\n"
        "and give every wait in a thread a way to end (a timeout, an event set at shutdown)"
    ),
    "asyncio tasks": (
        "    async with asyncio.TaskGroup() as group:   # awaited before the request ends\n"
        "        group.create_task(audit(payload))\n"
        "or keep each background task, give what it awaits a timeout (asyncio.timeout), "
        "and cancel the ones still pending at shutdown"
    ),
    "file descriptors": (
        "    with open(path) as f: ...          # closed at the block's end, error or not\n"
        "    SESSION = requests.Session()        # one client, its connections reused\n"
        "and close what a request opens (response.close(), conn.close()) on every path"
    ),
}


def _fix_leak(ctx: RuleContext) -> Proposal | None:
    leak = ctx.leak
    if not (leak and leak.get("detected")):
        return None
    sites = leak.get("top_sites") or []
    kind, held = what_holds(leak)
    where = sites[0]["site"] if sites else _UNNAMED.get(kind, _UNNAMED[""])
    named = f"Top growing site: {where}. " if sites else _NAME_THE_SITES.get(kind, "")
    return Proposal(
        stage=where,
        p=0.0,
        s=1.0,
        how={
            "rate": f"{leak.get('slope_bytes_per_s', 0.0) / 1e6:.2f} MB/s",
            "sites": named + (f"{held} " if held else ""),
            "sketch": _LEAK_SKETCH.get(kind, _LEAK_SKETCH[""]),
        },
        evidence={
            "slope_bytes_per_s": leak.get("slope_bytes_per_s"),
            "confidence": leak.get("confidence"),
            "top_sites": sites[:3],
        },
        model="a leak costs memory, not time, until it costs everything: the speedup is 1",
        speedup=1.0,
        ceiling=1.0,
    )


# concurrent_io's code sketches: threads for blocking calls, asyncio for awaited ones
_THREADS = (
    "    from concurrent.futures import ThreadPoolExecutor\n"
    "    pool = ThreadPoolExecutor(max_workers={workers})\n"
    "    for result in pool.map(handle, requests):  # handle() calls {function}\n"
    "        ...\n"
    "or, in asyncio, `await asyncio.gather(*(fetch(u) for u in urls))` with an async "
    "client (httpx.AsyncClient, aiohttp). "
)
_OFF_THE_LOOP = (
    "    # in the coroutine: the blocking call on a worker thread, the loop free meanwhile\n"
    "    result = await asyncio.to_thread({function}, ...)\n"
    "    # Starlette/FastAPI: await starlette.concurrency.run_in_threadpool({function}, ...)\n"
    "or an async client (httpx.AsyncClient, aiohttp, an async database driver). A blocking "
    "call inside a coroutine holds the event loop: every other request waits behind it. "
)
_WAITED_ON = {"network": "the network", "disk": "the disk", "subprocess": "another process"}
_CHILDREN = (
    "    from concurrent.futures import ThreadPoolExecutor\n"
    "    with ThreadPoolExecutor(max_workers={workers}) as pool:\n"
    "        results = list(pool.map({function}, items))  # a child each, side by side\n"
    "or, in asyncio, `await asyncio.create_subprocess_exec(...)` under an "
    "asyncio.Semaphore({workers}). "
)
_HELD_BATCHES = (
    "    MAX_BATCH = {size}  # the requests in flight, not the most it could take\n"
    "    MAX_WAIT_S = {wait_s:.3f}  # or the window cut to what a batch takes to fill\n"
    "(Triton: max_queue_delay_microseconds; TorchServe: batch_size and max_batch_delay; "
    "Ray Serve: @serve.batch(max_batch_size=..., batch_wait_timeout_s=...)). "
)
_RAISE_THE_LIMIT = (
    "{holding:.1f} of its calls were out at a time, as many as its {limit} let out, while "
    "{in_line:.1f} more waited in line. Raise the limit to {workers}, as far as the far "
    "end serves that many at once:\n"
)
_LIMITS_ASYNC = (
    "    pool = await asyncpg.create_pool(dsn, max_size={workers})   # a database pool\n"
    "    client = httpx.AsyncClient(limits=httpx.Limits(max_connections={workers}))\n"
    "    limit = asyncio.Semaphore({workers})   # a semaphore of the service's own\n"
)
_LIMITS_THREADS = (
    "    engine = sqlalchemy.create_engine(url, pool_size={workers})   # a database pool\n"
    "    session.mount('http://', requests.adapters.HTTPAdapter(pool_maxsize={workers}))\n"
    "    limit = threading.BoundedSemaphore({workers})   # a semaphore of the service's own\n"
)
_GATHER = (
    "    limit = asyncio.Semaphore({workers})\n"
    "    async def bounded(item):\n"
    "        async with limit:\n"
    "            return await {function}(item)\n"
    "    results = await asyncio.gather(*(bounded(item) for item in items))\n"
    "Its waits are awaits in coroutines, one after another: started together (gather, "
    "or an asyncio.TaskGroup), the loop overlaps them. A blocking call inside a coroutine "
    "would stall the loop: await an async client instead, or asyncio.to_thread. "
)


# -- the catalog -------------------------------------------------------------------------
FIXES: tuple[Fix, ...] = (
    Fix(
        id="concurrent_io",
        title="Make the {stage} calls concurrent",
        how=(
            "{stage} waits on {what} for {wait:.0%} of its time, {pace}. "
            "Overlap the waits ({workers} in flight):\n{sketch}Waited in: {top_call}."
        ),
        scope="throughput",
        constants=("io_workers_max", "contention_cpu"),
        finding_rule=_concurrent_io,
        rewrites_stage=True,
    ),
    Fix(
        id="close_held_batches",
        title="Close {stage}'s batches at the requests in flight",
        how=(
            "{stage}'s batches held {batch:.1f} requests each, every request in flight "
            "({closed:.0%} of {bursts} batches were sent only once the last one's answers "
            "began: its clients were all in each), and then waited {hold:.0f} ms past the "
            "last with none on its way: the window, not the work, sets each request's "
            "time. Close a batch once it holds the requests in flight, or cut its window "
            "to what it takes to fill ({fill:.1f} ms here):\n"
            "{sketch}"
        ),
        scope="throughput",
        finding_rule=_close_held_batches,
    ),
    Fix(
        id="vectorize_python",
        title="Vectorise the Python loops in {stage}",
        how=(
            "{stage} spends {py:.0%} of its time in Python code: the interpreter and the "
            "builtins it calls (hottest line {top_line}). Replace per-element loops by "
            "whole-array numpy operations:\n"
            "    # before: for x in items: total += (x - c) ** 2\n"
            "    arr = np.asarray(items)\n"
            "    total = ((arr - c) ** 2).sum()\n"
            "Broadcasting (`a[:, None, :] - b[None, :, :]`) replaces nested loops. Text "
            "work (tokenising, parsing) does not vectorise with numpy: hand the whole text "
            "to compiled code instead of a call per token (a tokenizer library such as "
            "Hugging Face `tokenizers`; one regular expression over the text)."
        ),
        scope="path",
        constants=("vectorize", "vectorize_least", "vectorize_most"),
        finding_rule=_vectorize_python,
        rewrites_stage=True,
    ),
    Fix(
        id="gc_freeze",
        title="Freeze what start-up leaves alive (gc.freeze())",
        how=(
            "The garbage collector's full collections held the process {full_share:.0%} of "
            "the {over}: {full_collections} of them, {mean_full_ms:.0f} ms each, every one "
            "walking every object the process keeps, the data it loads once included (a "
            "catalog, a vocabulary, a model's Python objects), set off by allocations in "
            "{stage}. Take what start-up leaves alive out of the collector's walks:\n"
            "    # once loading is done, before the first request (a pre-fork server: in\n"
            "    # the master, before the fork, which keeps the workers' pages shared too)\n"
            "    import gc\n"
            "    gc.collect()   # start-up's garbage first: what is frozen is never freed\n"
            "    gc.freeze()    # what is alive now leaves the collector's generations\n"
            "Full collections still run, over what requests keep: far fewer objects."
        ),
        scope="path",
        constants=("frozen_walk",),
        finding_rule=_gc_freeze,
    ),
    Fix(
        id="dynamic_batching",
        title="Batch requests through {stage}",
        how=(
            "{stage} runs its tensor ops one request at a time; {py:.0%} of it is the "
            "interpreter between ops, paid again for every request. Group requests:\n"
            "    batch = collect(queue, max_size={batch}, max_wait_ms=5)\n"
            "    outputs = {function}(np.stack([r.input for r in batch]))\n"
            "(Triton's dynamic batcher, TorchServe batch_size/max_batch_delay, Ray Serve "
            "@serve.batch do this for you)."
        ),
        scope="throughput",
        constants=("batch",),
        finding_rule=_dynamic_batching,
        rewrites_stage=True,
    ),
    Fix(
        id="multiprocess",
        title="Move {stage} to a process pool",
        how=(
            "{stage} runs Python on {threads} threads that wait for the GIL {gil:.0%} of the "
            "time. Move it to processes:\n"
            "    from concurrent.futures import ProcessPoolExecutor\n"
            "    pool = ProcessPoolExecutor(max_workers={cores})\n"
            "    result = pool.submit({function}, payload).result()"
        ),
        scope="throughput",
        finding_rule=_multiprocess,
        rewrites_stage=True,
    ),
    Fix(
        id="reduce_lock_scope",
        title="Shorten what holds the lock in {stage}",
        how=(
            "{stage} waits {lock:.0%} of its time on a lock ({top_call}). Hold it only "
            "around the shared state, not the work:\n"
            "    value = compute(x)          # outside\n"
            "    with lock:\n"
            "        shared[key] = value     # inside, short"
        ),
        scope="path",
        finding_rule=_reduce_lock_scope,
        rewrites_stage=True,
    ),
    Fix(
        id="fp16",
        title="Run the model in {stage} in FP16",
        how=(
            "The GPU is busy in {stage}. Run it in half precision:\n"
            "    model = model.half()            # or\n"
            "    with torch.autocast('cuda', dtype=torch.float16): out = model(x)"
        ),
        scope="path",
        constants=("fp16",),
        finding_rule=_fp16,
    ),
    Fix(
        id="kernel_fusion",
        title="Fuse the small kernels of {stage}",
        how=(
            "{stage} launches many small kernels and the GPU waits between them. Fuse them:\n"
            "    model = torch.compile(model, mode='reduce-overhead')  # CUDA graphs\n"
            "or capture a static-shape step with torch.cuda.CUDAGraph."
        ),
        scope="path",
        constants=("fusion",),
        finding_rule=_kernel_fusion,
    ),
    Fix(
        id="io_binding",
        title="Keep {stage}'s tensors on the device",
        how=(
            "{stage} waits on host-device copies ({top_call}). Pin host memory, copy "
            "asynchronously and keep results on the device:\n"
            "    x = x.pin_memory().to('cuda', non_blocking=True)\n"
            "    # ONNX Runtime: session.io_binding() to bind device buffers"
        ),
        scope="path",
        constants=("transfer",),
        finding_rule=_io_binding,
    ),
    Fix(
        id="split_cpu_gpu_pipeline",
        title="Run {stage} off the GPU path",
        how=(
            "The GPU idles while {stage} keeps the CPU busy. Run {stage} on its own "
            "thread or process, feeding the model through a bounded queue:\n"
            "    q = queue.Queue(maxsize=8)\n"
            "    threading.Thread(target=lambda: [q.put({function}(x)) for x in inputs]).start()\n"
            "    while (x := q.get()) is not None: model(x)\n"
            "(torch DataLoader(num_workers=N, pin_memory=True) for input pipelines)."
        ),
        scope="path",
        finding_rule=_split_cpu_gpu_pipeline,
        rewrites_stage=True,
    ),
    Fix(
        id="multi_instance",
        title="Run one instance per core",
        how=(
            "The service is {bound} in {stage}{also} and uses {used:.1f} of {cores} cores. Run "
            "one worker process per core behind the same queue or port:\n"
            "    gunicorn -w {cores} app:app          # or uvicorn --workers {cores}\n"
            "    # batch jobs: ProcessPoolExecutor(max_workers={cores}).map(handle, jobs)\n"
            "Pin BLAS to one thread per process (OMP_NUM_THREADS=1) so workers do not "
            "oversubscribe the cores."
        ),
        scope="throughput",
        constants=("instance_efficiency", "min_speedup"),
        run_rule=_multi_instance,
    ),
    Fix(
        id="lazy_init",
        title="Initialise {stage} at start-up, not in the first request",
        how=(
            "{stage} ran inside the first request and made it {ratio:.0f}x the median "
            "request ({seconds:.2f} s). Do it at start-up, before taking traffic:\n"
            "    MODEL = load_model()   # module level or the server's startup hook\n"
            "    def handle(req): return MODEL(req)\n"
            "and report ready (health check) only once it is done."
        ),
        scope="path",
        run_rule=_lazy_init,
    ),
    Fix(
        id="fix_leak",
        title="Bound what grows: {stage}",
        how=(
            "Memory grows {rate} and does not come back. {sites}Bound it, keeping what is "
            "still used rather than everything ever made:\n{sketch}"
        ),
        scope="memory",
        run_rule=_fix_leak,
    ),
)

# DESIGN.md's catalog ids that no rule produces yet, and the evidence each waits for.
FUTURE: dict[str, str] = {
    "faster_codec": "time in decode/encode calls (json, PIL, base64) named by the frames",
    "compress_payload": "network waits proportional to payload bytes (needs sizes per call)",
    "int8_calibration": "GEMM/conv kernels by precision, from a torch/Kineto trace",
    "model_packing": "several models each leaving the GPU mostly idle (per-model GPU time)",
    "cache_results": "repeated identical inputs to an expensive stage (needs input hashes)",
}


# The fixes for the collector's own finding (``rules._collector_pauses``): the stage's
# other fixes come from the stage's finding, once
_COLLECTOR_FIXES = frozenset({"gc_freeze"})


def _staged_findings(ctx: RuleContext) -> Iterator[tuple[Finding, pd.Series]]:
    # Every finding, not only those holding a fifth of the path (as until 2026-11-28): an
    # Amdahl estimate on less than a fifth stays under ``min_speedup`` (1 / 0.8 = 1.25)
    # and is kept as a minor fix, but it compounds with the others and can still be what
    # a user applies -- score_feed's fetches, a third of its path on a host of full speed,
    # were 17-20% on one at half speed (2026-11-28), where overlapping them realized
    # 1.11-1.17x and no fix for them was proposed at all
    for f in ctx.findings:
        if f.stage in ctx.rows.index:
            yield f, ctx.rows.loc[f.stage]


def proposed(
    findings: list[Finding],
    bd: Breakdown,
    facts: RunFacts,
    *,
    cold: dict[str, Any] | None = None,
    leak: dict[str, Any] | None = None,
    model: Model = MODEL,
) -> list[Recommendation]:
    """Every fix the catalog's rules propose (per finding in their order, then the
    run-level ones): ``ranked`` keeps those worth ``model.min_speedup``, ``minor`` the
    rest."""
    ctx = RuleContext(
        findings=findings,
        bd=bd,
        facts=facts,
        rows=stage_rows(bd),
        demands=demands(bd, facts, cold),
        cold=cold,
        leak=leak,
        model=model,
    )
    recs: list[Recommendation] = []
    for finding, row in _staged_findings(ctx):
        # A stage with no frame of the service's code (a server's loop and parser under
        # ``python -m uvicorn``, a library's own thread) is no code to rewrite: uvicorn
        # answering a route that does nothing read "Vectorise the Python loops in
        # <library>: 5.5x" (h11's parser and asyncio's loop, tests/serving_corpus/
        # stall_api.truth.md)
        ours = finding.stage not in NOT_THE_SERVICE
        for fix in FIXES:
            if finding.rule == "collector_pauses" and fix.id not in _COLLECTOR_FIXES:
                continue  # its stage is where collections were set off, not what it names
            if fix.finding_rule is not None and (ours or not fix.rewrites_stage):
                proposal = fix.finding_rule(ctx, finding, row)
                if proposal is not None:
                    recs.append(fix.recommendation(proposal))
    for fix in FIXES:
        if fix.run_rule is not None:
            proposal = fix.run_rule(ctx)
            if proposal is not None:
                recs.append(fix.recommendation(proposal))
    return recs


def recommend(
    findings: list[Finding],
    bd: Breakdown,
    facts: RunFacts,
    *,
    cold: dict[str, Any] | None = None,
    leak: dict[str, Any] | None = None,
    model: Model = MODEL,
) -> list[Recommendation]:
    """The fixes worth ``model.min_speedup`` or more, best first (``proposed``, ranked)."""
    return ranked(proposed(findings, bd, facts, cold=cold, leak=leak, model=model), model)


def ranked(recs: list[Recommendation], model: Model = MODEL) -> list[Recommendation]:
    """Those worth ``model.min_speedup`` or more (memory fixes always), best first."""
    kept = [r for r in recs if r.scope == "memory" or r.estimated_speedup >= model.min_speedup]
    # a leak's fix first (a leaking service is OOM-killed whatever its speed), then by speed
    return sorted(kept, key=lambda r: (r.scope != "memory", -r.estimated_speedup))


def minor(recs: list[Recommendation], model: Model = MODEL) -> list[Recommendation]:
    """Those proposed but worth less than ``model.min_speedup`` alone, best first. Kept
    aside, not dropped: such a fix compounds with the others (a cold start that is 17% of
    a serial service's time buys 1.2x alone, and the same again once its fetches run
    concurrently: multimodal_pipeline), and ``probe diff --applied`` predicts the pair
    only if the diagnosis still has both."""
    below = [r for r in recs if r.scope != "memory" and r.estimated_speedup < model.min_speedup]
    return sorted(below, key=lambda r: -r.estimated_speedup)
