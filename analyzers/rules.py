"""Classification rules: every threshold of the diagnosis, named, with where it comes from.

``classify(bd, facts)`` turns a ``Breakdown`` (and run-level ``RunFacts``) into
``Finding`` s, most important first; the first is the run's primary limit. One finding per
stage that holds a meaningful share of the request path, plus run-level ones (a starved
GPU, a slow first request). Memory leaks are judged apart (``analyzers.leaks``).

A stage's time splits into components: interpreting Python, native code, and waiting
by reason. Runnable-but-not-running time that is not the GIL (``unknown``: the OS had no
core for the thread) is CPU demand and joins the CPU components, where the host had no
core free; beside an idle core it is the stage's waits' (``runnable_beside_idle_cores``).
The largest component names the stage's kind/subkind, the on-CPU time competing as one
component (python and native then say which of the two it is).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import pandas as pd

from probe.analyzers.breakdown import DEFAULT_HZ, Breakdown
from probe.analyzers.collector import CollectorTime
from probe.analyzers.constants import constant
from probe.analyzers.run_queue import RunQueueWait
from probe.analyzers.stacks import IMPORTS
from probe.analyzers.transfer import TRANSFER
from probe.analyzers.vocabulary import WAITS, kind_words, subkind_words

__all__ = [
    "THRESHOLDS",
    "Finding",
    "RunFacts",
    "Thresholds",
    "allowed_cores",
    "classify",
    "gil_bound_findings",
    "gil_waits_on_one_core",
    "interpreter_bound_findings",
    "interpreter_waits_by_demand",
    "read_together",
    "runnable_beside_idle_cores",
    "stage_rows",
    "with_doubts",
]


@dataclass(frozen=True)
class Thresholds:
    finding_share: float = constant(
        0.05,
        "A stage is a finding when it holds this share of the request path. The "
        "TensorFlow profiler's input-pipeline analysis calls a step 'moderately' "
        "input-bound above 5% of its time and 'highly' above 20%; we take the lower band "
        "for any stage.",
    )
    bottleneck_share: float = constant(
        0.50,
        "Below this share the dominant stage is 'modest': the service has no bottleneck "
        "worth a headline (Amdahl: fixing half the path at best doubles throughput).",
    )
    native_majority: float = constant(
        0.50,
        "cpu/python vs cpu/native: whichever holds most of the stage's on-CPU time.",
    )
    gil_share: float = constant(
        0.05,
        "Python threads waiting for the GIL: contention once waits for it reach the TF "
        "profiler's 'moderate' 5% band; with a single busy thread it cannot be contention.",
    )
    idle_cores: float = constant(
        0.5,
        "cores the host left idle on average, other processes and ours counted: from half a "
        "core a runnable thread of ours waits for the GIL, not for a core (tokenize_pool: "
        "four GIL-bound threads at 0.93-0.98 of 2 cores, their wakes for the GIL caught "
        "runnable; search_flask: 1.7 of 2 cores busy, its threads waiting for a core)",
    )
    starved_gpu_util: float = constant(
        10.0,
        "SageMaker Debugger's CPUBottleneck rule: GPU utilisation below 10% while CPU "
        "utilisation is above 90%, for more than 50% of the time.",
    )
    starved_cpu_util: float = constant(90.0, "SageMaker Debugger's CPUBottleneck rule.")
    starved_time_share: float = constant(0.50, "SageMaker Debugger's CPUBottleneck rule.")
    gpu_busy_util: float = constant(
        70.0,
        "GPU busy enough to call a stage GPU-bound: SageMaker Debugger's "
        "LowGPUUtilization rule flags below 70%; at or above it the GPU, not its "
        "feeding, is the limit.",
    )
    launch_gpu_util: float = constant(
        50.0,
        "Launch-bound (after HTA's kernel-launch analysis: many kernels shorter than their "
        "launch overhead leave the GPU idle between them). Without kernel traces we use "
        "its symptom: a stage issuing tensor ops that keeps the CPU busy while the GPU "
        "stays below half utilisation.",
    )
    launch_tensor_share: float = constant(0.50, "See launch_gpu_util: most of the CPU in ops.")
    clear_lead: float = constant(
        0.5,
        "the leader's lead over the runner-up (at its 99% lower bound, see lead_z), as a "
        "share of its own: at 0.5 the runner-up holds half the leader's time, so fixing it "
        "buys at most half as much (Amdahl); a smaller lead leaves which to fix first open",
    )
    lead_z: float = constant(
        2.326,
        "the lead's lower bound: one-sided 99% (z) times the share difference's "
        "multinomial standard error sqrt((p1 + p2) / n) at n samples (samples taken as "
        "independent, which they are not: the bound errs on the trusting side)",
    )
    no_kernel_witness: float = constant(
        0.5,
        "without the kernel's state, time in a native call no rule names is CPU or a wait "
        "in equal measure for all we know (issue 12's O_DIRECT reads: cpu/native at 100%, "
        "the thread in disk wait 9 readings in 10)",
    )
    ticks_taken: float = constant(
        0.8,
        "the share of its due ticks the stack sampler took below which the verdict says "
        "so: each row then stands for several ticks' time, read at one instant. "
        "render_queue took 1.0 at the 0.1-ms switch interval and 0.29-1.0 (median 0.68) "
        "at its own 5 ms (16 runs, 2026-11-29: the sampler waited for the GIL while the "
        "two threads handed it to each other); its one cpu/native verdict in those came "
        "with a 197-ms row read in `range`. The corpus's batch services at 0.1 ms: "
        "0.97-1.0",
    )
    cpu_consistency: float = constant(
        0.5,
        "a CPU verdict whose process used under half the cores its CPU share implies "
        "(share x the CPU component) is contradicted by the process's own CPU time",
    )
    serialised_waiters: float = constant(
        1.0,
        "a stage runs one at a time under a lock when, while it runs, at least one other "
        "thread waits on a lock in it (on average): demand for a second one, held off; "
        "likewise a task waiting for a pool's or semaphore's permit per task holding one",
    )
    host_hinge: float = constant(
        0.5,
        "a verdict that the other processes' load decides: where they held the cores, and "
        "the stage, its waits for them taken out, reads otherwise, either reading is the "
        "service's for all we know, in equal measure (tokenize_pool beside one busy loop "
        "on 2 cores: cpu/python at 0.99-1.0 in 5 runs, its threads' run queue 62-71% of "
        "their ready time; without it contention/gil, what it reads on an idle host; its "
        "process pool realized 1.2-1.6x there)",
    )
    cold_start_ratio: float = constant(
        10.0,
        "A slow first request: its latency at least this many times the median request "
        "(one cold start among hundreds of requests is invisible in p99 but not here).",
    )


THRESHOLDS = Thresholds()

# Methods that copy between host and device: a GPU wait in them is a transfer.
_TRANSFER_METHODS = {"to", "cuda", "cpu", "item", "numpy", "copy_", "tolist", "pin_memory"}


def _is_transfer(top_call: str) -> bool:
    """``top_call`` is ``callee (file:line)``; judge by the callee's method name."""
    method = top_call.split(" (", 1)[0].rsplit(".", 1)[-1]
    return method in _TRANSFER_METHODS or "memcpy" in method.lower()


