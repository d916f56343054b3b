"""torch's intra-op threads beside several threads that call torch at once.

Each thread that runs a torch op on CPU gets a team of intra-op threads of its own
(``torch.get_num_threads()``, one per core by default; OpenMP makes a team per calling
thread). A service that runs its model on several threads at once -- a thread pool, a
server's request threads -- then runs callers x intra-op threads on its cores. Where the
callers alone keep every core busy, the intra-op threads find no idle core to add: they
cost their synchronisation, and each op's end waits for a team-mate queued behind the
other threads. ``torch.set_num_threads(1)`` takes them out; PyTorch's own notes on CPU
threading give the rule (intra-op threads x inter-op threads within the cores).

``intra_op_oversubscription(samples, threads, os_threads, pid, own_tids, cores)`` reads,
from the run's tables alone:

* the threads calling torch at once: per stack-sampler tick, the service's threads caught
  in torch's code (numeric-library leaves whose file is torch's, start-up's imports left
  out), averaged over the ticks that caught one;
* torch's native threads: the process's threads from /proc (``os_threads``) that are
  neither Python's (``threads``) nor probe's own (meta.json ``collector.own_tids``), and
  the CPU they used.

What the change buys is not estimated: the synchronisation's cost depends on the ops'
sizes, and one run at one setting does not show it. Measured on ``classify_threads``
(the threads corpus: 8 pool threads, torch's default of 2 intra-op threads, 2 cores):
``torch.set_num_threads(1)`` 1.17x on the whole run, the process's CPU 6.0 s against
4.9 s for the same work.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import pandas as pd

from probe.analyzers.rules import THRESHOLDS
from probe.analyzers.stacks import IMPORTS

__all__ = ["IntraOp", "intra_op_note", "intra_op_oversubscription", "native_threads"]


@dataclass(frozen=True)
class IntraOp:
    callers: float  # mean threads in torch's code at once, over the ticks that caught one
    caller_threads: int  # distinct threads that did
    native_threads: int  # the process's threads neither Python's nor probe's, with CPU
    native_cpu_share: float  # of the process's CPU, theirs
    cores: float

    @property
    def team(self) -> int:
        """Threads a call runs on: the caller and its share of the native threads."""
        return 1 + round(self.native_threads / max(1, self.caller_threads))


def _callers(samples: pd.DataFrame) -> tuple[float, int, float]:
    """(mean threads in torch's code at once over the ticks that caught one, distinct
    such threads, their share of the sampled thread-time)."""
    if samples.empty:
        return 0.0, 0, 0.0
    # inside one of torch's native ops and not queued for the GIL to leave it: running,
    # queued for a core, or waiting at the op's end for its intra-op threads
    in_torch = (
        samples["tensor"].astype(bool)
        & samples["native"].astype(bool)
        & samples["filename"].astype(str).str.contains("/torch/", regex=False)
        & (samples["user_function"] != IMPORTS)
        & (samples["reason"] != "gil")
    )
    calling = samples[in_torch]
    if calling.empty:
        return 0.0, 0, 0.0
    # a tick's rows: the run-queue waits split off them carry instants of their own
    made = calling["woken"] | calling["on_run_queue"]
    per_tick = calling[~made].groupby("ts_ns")["thread_id"].nunique()
    time = samples["cpu_ns"] + samples["wait_ns"]
    share = float(time[in_torch].sum() / time.sum()) if time.sum() > 0 else 0.0
    return float(per_tick.mean()), int(calling["thread_id"].nunique()), share


def native_threads(
    os_threads: pd.DataFrame | None, pid: int, python: set[int], own: set[int]
) -> tuple[int, float]:
    """(threads of the process neither Python's nor probe's that used CPU, their share
    of the process's CPU less probe's), from each thread's last cumulative reading."""
    if os_threads is None or os_threads.empty:
        return 0, 0.0
    mine = os_threads[os_threads["pid"] == pid]
    last = mine.groupby("tid")[["cpu_user_s", "cpu_system_s"]].last().sum(axis=1)
    last = last[~last.index.isin(own)]  # the service's CPU, not probe's
    total = float(last.sum())
    native = last[~last.index.isin(python)]
    # a clock tick of CPU (10 ms, /proc's unit): a thread that never ran is none of them
    used = native[native >= 0.01]
    return len(used), (float(used.sum()) / total if total > 0 else 0.0)


def intra_op_oversubscription(
    samples: pd.DataFrame,
    threads: pd.DataFrame | None,
    os_threads: pd.DataFrame | None,
    pid: int,
    own_tids: Iterable[int] | None,
    cores: float,
) -> IntraOp | None:
    """The oversubscription where it is there: several threads calling torch at once that
    alone fill the cores (within the half core ``rules`` counts as idle), holding a
    finding's share of the sampled time, beside native threads that used a finding's share
    of the process's CPU. None otherwise, and where the run does not say which threads are
    probe's (a run before 2026-12-05): its own threads would read as torch's."""
    if own_tids is None or threads is None or threads.empty:
        return None
    callers, caller_threads, share = _callers(samples)
    if caller_threads < 2 or share < THRESHOLDS.finding_share:
        return None
    if callers < cores - THRESHOLDS.idle_cores:
        return None
    python = {int(t) for t in threads["thread_id"]}
    native, native_share = native_threads(os_threads, pid, python, set(own_tids))
    if native_share < THRESHOLDS.finding_share:
        return None
    return IntraOp(callers, caller_threads, native, native_share, cores)


def intra_op_note(found: IntraOp | None) -> list[str]:
    if found is None:
        return []
    return [
        f"torch's intra-op threads oversubscribe the cores: {found.caller_threads} threads "
        f"ran torch ops ({found.callers:.1f} at once on average), each with intra-op threads "
        f"of its own ({found.native_threads} native threads beside them used "
        f"{found.native_cpu_share:.0%} of the process's CPU): about "
        f"{found.callers * found.team:.0f} threads at work for {found.cores:g} cores. The calling "
        "threads alone fill the cores, so intra-op threads add no parallelism here, only "
        "their synchronisation: call torch.set_num_threads(1) at start-up, before the first "
        "op (in general, intra-op threads x threads calling at once within the cores). Not "
        "estimated from one run: `probe diff` against a run with it measures it"
    ]
