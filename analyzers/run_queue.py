"""How long the process's threads waited for a CPU, against the time they ran.

The kernel counts each thread's time on a run queue (runnable, no core free: the second
field of ``/proc/PID/task/TID/schedstat``); the sampler records it per interval
(``samples.queued_ns``). Where that wait is a large share of the time the threads were
ready to run, every figure of the run -- its wall time, the stages' shares, what a fix
would buy -- is measured on cores it did not have, and the reader should know it: a
service that reads "CPU 0.52 of 2 cores" beside three CPU-bound processes otherwise
looks like one that waits on something of its own. Only where other processes held the
cores: the waits among the process's own threads (GIL-bound threads waking each other)
are the GIL and contention findings' to read.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pandas as pd

from probe.analyzers.constants import constant

__all__ = [
    "RUN_QUEUE",
    "RunQueue",
    "RunQueueWait",
    "others_held_cores",
    "others_queued_share",
    "run_queue_note",
    "run_queue_wait",
    "throttled_share",
    "throttling_note",
]


@dataclass(frozen=True)
class RunQueue:
    note_share: float = constant(
        0.2,
        "of the time the threads were ready to run (on a CPU or waiting for one), the "
        "wait for a CPU from which the run says so. Beside three CPU-bound processes on 2 "
        "cores: render_queue 0.58 (2 runs; its worker alone, by its schedstat read from "
        "outside, 0.49-0.57 in 12 more), score_feed 0.52, tokenize_pool 0.71, ship_logs "
        "0.28-0.53 (2026-11-27, benchmarks/run_queue_share.py --hogs 3)",
    )
    others_cores: float = constant(
        0.5,
        "cores the host kept busy beyond the process's own, from which other processes "
        "took the cores (rules' ``idle_cores``: half a core). Without them the waits are "
        "the process's own threads': on an idle host tokenize_pool's four GIL-bound "
        "threads read 0.44-0.45, ingest_pipeline's five 0.30-0.31 (the corpus's others "
        "0.004-0.064): the GIL and contention findings speak for those",
    )
    throttled_share: float = constant(
        0.25,
        "of the CPU quota's periods the process ran in, the share it was throttled in "
        "from which the run says so: kubernetes-mixin's CPUThrottlingHigh alert "
        "(throttled periods over periods, above 25%), which Grafana's resource-contention "
        "analysis uses too",
    )
    min_queued_s: float = constant(
        0.1,
        "a tenth of a second on the run queue, ten ticks at the default 100 Hz: less is no "
        "figure a reader acts on (ship_logs beside three hogs: 0.03-0.07 s)",
    )


RUN_QUEUE = RunQueue()


@dataclass(frozen=True)
class RunQueueWait:
    queued_s: float  # the threads' time waiting for a CPU, summed
    ran_s: float  # their time on a CPU, summed

    @property
    def share(self) -> float:
        """Of the time the threads were ready to run, the share they waited for a CPU."""
        ready = self.queued_s + self.ran_s
        return self.queued_s / ready if ready > 0 else 0.0


def run_queue_wait(samples: pd.DataFrame) -> RunQueueWait | None:
    """The threads' waits for a CPU and their CPU time over the sampled intervals; None
    where the run has no such readings (older runs, or a kernel without schedstat)."""
    if samples.empty or "queued_ns" not in samples or samples["queued_ns"].isna().all():
        return None
    queued = float(samples["queued_ns"].fillna(0).clip(lower=0).sum()) / 1e9
    ran = float(samples["cpu_ns"].fillna(0).clip(lower=0).sum()) / 1e9
    return RunQueueWait(queued, ran)


def others_held_cores(
    wait: RunQueueWait | None,
    *,
    host_cores_busy: float,
    process_cores: float,
    settings: RunQueue = RUN_QUEUE,
) -> bool:
    """Whether the threads waited for a CPU (``min_queued_s`` at least) while other
    processes kept ``others_cores`` or more of the host's cores busy: a wait that is the
    machine's, whatever its share (``probe check`` takes it out of the requests)."""
    others = host_cores_busy - process_cores
    return (
        wait is not None
        and wait.queued_s >= settings.min_queued_s
        and (others >= settings.others_cores)
    )


def others_queued_share(
    wait: RunQueueWait | None,
    *,
    host_cores_busy: float,
    process_cores: float,
    settings: RunQueue = RUN_QUEUE,
) -> float:
    """The share of the threads' ready time they waited for a CPU, where other processes
    held the cores (``others_cores`` or more beyond the process's own) and that wait is
    one to tell (``note_share`` of the ready time, ``min_queued_s`` at least); 0 where
    not."""
    held = others_held_cores(
        wait, host_cores_busy=host_cores_busy, process_cores=process_cores, settings=settings
    )
    if wait is None or not held or wait.share < settings.note_share:
        return 0.0
    return wait.share


def run_queue_note(
    wait: RunQueueWait | None,
    *,
    cpu_count: int,
    host_cores_busy: float,
    process_cores: float,
    settings: RunQueue = RUN_QUEUE,
) -> list[str]:
    """A note where other processes held the cores and the threads waited
    ``note_share`` or more of their ready time for a CPU (``others_queued_share``)."""
    share = others_queued_share(
        wait, host_cores_busy=host_cores_busy, process_cores=process_cores, settings=settings
    )
    if wait is None or share <= 0:
        return []
    others = host_cores_busy - process_cores
    return [
        f"waited for a CPU: its threads spent {wait.queued_s:.2f} s on the kernel's run "
        f"queue against {wait.ran_s:.2f} s on a CPU ({share:.0%} of their ready "
        f"time): other processes kept {others:.1f} of the host's {cpu_count} cores busy. "
        "The wall time and the shares above include that wait: measure where cores are "
        "free, or give the service its own (taskset, a CPU quota)"
    ]


def throttled_share(throttling: dict[str, Any] | None) -> float:
    """Of the quota periods the process's cgroup ran in, the share the kernel throttled
    it in (meta.json's ``cpu_throttling``); 0 without the counters."""
    if not throttling or not throttling.get("periods"):
        return 0.0
    return float(throttling["throttled_periods"]) / float(throttling["periods"])


def throttling_note(
    throttling: dict[str, Any] | None,
    *,
    quota_cores: float | None,
    process_cores: float,
    cpu_count: int,
    settings: RunQueue = RUN_QUEUE,
) -> list[str]:
    """A note where the cgroup's CPU quota (``quota_cores``: a container's CPU limit)
    throttled the process in ``throttled_share`` or more of its periods: the kernel stopped
    its threads until the next period, whatever cores were idle."""
    share = throttled_share(throttling)
    if throttling is None or share < settings.throttled_share:
        return []
    quota = f"{quota_cores:g} cores" if quota_cores else "quota"
    return [
        f"throttled by its CPU quota: in {share:.0%} of the {int(throttling['periods'])} "
        f"quota periods it ran in, its cgroup used up its {quota} and waited for the next "
        f"({float(throttling['throttled_s']):.2f} s of waits over its CPUs); it used "
        f"{process_cores:.2f} cores on average. The wall time and the shares above include "
        f"those waits. Thread pools sized to the host's {cpu_count} cores (OMP_NUM_THREADS, "
        "torch.set_num_threads, a server's workers) use a quota up early in each period: "
        "size them to the quota, or raise the limit"
    ]