@dataclass(frozen=True)
class RunFacts:
    """Run-level figures the rules need besides the breakdown."""

    has_gpu: bool = False
    cpu_count: int = 1
    # the cores the process may run on (its affinity mask, capped by its cgroup's CPU
    # quota; meta.json's host.cores_allowed), and which limits it ("" where neither
    # does); None: all of the host's
    cores_allowed: float | None = None
    cpu_limit: str = ""
    process_cores: float = 0.0  # mean cores the process tree used over the run
    # of that CPU, the share in user mode: system time is the kernel's work in syscalls,
    # which CPython makes with the GIL released (sockets, files, even non-blocking ones)
    user_share: float = 1.0
    host_cores_busy: float = 0.0  # mean cores busy on the host (all processes)
    # of the threads' ready time, the share they waited for a CPU while other processes
    # held the host's cores (``run_queue.others_queued_share``; 0 where they did not)
    others_queued: float = 0.0
    # the threads' waits for a CPU and their run time (``run_queue.run_queue_wait``; None
    # where the samples carry none): the figure both of the above and the run's note read
    run_queue: RunQueueWait | None = None
    gpu_util_mean: float = float("nan")
    starved_time_share: float = 0.0  # share of time with GPU < 10% and CPU > 90%
    first_request_ms: float | None = None
    first_request_stages: dict[str, float] = field(default_factory=dict)  # stage -> s
    # the same stages' excess CPU, the process tree's (``/proc``) over their spans: what a
    # cold start takes from the cores, not its wall time (a 2.2-s model start under probe
    # used ~1.6 s of CPU: the rest it waited for a core)
    first_request_stage_cpu: dict[str, float] = field(default_factory=dict)  # stage -> s
    sample_hz: float = DEFAULT_HZ  # the stack sampler's rate: samples a second
    # the share of the ticks due at that rate (or its pacer's) that it took: None where
    # the run does not say (``diagnosis.ticks_taken``)
    ticks_taken: float | None = None
    # why the sampler could not read threads' kernel states ("" when it could, or when the
    # run predates them): a native call's time is then CPU or an unnamed wait, unknown
    kernel_unavailable: str = ""
    # CPU copying data between processes, in cores over the run (``Breakdown.copy_cores``)
    copy_cores: float = 0.0
    # the garbage collector's collections (``analyzers.collector``): None where the run
    # did not time them (a run before 2026-12-05, a collector the target turned off)
    collector: CollectorTime | None = None
    # of the process's CPU (probe's left out), the share of its threads the interpreter
    # does not know (``intra_op.native_threads``: BLAS and OpenMP teams, torch's intra-op
    # threads): their CPU never holds the GIL. 0 where the run does not say which threads
    # are probe's (before 2026-12-05)
    native_cpu_share: float = 0.0
    # CPU seconds of the child processes the target waited for over the run (the kernel's
    # count: ``resources.children_cpu_s``); None where the run does not have it
    children_cpu_s: float | None = None
    # the process tree's other processes seen: those read over less than a quarter of the
    # run (a child per call) and the rest (a pool's workers, a helper kept running)
    short_lived_children: int = 0
    long_lived_children: int = 0


@dataclass(frozen=True)
class Finding:
    kind: str
    subkind: str
    stage: str
    share: float
    confidence: float
    rule: str
    evidence: dict[str, Any]

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "subkind": self.subkind,
            "stage": self.stage,
            "share": round(self.share, 4),
            "confidence": round(self.confidence, 3),
            "rule": self.rule,
            "evidence": self.evidence,
        }


def interpreter_waits_by_demand(
    table: pd.DataFrame, t: Thresholds = THRESHOLDS, *, path_followed: bool = False
) -> pd.DataFrame:
    """Without spans, the functions' path time with the threads' waits for the interpreter
    (the GIL, or a core: ``wait_gil`` + ``wait_unknown``) charged to the functions in
    proportion to their on-CPU time, not where they were waited.

    Why: summed over threads, every thread that waits for the GIL adds its wait where it
    stands -- eight pool workers waiting in a handler, an event loop waiting between two
    sends -- so a function's share grows with how many threads wait in it, not with what
    it holds. What they wait for is the one interpreter (or the cores): by the bottleneck
    law its demand is each function's on-CPU time, measured exactly by the threads' CPU
    clocks, while which wait is the GIL's and which a core's rests on one kernel-state
    read per tick. The FastAPI corpus app (``predict_api``): its handler holds 58% of the
    process's CPU by /proc; summed, the event loop (two fifths of its ticks runnable on a
    socket call) led the handler 50% to 45% in 1 run in 6; by on-CPU time, 62% to 38%.

    Applied when those waits reach ``gil_share`` of the sampled time (the GIL is
    contended); the total is kept, so the shares still add up to the path. The charged
    waits are the function's components too (``wait_gil``/``wait_unknown`` in the pool's
    proportion, the rest rescaled to the new path time): the rules read a stage by its
    components, and a function holding the GIL has few waits of its own where it
    stands. predict_api on a faster host (2026-11-25: handlers 64% of the CPU by
    /proc, the process at 0.97 of 2 cores): the handler's own GIL waits were 4% of its
    samples, so it read cpu/native (its thread caught at the self-pipe's send, where the
    sampler is handed the GIL), while the event loop waited for the GIL 45% of its time.

    Not to a batch job's followed path (``path_followed``: the main thread's time, its
    waits on other threads replaced by what they did meanwhile): that is a sequence in
    time, not threads summed, and charging one phase's GIL waits to a function that ran
    in another moves time across phases. tokenize_pool: its pool phase is ~91% of the
    wall by /proc (the main thread's own CPU 0.14 s of 2.03 s), its path 91%; charged by
    demand, 82%, and the processes' estimate fell from ~1.8x to 1.7x against 1.6-2.2x
    realized."""
    if path_followed or table.empty or (table["category"] != "function").any():
        return table
    sampled = table["path_s"].astype("float64")
    waits = sampled * (table["wait_gil"] + table["wait_unknown"])
    on_cpu = sampled * table["cpu_share"]
    total, pool, demand = float(sampled.sum()), float(waits.sum()), float(on_cpu.sum())
    gil = float((sampled * table["wait_gil"]).sum())
    if total <= 0 or demand <= 0 or gil < t.gil_share * total:
        return table
    charged = pool * on_cpu / demand
    path_s = sampled - waits + charged
    scale = (sampled / path_s).where(path_s > 0, 0.0)
    rescaled = {f"wait_{r}": table[f"wait_{r}"] * scale for r in WAITS if r != "gil"}
    return table.assign(
        path_s=path_s,
        path_share=path_s / total,
        cpu_share=table["cpu_share"] * scale,
        **rescaled,
        wait_gil=(charged * gil / pool / path_s).where(path_s > 0, 0.0),
        wait_unknown=(charged * (pool - gil) / pool / path_s).where(path_s > 0, 0.0),
    )


def allowed_cores(facts: RunFacts) -> float:
    """The cores the process may run on: the host's, or fewer under an affinity mask or
    a cgroup CPU quota (``RunFacts.cores_allowed``)."""
    host = float(max(1, facts.cpu_count))
    return host if facts.cores_allowed is None else min(host, facts.cores_allowed)


def runnable_beside_idle_cores(
    stages: pd.DataFrame, cpu_count: int, t: Thresholds = THRESHOLDS, headroom: float = math.inf
) -> pd.DataFrame:
    """The stage table with the runnable time (``wait_unknown``) of stages that ran beside
    ``idle_cores`` idle cores (their samples' ``host_cpu_percent``) given to their waits,
    in proportion to them. With a core free a runnable thread is not waiting for one: what
    reads so is a wait's tail, or the sampler's instant. The sampler takes the GIL when a
    thread lets it go, entering a native call, and a timer's wake-up on an idle virtual
    CPU comes with the I/O completions': it finds the thread on a CPU more often than it
    is. On ``shard_scan.py`` (O_DIRECT reads, 0.2 of 2 cores busy) ``read_block`` read
    0.10-0.63 s runnable in 8 runs, while the thread's own scheduler statistics
    (/proc/PID/task/TID/schedstat, exact) put 0.04-0.11 s of its whole run on a run
    queue; counted as CPU demand, that made the disk-bound scan "CPU-bound in native
    code" at 92% confidence in 2 runs of 19 here and in a CI run. A stage without waits
    keeps it: nothing else explains it. The kernel's own count of a wait on a run queue
    (``run_queue_share``: schedstat, split off by ``attribution.split_run_queue_waits``)
    is no instant's reading and stays a wait for a core: an idle core on average is not
    one at every wake (render_queue at a 5-ms switch interval, ~0.9 of 2 cores busy: its
    worker, woken from ``queue.get``, spent 20 of its 46 ms of runnable time on the path
    on a run queue by its schedstat; folded into the wait it was woken from, ``render_all``
    read contention/lock at 6-8% of the path). ``headroom``: the cores the process may use that
    it did not (``allowed_cores`` less its own): idle cores it may not run on (a
    ``taskset``, a container's CPU quota) leave its runnable threads waiting all the same."""
    columns = [f"wait_{r}" for r in WAITS]
    if headroom < t.idle_cores:
        return stages
    if stages.empty or "host_cpu_percent" not in stages or not set(columns) <= set(stages):
        return stages
    busy = stages["host_cpu_percent"].astype("float64") / 100.0 * cpu_count
    waits = stages[columns].astype("float64")
    waited = waits.sum(axis=1)
    queued = stages.get("run_queue_share", pd.Series(0.0, index=stages.index))
    sampled = (stages["wait_unknown"] - queued.astype("float64")).clip(lower=0.0)
    fold = (cpu_count - busy >= t.idle_cores) & (waited > 0) & (sampled > 0)
    if not fold.any():
        return stages
    out = stages.copy()
    given = waits[fold].div(waited[fold], axis=0).mul(sampled[fold], axis=0)
    out.loc[fold, columns] = waits[fold] + given
    out.loc[fold, "wait_unknown"] = out.loc[fold, "wait_unknown"] - sampled[fold]
    return out


def gil_waits_on_one_core(stages: pd.DataFrame, cores: float) -> pd.DataFrame:
    """The stage table with the waits for the GIL (``wait_gil``) read as waits for a
    core (``wait_unknown``) where the process may use at most one core (``cores``:
    ``allowed_cores``): there no two of its threads run at once, GIL or not, so a thread
    waiting for the GIL waits for the core the holder runs on, and processes or a
    GIL-free build gain nothing. Which of the two a wait reads as depends on the switch
    interval: tokenize_pool's four pure-Python threads pinned by ``taskset`` to one CPU
    sat on its run queue at a 0.1-ms interval (read as waits for a core: cpu/python)
    and slept on the GIL's futex at CPython's 5 ms (contention/gil at 87-93%, the failure
    in test_cores_allowed, 2026-11-29)."""
    if cores > 1.0 or stages.empty or not {"wait_gil", "wait_unknown"} <= set(stages):
        return stages
    return stages.assign(
        wait_unknown=stages["wait_unknown"] + stages["wait_gil"], wait_gil=0.0 * stages["wait_gil"]
    )


def stage_rows(bd: Breakdown) -> pd.DataFrame:
    """The stages that compete for the path: requests themselves only if nothing nests;
    without spans, with the waits for the interpreter charged by demand
    (``interpreter_waits_by_demand``)."""
    table = interpreter_waits_by_demand(bd.stages, path_followed=bd.path_followed)
    if table.empty:
        return table
    inner = table[table["category"] != "request"]
    requests = table[table["category"] == "request"]
    # A request's own time outside every stage competes as "<name> (self)".
    if not requests.empty and not inner.empty and bd.requests.total_s > 0:
        own = requests.assign(path_share=requests["self_s"] / bd.requests.total_s)
        own = own.assign(path_s=own["self_s"]).rename(index=lambda n: f"{n} (self)")
        inner = pd.concat([inner, own[own["path_share"] >= THRESHOLDS.finding_share]])
    return (inner if not inner.empty else table).sort_values("path_s", ascending=False)


def _components(row: pd.Series) -> dict[str, float]:
    """Shares of the stage's sampled time: python, native, and each wait reason."""
    cpu = float(row["cpu_share"]) + float(row["wait_unknown"])
    native = float(row["native_share"])
    out = {"python": cpu * (1.0 - native), "native": cpu * native}
    for reason in WAITS:
        out[reason] = float(row[f"wait_{reason}"])
    return out


def interpreter_held(rows: pd.DataFrame) -> pd.Series:
    """Each stage's share of the on-CPU time of the stages that compete for the path:
    how much of the interpreter (and the cores) it holds itself."""
    if rows.empty:
        return pd.Series(dtype="float64")
    on_cpu = rows["path_s"].astype("float64") * rows["cpu_share"]
    total = float(on_cpu.sum())
    return on_cpu / total if total > 0 else on_cpu * 0.0


def _stage_kind(
    row: pd.Series, facts: RunFacts, t: Thresholds, *, holds: float = 1.0
) -> tuple[str, str, str, dict[str, Any]]:
    """The stage's kind from the component that leads its time. ``holds``: its share of
    the path's on-CPU time (``interpreter_held``). A stage holding under
    ``finding_share`` of it is not what contends for the GIL, whatever share of its own
    time its waits for it take: it waits on a holder elsewhere, whose own finding that
    time is, and is read by what it does itself. ingest_pipeline: four consumers woken
    by a parsing producer's puts, each then waiting out the producer's switch interval
    for the GIL; in 1 CI run of several their stage reached 5% of the path, 58% of it
    GIL waits, holding ~3% of the on-CPU time, and read as GIL contention."""
    comp = _components(row)
    evidence: dict[str, Any] = {k: round(v, 4) for k, v in comp.items() if v > 0}
    gpu_util = row.get("gpu_util", np.nan)
    if facts.has_gpu and pd.notna(gpu_util):
        evidence["gpu_util_percent"] = round(float(gpu_util), 1)
    contends = holds >= t.finding_share
    top = _leading_part(comp, contends)
    if top == "gpu_sync":
        if not facts.has_gpu:  # a run without a GPU never yields a gpu kind
            return "cpu", "native", "gpu_sync_without_gpu", evidence
        if _is_transfer(str(row.get("top_call", ""))):
            return "gpu", "transfer", "gpu_wait_in_copy", evidence
        if pd.notna(gpu_util) and gpu_util >= t.gpu_busy_util:
            return "gpu", "gpu_compute", "gpu_wait_gpu_busy", evidence
        return "gpu", "launch_bound", "gpu_wait_gpu_underused", evidence
    queued = _in_line(row, top, t)
    if queued:
        evidence.update(queued)
        return "contention", "lock", _IN_LINE_RULES[next(iter(queued))], evidence
    if top in ("network", "disk", "sleep"):
        return "io", top, f"wait_{top}", evidence
    if top == "subprocess":
        return "io", "subprocess", "wait_subprocess", evidence
    if top == "lock":
        return "contention", "lock", "wait_lock", evidence
    if top == "gil":
        return "contention", "gil", "wait_gil", evidence
    # On-CPU. With a GPU in use, a tensor-op stage that leaves it idle is launch-bound.
    if (
        facts.has_gpu
        and pd.notna(gpu_util)
        and gpu_util < t.launch_gpu_util
        and float(row["tensor_share"]) >= t.launch_tensor_share
    ):
        return "gpu", "launch_bound", "tensor_ops_gpu_underused", evidence
    if contends and _held_back_by_the_gil(row, comp, facts, t):
        return "cpu", "gil", "cpu_with_gil_waits", evidence
    native = float(row["native_share"]) >= t.native_majority
    return (
        ("cpu", "native", "cpu_native", evidence)
        if native
        else (
            "cpu",
            "python",
            "cpu_python",
            evidence,
        )
    )


_IN_LINE_RULES = {"waiting_threads": "serialised_by_lock", "in_line_per_call": "queued_for_a_limit"}


def _in_line(row: pd.Series, top: str, t: Thresholds) -> dict[str, Any]:
    """The stage's evidence of running only so many at a time, the rest in line: threads
    queued on a mutex in it while it ran (``analyzers.path``), or tasks or threads in
    line in it for a pool's or a semaphore's permits while those holding them were in
    their I/O calls (``tasks.queued_for_a_limit``, ``breakdown.threads_in_line``) -- its
    waits are then a line, not the call alone. The latter only where those waits lead the
    stage's time: where its CPU does (a semaphore admitting 16 of 480 queries to an event
    loop busy ranking them, rank_async), the permits are not what holds the rest back.
    {} for neither."""
    threads = float(row.get("queued", 0.0) or 0.0)
    if threads >= t.serialised_waiters:
        return {"waiting_threads": round(threads, 2)}
    in_line = float(row.get("in_line", 0.0) or 0.0)
    if top in ("network", "disk", "subprocess", "lock") and in_line >= t.serialised_waiters:
        return {
            "in_line_per_call": round(in_line, 2),
            "in_the_call": round(float(row["in_the_call"]), 2),
            "queued_in": str(row["queued_in"]),
        }
    return {}


def _leading_part(comp: dict[str, float], contends: bool) -> str:
    """``cpu`` or the wait reason that leads the stage's time. On-CPU time competes as one
    part against each wait: which of python and native it is says how to speed it up,
    not whether it limits the stage (a stage 55% on a CPU, 30 of it Python and 25
    native, and 45% on the network had read as network I/O). The GIL's waits only where
    the stage contends for it (``_stage_kind``)."""
    ranked = {"cpu": comp["python"] + comp["native"]}
    ranked.update({k: v for k, v in comp.items() if k in WAITS and (contends or k != "gil")})
    return max(ranked, key=lambda k: ranked[k]) if any(ranked.values()) else "cpu"


def _held_back_by_the_gil(
    row: pd.Series, comp: dict[str, float], facts: RunFacts, t: Thresholds
) -> bool:
    """A runnable thread that does not run waits for the GIL or for a core. Only where
    the GIL holds it back at least as long as the cores do is the GIL the limit: threads
    in native code on saturated cores (search_flask: 8 request threads in SQLite's C scan
    on 2 cores, runnable 69% of their time, the GIL 10%) gain no core from processes.
    With a core idle on average the runnable waits cannot be for a core: a thread woken
    for the GIL is runnable until it takes it (the kernel reads it R, not in a futex)."""
    idle = min(
        facts.cpu_count - max(facts.host_cores_busy, facts.process_cores),
        allowed_cores(facts) - facts.process_cores,  # a quota throttles beside idle cores
    )
    for_a_core = 0.0 if idle >= t.idle_cores else float(row["wait_unknown"])
    return (
        comp["gil"] >= t.gil_share and comp["gil"] >= for_a_core and int(row.get("threads", 1)) > 1
    )


def gil_bound_findings(findings: list[Finding], t: Thresholds = THRESHOLDS) -> list[Finding]:
    """The findings whose stages the GIL holds back (``cpu/gil``, ``contention/gil``),
    start-up's imports apart, where the first finding's threads wait for the GIL more
    than they run (``contention/gil``: requests queue at it) and together they hold
    ``bottleneck_share`` of the path: then they are what limits the process, where no
    one of them need lead it -- its threads wait for the
    one GIL whichever stage they are in (embed_api, tests/threads_corpus: 8 pool threads
    hashing words in Python and waiting for the GIL in ``embed`` 49%, ``word_ids`` 18%,
    the server's library code 21%; ``--workers 2`` answered 1.66x the requests). Not
    where the first runs more than it waits (``cpu/gil``): shop_api and shop_django
    (tests/serving_corpus) read so, half their requests asleep 10 ms, at 61-66% together;
    two instances answered shop_django 1.10-1.16x and shop_api 1.30-1.40x with 4 clients,
    1.32-1.45x with 16, not the 1.8x the free cores give (capacity.truth.md). [] where
    they do not hold ``bottleneck_share`` of the path together, or the first is no
    ``contention/gil``."""
    if not findings or (findings[0].kind, findings[0].subkind) != ("contention", "gil"):
        return []
    held = [f for f in findings if f.subkind == "gil" and f.stage != IMPORTS]
    return held if sum(f.share for f in held) >= t.bottleneck_share else []


def interpreter_bound_findings(
    findings: list[Finding], t: Thresholds = THRESHOLDS
) -> list[Finding]:
    """The findings, start-up's imports apart, where every one of them is the
    interpreter's own work -- on a CPU (``cpu/*``) or waiting for the GIL
    (``contention/gil``) -- and together they hold ``bottleneck_share`` of the path: no
    stage then holds a finding's share of it waiting on anything another process would
    not also wait on (a sleep, the network, a disk, a lock, a subprocess, a GPU), so the
    process is held to its one interpreter whichever stage leads. Read for a served
    process (another instance takes its requests), beside ``gil_bound_findings``: where
    the first runs more than it waits for the GIL (``cpu/gil``) no queue at it says so.
    predict_api (tests/threads_corpus): ``score_tokens`` (cpu/gil) 0.50-0.59 of the
    path in 32 runs, uvicorn's loop (cpu/native) 0.35-0.37, ``normalise`` 0.06, nothing
    else; two instances answered 1.47-1.64x. Under a switch-interval variant (not kept,
    2026-12-06) it fell under half in 2 runs of 16, and the instances went unsaid.
    shop_api and shop_django do not read so: their 10-ms sleep on half the requests is
    a finding (``io/sleep``, 0.09-0.40), a delay no instance shortens, and two instances
    answered 1.10-1.40x with 4 clients, not the 1.8x the free cores give
    (capacity.truth.md). [] otherwise."""
    own = [f for f in findings if f.stage != IMPORTS]
    # the collector leading is read by its own rules (its pauses, ``gc_freeze``)
    if not own or findings[0].stage == IMPORTS or findings[0].rule == "collector_pauses":
        return []
    if not all(f.kind == "cpu" or f.subkind == "gil" for f in own):
        return []
    return own if sum(f.share for f in own) >= t.bottleneck_share else []


def read_together(
    findings: list[Finding], served: bool, t: Thresholds = THRESHOLDS
) -> tuple[list[Finding], str]:
    """The findings the verdict reads together, no one of them at half the path, and
    which reading: ``"gil"`` (``gil_bound_findings``, any process), ``"interpreter"``
    (``interpreter_bound_findings``, a served one's); ``([], "")`` for neither. The
    verdict, its doubts and ``multi_instance`` all ask this one function."""
    held = gil_bound_findings(findings, t)
    if held:
        return held, "gil"
    held = interpreter_bound_findings(findings, t) if served else []
    return held, "interpreter" if held else ""


def _read_together(
    findings: list[Finding], rest: list[Finding], served: bool, t: Thresholds
) -> tuple[Finding, list[Finding]]:
    """The primary finding as its doubts are to judge it, and the findings that may rival
    it. Where the verdict reads stages together (``gil_bound_findings``; a served
    process's ``interpreter_bound_findings``) because no one of them holds half the path,
    it is judged at the share they hold together (its confidence's weight, a rival's
    lead over it), and the stages read with it are no rivals: the verdict does not say
    which of them leads. triage_api (tests/threads_corpus), three stages of 20-29% and the
    server's code on the loop's one thread, /proc's R 98%: its right verdict read
    "Confidence 6%: `bag_of_hashes` takes nearly as much"."""
    primary = findings[0]
    held, _ = read_together(findings, served, t)
    if not held or primary.share >= t.bottleneck_share:
        return primary, rest
    together = sum(f.share for f in held)
    weight = _share_weight(primary.share, t)
    if weight > 0:  # _confidence is 0.2 + 0.8 x weight x the rest
        scale = _share_weight(together, t) / weight
        primary = replace(primary, confidence=round(0.2 + (primary.confidence - 0.2) * scale, 3))
    rivals = [f for f in rest if all(f is not h for h in held)]
    return replace(primary, share=together), rivals


def _share_weight(share: float, t: Thresholds) -> float:
    """How much a share of the path weighs in a verdict's confidence: in full from
    ``bottleneck_share``."""
    return min(1.0, share / t.bottleneck_share)


def _confidence(share: float, component: float, samples_s: float, t: Thresholds) -> float:
    """How sure: the stage's share of the path, how clearly one component leads it, and
    whether enough samples back the split (1 s of samples = 100 at the default rate)."""
    weight = _share_weight(share, t)
    clarity = min(1.0, component / 0.6)
    support = min(1.0, samples_s / 1.0)
    return round(0.2 + 0.8 * weight * clarity * (0.5 + 0.5 * support), 3)


def classify(bd: Breakdown, facts: RunFacts, t: Thresholds = THRESHOLDS) -> list[Finding]:
    """Findings, most important first (the first is the primary limit)."""
    findings: list[Finding] = []
    rows = stage_rows(bd)
    held = interpreter_held(rows)
    for name, row in rows.iterrows():
        share = float(row["path_share"])
        if share < t.finding_share and findings:
            continue
        holds = float(held.get(name, 1.0))
        kind, subkind, rule, evidence = _stage_kind(row, facts, t, holds=holds)
        comp = _components(row)
        # the component that named the kind (GPU subkinds: the waits on the GPU; on-CPU
        # kinds: the CPU, whichever of python and native holds more of it)
        if rule in ("serialised_by_lock", "queued_for_a_limit"):
            component = max(comp.values())
        elif rule in ("cpu_native", "cpu_python"):
            component = comp["python"] + comp["native"]
        else:
            component = comp.get(subkind, comp["gpu_sync"])
        evidence.update(
            {
                "path_share": round(share, 4),
                "wall_share": round(float(row["wall_share"]), 4),
                "self_s": round(float(row["self_s"]), 4),
                "sampled_s": round(float(row["sampled_s"]), 3),
                "top_call": str(row["top_call"]),
                "top_line": str(row["top_line"]),
                "top_packages": str(row.get("top_packages", "")),
            }
        )
        findings.append(
            Finding(
                kind=kind,
                subkind=subkind,
                stage=str(name),
                share=share,
                confidence=_confidence(share, component, float(row["sampled_s"]), t),
                rule=rule,
                evidence=evidence,
            )
        )
    findings.extend(_run_level(bd, facts, t))
    paused = _collector_pauses(rows, facts, t)
    if paused is None:
        findings.sort(key=lambda f: -f.share)
    else:
        findings = _with_the_collector(findings, paused, facts)
    if findings and findings[0] is paused:
        n = _samples_behind(findings, facts)
        findings[0] = _collector_doubts(paused, findings[1:], n, facts, t)
    elif findings:
        rest = [f for f in findings[1:] if f is not paused]
        judged, rest = _read_together(findings, rest, bool(bd.requests.count), t)
        findings[0] = replace(with_doubts(judged, rest, facts, t), share=findings[0].share)
        findings[0] = _decided_by_other_load(findings[0], rows, facts, t)
        if paused is not None:
            n = _samples_behind(findings, facts)
            findings[0] = _rivalled_by_the_collector(findings[0], paused, n, facts, t)
    return findings


def _collector_pauses(rows: pd.DataFrame, facts: RunFacts, t: Thresholds) -> Finding | None:
    """cpu/gc: the garbage collector's collections held ``finding_share`` of the run or
    more. Its stage is the one whose allocations set off most of the full collections'
    time (else the path's leading stage). Its share is measured, not sampled: the
    collector's own callbacks time every collection (``probe.samplers.gc_pauses``)."""
    collector = facts.collector
    if collector is None or rows.empty or collector.share < t.finding_share:
        return None
    set_off = [s for s in collector.full_by_stage if s in rows.index]
    stage = set_off[0] if set_off else str(rows.index[0])
    return Finding(
        kind="cpu",
        subkind="gc",
        stage=stage,
        share=collector.share,
        confidence=_confidence(collector.share, 1.0, math.inf, t),
        rule="collector_pauses",
        evidence={**collector.to_dict(), "path_share": round(collector.share, 4)},
    )


def _own_share(f: Finding, collector: CollectorTime) -> float:
    """A stage finding's share less the full collections inside its samples, in the
    stage's own terms (of the path it has ``path_share`` of: ``sampled_s`` over it): that
    time is the collector's finding's, where it competes for the lead."""
    inside = collector.full_in_stage.get(f.stage, 0.0)
    sampled = float(f.evidence.get("sampled_s") or 0.0)
    if inside <= 0 or sampled <= 0 or f.share <= 0:
        return f.share
    return f.share * max(0.0, 1.0 - inside / sampled)


def _with_the_collector(findings: list[Finding], paused: Finding, facts: RunFacts) -> list[Finding]:
    """The findings and the collector's, most important first: each stage by its time
    less the collections inside it (``_own_share``), the collector by all of its own."""
    collector = facts.collector
    assert collector is not None
    ordered = sorted(findings, key=lambda f: -_own_share(f, collector))
    at = next((i for i, f in enumerate(ordered) if _own_share(f, collector) < paused.share), None)
    at = len(ordered) if at is None else at
    return [*ordered[:at], paused, *ordered[at:]]


def _rivalled_by_the_collector(
    primary: Finding, paused: Finding, n: float, facts: RunFacts, t: Thresholds
) -> Finding:
    """A stage's finding as the primary, its confidence lowered where the collector's
    comes close to the stage's own time (``_own_share``): the two are different fixes,
    and which buys more is then open (``clear_lead``, as for a runner-up stage, and like
    it at the lead's lower bound: the stage's time is sampled, the collector's timed)."""
    collector = facts.collector
    own = _own_share(primary, collector) if collector is not None else 0.0
    if own <= 0:
        return primary
    lead, sampling = _lead_over_timed(own, paused.share, n, t)
    if lead >= t.clear_lead:
        return primary
    doubt = (
        f"the garbage collector's collections take {paused.share / own:.0%} as much as "
        f"`{primary.stage}` does besides them ({paused.share:.0%} against {own:.0%}): "
        "either is worth fixing first"
    )
    evidence = {
        **primary.evidence,
        "collector_rival": True,
        "doubts": [*primary.evidence.get("doubts", []), doubt, *sampling],
    }
    factor = max(lead / t.clear_lead, 0.1)
    return replace(primary, confidence=round(primary.confidence * factor, 3), evidence=evidence)


def _lead_over_timed(
    sampled: float, timed: float, n: float, t: Thresholds
) -> tuple[float, list[str]]:
    """The lead of the larger of a sampled share (a stage's own time) and a timed one
    (the collector's) at its 99% lower bound, as a share of the larger, and the doubt
    where the sampling error covers it. Only the sampled side varies: its standard error
    is at most sqrt(p / n) at n samples. suggest_api's `complete` read 39% of its own
    against the collector's 28% from ~600 samples: a lead of 28% of its time at face
    value, 12% at the bound."""
    spread = math.sqrt(sampled / n) if n > 0 else 0.0
    return _lead_at_bound(max(sampled, timed), min(sampled, timed), spread, n, t)


def _collector_doubts(
    paused: Finding, rest: list[Finding], n: float, facts: RunFacts, t: Thresholds
) -> Finding:
    """The collector's finding as the primary, its confidence lowered where the next
    stage's own time (``_own_share``) comes close: which to fix first is then open, the
    lead read at its lower bound (``_lead_over_timed``: the stage's time is sampled).
    Not the samples' other doubts: the collections are timed, not sampled."""
    collector = facts.collector
    if not rest or collector is None:
        return paused
    own = max(0.0, _own_share(rest[0], collector))
    lead, sampling = _lead_over_timed(own, paused.share, n, t)
    if lead >= t.clear_lead:
        return paused
    doubt = (
        f"`{rest[0].stage}` takes {own / paused.share:.0%} as much besides the collections "
        f"in its time ({own:.0%} against {paused.share:.0%}): either is worth fixing first"
    )
    evidence = {**paused.evidence, "runner_up": rest[0].stage, "doubts": [doubt, *sampling]}
    if sampling:
        evidence["within_sampling_error"] = True
    factor = max(lead / t.clear_lead, 0.1)
    return replace(paused, confidence=round(paused.confidence * factor, 3), evidence=evidence)


def _decided_by_other_load(
    primary: Finding, rows: pd.DataFrame, facts: RunFacts, t: Thresholds
) -> Finding:
    """The primary finding with its confidence lowered (``host_hinge``) where other
    processes held the cores and its stage, read without its waits for them (its
    ``wait_unknown``, the rest in proportion), reads another kind: which of the two the
    service is depends on the host's other load, not on the service."""
    if facts.others_queued <= 0 or primary.stage not in rows.index:
        return primary
    row = rows.loc[primary.stage]
    unknown = float(row["wait_unknown"])
    if not 0.0 < unknown < 1.0:
        return primary
    shares = ["cpu_share", *(f"wait_{r}" for r in WAITS)]
    alone = row.copy()
    alone[shares] = row[shares].astype("float64") / (1.0 - unknown)
    alone["wait_unknown"] = 0.0
    idle_host = replace(facts, host_cores_busy=facts.process_cores)
    holds = float(interpreter_held(rows).get(primary.stage, 1.0))
    kind, subkind, _, _ = _stage_kind(alone, idle_host, t, holds=holds)
    if (kind, subkind) == (primary.kind, primary.subkind):
        return _threads_on_one_core(primary, row, facts, t)
    others = facts.host_cores_busy - facts.process_cores
    doubt = (
        f"other processes held {others:.1f} of the host's {facts.cpu_count} cores and its "
        f"threads waited for a CPU {facts.others_queued:.0%} of their ready time: without "
        f"those waits `{primary.stage}` reads {kind_words(kind)}, {subkind_words(subkind)}"
    )
    doubts = [*primary.evidence.get("doubts", []), doubt]
    evidence = {**primary.evidence, "doubts": doubts, "without_other_load": f"{kind}/{subkind}"}
    return replace(
        primary, confidence=round(primary.confidence * t.host_hinge, 3), evidence=evidence
    )


def _threads_on_one_core(
    primary: Finding, row: pd.Series, facts: RunFacts, t: Thresholds
) -> Finding:
    """A CPU verdict on a stage of several threads, where other processes left the
    service fewer than two cores, held at ``host_hinge``: threads held to one core by
    the GIL and threads held to one core by the cores read alike there -- telling them
    apart takes a second core for them to use or leave idle. tokenize_pool beside one
    busy loop on 2 cores, in a clean-clone CI run: its 4 threads 73% of their ready time
    on a run queue and 1.7% waiting for the GIL, cpu/python at 1.0 ("vectorise, 5x"),
    where on an idle host it reads contention/gil and a process pool buys 1.2-1.6x."""
    others = facts.host_cores_busy - facts.process_cores
    left = facts.cpu_count - others
    threads = int(row["threads"]) if pd.notna(row.get("threads")) else 1
    if primary.kind != "cpu" or threads < 2 or left >= 2.0:
        return primary
    doubt = (
        f"other processes held {others:.1f} of the host's {facts.cpu_count} cores, "
        f"leaving the {threads} threads of `{primary.stage}` fewer than two: threads held "
        "to one core by the cores and threads waiting for the GIL read alike there"
    )
    doubts = [*primary.evidence.get("doubts", []), doubt]
    evidence = {**primary.evidence, "doubts": doubts, "without_other_load": "undetermined"}
    return replace(
        primary, confidence=round(primary.confidence * t.host_hinge, 3), evidence=evidence
    )


def with_doubts(
    primary: Finding, rest: list[Finding], facts: RunFacts, t: Thresholds = THRESHOLDS
) -> Finding:
    """The primary finding's confidence lowered by what contradicts it or leaves it open,
    each reason written out (``evidence["doubts"]``) for the verdict to say."""
    doubts: list[str] = []
    factor = 1.0
    extra: dict[str, Any] = {}
    runner = next((f for f in rest if f.kind != "gpu" or f.subkind != "gpu_starved"), None)
    if runner is not None and primary.share > 0:
        factor, doubts = _runner_up_doubts(
            primary, runner, _samples_behind([primary, *rest], facts), t
        )
        if doubts:
            extra["runner_up"] = runner.stage
    mixed_factor, mixed_with, mixed = _mixed_stage_doubt(primary, t)
    if mixed:
        factor *= mixed_factor
        doubts.append(mixed)
        extra["mixed_with"] = mixed_with
    if primary.kind == "cpu" and facts.process_cores > 0:
        cpu = float(primary.evidence.get("python", 0.0)) + float(
            primary.evidence.get("native", 0.0)
        )
        implied = primary.share * cpu
        if implied > 0 and facts.process_cores < t.cpu_consistency * implied:
            factor *= facts.process_cores / implied
            doubts.append(
                f"the process used {facts.process_cores:.2f} of {allowed_cores(facts):g} cores, "
                f"less than a CPU-bound {primary.share:.0%} implies"
            )
    if facts.kernel_unavailable and (primary.kind, primary.subkind) == ("cpu", "native"):
        factor *= t.no_kernel_witness
        doubts.append(
            f"threads' kernel states could not be read ({facts.kernel_unavailable}): time "
            "in native calls may be waits no rule names (disk, network)"
        )
    taken = _ticks_taken_outside_collections(facts)
    if taken is not None and taken < t.ticks_taken:
        factor *= taken
        extra["ticks_taken"] = round(taken, 3)
        doubts.append(
            f"the stack sampler took {taken:.0%} of the ticks it was due (the "
            "GIL was not free when they came): its samples stand for more time each"
        )
    copy_factor, copy_doubt = _rivalled_by_the_copy(primary, facts, t)
    if copy_doubt:
        factor *= copy_factor
        doubts.append(copy_doubt)
    if not doubts:
        return primary
    evidence = {**primary.evidence, **extra, "doubts": doubts}
    return replace(primary, confidence=round(primary.confidence * factor, 3), evidence=evidence)


def _rivalled_by_the_copy(primary: Finding, facts: RunFacts, t: Thresholds) -> tuple[float, str]:
    """(the confidence factor, the doubt) where copying data between processes
    (``facts.copy_cores``: its CPU over the wall, in library threads, on no stage of the
    service's) comes close to the primary stage's share: the pool may be paced by the
    copy instead (``analyzers.transfer``), a different fix, and which buys more is open
    (``clear_lead``, as for a runner-up stage); (1.0, "") otherwise."""
    copying = facts.copy_cores
    if copying < TRANSFER.note_share or primary.share <= 0:
        return 1.0, ""
    lead = (primary.share - copying) / primary.share
    if lead >= t.clear_lead:
        return 1.0, ""
    doubt = (
        f"copying data between processes took {copying:.1f} of a core (see the note), "
        f"{copying / primary.share:.0%} as much as `{primary.stage}`'s {primary.share:.0%}: "
        "the copy may pace the run instead"
    )
    return max(lead / t.clear_lead, 0.1), doubt


def _ticks_taken_outside_collections(facts: RunFacts) -> float | None:
    """The share of its due ticks the sampler took, of those due outside the garbage
    collector's collections: a tick due during one waits for its end, and the time it
    stood for is the collector's, timed apart (``facts.collector``), not a sample
    standing for more than its own. suggest_api's 73% was its 38% in collections."""
    taken = facts.ticks_taken
    collector = facts.collector
    if taken is None or collector is None or collector.share >= 1.0:
        return taken
    return min(1.0, taken / (1.0 - collector.share))


def _runner_up_doubts(
    primary: Finding, runner: Finding, n: float, t: Thresholds
) -> tuple[float, list[str]]:
    """The confidence factor and the doubts a runner-up leaves over ``n`` samples: the
    lead at its 99% lower bound (the share difference less its multinomial standard error
    sqrt((p1 + p2) / n) times z), as a share of the leader's, against ``clear_lead``."""
    spread = math.sqrt((primary.share + runner.share) / n) if n > 0 else 0.0
    lead, sampling = _lead_at_bound(primary.share, runner.share, spread, n, t)
    if lead >= t.clear_lead:
        return 1.0, []
    # said as it is: "nearly as much" of 40% against 45%, not of 35% against 60%
    ratio = runner.share / primary.share
    how = "nearly as much" if ratio >= _NEARLY else f"{ratio:.0%} as much"
    doubts = [f"`{runner.stage}` takes {how} ({runner.share:.0%} against {primary.share:.0%})"]
    return max(lead / t.clear_lead, 0.1), [*doubts, *sampling]


def _lead_at_bound(
    leader: float, runner: float, spread: float, n: float, t: Thresholds
) -> tuple[float, list[str]]:
    """The leader's lead over the runner-up less ``lead_z`` times the difference's
    standard error (``spread``), as a share of the leader's, and the doubt where the
    error covers the lead (at ``n`` samples)."""
    lead = max(leader - runner - t.lead_z * spread, 0.0) / leader if leader > 0 else 0.0
    if leader - runner >= t.lead_z * spread:
        return lead, []
    return lead, [_within_sampling_error(leader - runner, n)]


def _samples_behind(findings: list[Finding], facts: RunFacts) -> float:
    """The stack samples the findings' shares were read from: their sampled seconds at
    the sampler's rate, less the ticks it missed."""
    n = facts.sample_hz * sum(float(f.evidence.get("sampled_s") or 0.0) for f in findings)
    return n * (facts.ticks_taken if facts.ticks_taken is not None else 1.0)


def _within_sampling_error(lead: float, n: float) -> str:
    return f"its lead of {100 * lead:.0f} points is within the sampling error of {n:,.0f} samples"


def _mixed_stage_doubt(primary: Finding, t: Thresholds) -> tuple[float, str, str]:
    """The confidence factor, the rival part and the doubt where another kind of cause
    nearly matches, inside the primary's own stage, the part its kind names: a stage
    58% on a CPU and 39% waiting on the network is neither plainly CPU- nor I/O-bound.
    Its lead is held to ``clear_lead`` as a runner-up stage's is (Amdahl: a rival at half
    the leader's time leaves which to fix first open). The kind is chosen by the largest
    part (``_stage_kind``), so where two are close it flips between runs: Flask
    under gunicorn's sync worker on a do-nothing route read io/network at 74% in one run
    and cpu/native at 82% in the next (README, "Library code"; the worker 0.66 of a core
    by /proc). Only CPU and I/O verdicts: a lock's serialised waiters and a GPU's waits
    are read by rules of their own. The GIL's waits rival nothing here: they are other
    threads' CPU (``_stage_kind`` leaves them out where the stage does not hold the GIL)."""
    if primary.kind not in ("cpu", "io") or primary.rule == "gpu_sync_without_gpu":
        return 1.0, "", ""
    part = {k: float(primary.evidence.get(k, 0.0) or 0.0) for k in ("python", "native", *WAITS)}
    cpu = part["python"] + part["native"]
    waits = {k: v for k, v in part.items() if k in WAITS and k != "gil"}
    if primary.kind == "cpu":
        own, own_words = cpu + (part["gil"] if primary.subkind == "gil" else 0.0), "on a CPU"
        rivals = waits
    else:
        own, own_words = part.get(primary.subkind, 0.0), subkind_words(primary.subkind)
        rivals = {"cpu": cpu, **{k: v for k, v in waits.items() if k != primary.subkind}}
    if own <= 0 or not rivals:
        return 1.0, "", ""
    rival = max(rivals, key=lambda k: rivals[k])
    lead = (own - rivals[rival]) / own
    if lead >= t.clear_lead:
        return 1.0, "", ""
    words = "on a CPU" if rival == "cpu" else subkind_words(rival)
    doubt = (
        f"`{primary.stage}` spends {rivals[rival]:.0%} of its time {words} against "
        f"{own:.0%} {own_words}: either could be what limits it"
    )
    return max(lead / t.clear_lead, 0.1), rival, doubt


# A runner-up at this share of the leader's or more "takes nearly as much": a wording,
# not a rule (the confidence follows clear_lead): within a quarter of the leader's time.
_NEARLY = 0.75


def _run_level(bd: Breakdown, facts: RunFacts, t: Thresholds) -> list[Finding]:
    out: list[Finding] = []
    if facts.has_gpu and facts.starved_time_share > t.starved_time_share:
        rows = stage_rows(bd)
        busiest = rows["cpu_share"].mul(rows["path_share"]).idxmax() if not rows.empty else ""
        out.append(
            Finding(
                kind="gpu",
                subkind="gpu_starved",
                stage=str(busiest),
                share=facts.starved_time_share,
                confidence=0.5 + 0.5 * min(1.0, facts.starved_time_share),
                rule="sagemaker_cpu_bottleneck",
                evidence={
                    "time_share_gpu_under_10_cpu_over_90": round(facts.starved_time_share, 3),
                    "gpu_util_mean": round(facts.gpu_util_mean, 1),
                },
            )
        )
    return out


def cold_start(bd: Breakdown, facts: RunFacts, t: Thresholds = THRESHOLDS) -> dict[str, Any] | None:
    """A stage run only in a first request that took >= ``cold_start_ratio`` x the median."""
    req = bd.requests
    if not facts.first_request_ms or not req.p50_ms or req.count < 3:
        return None
    ratio = facts.first_request_ms / req.p50_ms
    if ratio < t.cold_start_ratio or not facts.first_request_stages:
        return None
    stage, seconds = max(facts.first_request_stages.items(), key=lambda kv: kv[1])
    return {
        "stage": stage,
        "seconds": seconds,
        "cpu_s": facts.first_request_stage_cpu.get(stage),
        "first_request_ms": round(facts.first_request_ms, 1),
        "median_request_ms": round(req.p50_ms, 2),
        "ratio": round(ratio, 1),
    }
