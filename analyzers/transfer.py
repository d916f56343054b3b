"""Data moved between processes by copy: a process pool's tasks and results.

``multiprocessing`` (``Pool``, ``ProcessPoolExecutor``, ``Queue``) hands each task's
arguments to a worker process by pickling them and writing the bytes into a pipe, which
the worker reads and unpickles; results come back the same way. For small arguments that
costs microseconds. For large ones -- a decoded image or video frame, a batch of
tensors -- it is the job: one thread of the parent (a ``Queue``'s feeder, a ``Pool``'s
task handler) pickles and writes every task in turn, blocked whenever the pipe is full
until a worker reads, and the workers wait for their next task while it does.

Undecorated, such a run read "No dominant bottleneck" at 7% confidence: the time is in
library threads, split between the thread that sends and the main thread waiting for
results (``tests/threads_corpus/services/frame_stats.py``: 24-MB frames to a pool of two,
its feeder thread on a CPU 59% of the run and blocked writing 35%, measured from /proc;
threads instead of processes, nothing copied, served the same frames 20x faster). So the
run's samples in multiprocessing's send and receive paths (``roles.process_transfer``)
are summed by thread: their CPU is the copy (a send blocked on a full pipe may be a
worker busy with its task, not a copy: a pool of small CPU-bound tasks blocks so). Where
the copy's CPU came to ``note_share`` of the run's wall or more, a note says so with what
to do instead; where it comes close to the verdict's stage, the verdict's confidence falls
(``rules.with_doubts``: the copy rivals it, as a runner-up stage would). No speedup is
estimated: what the copy's removal buys depends on what the workers then do with the
cores, which this run cannot show.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from probe.analyzers.constants import constant
from probe.rundir.schema import BLOCKING_REASONS

__all__ = ["TRANSFER", "Transfer", "copy_cores", "transfer_notes", "transfer_table"]


@dataclass(frozen=True)
class Transfer:
    note_share: float = constant(
        0.05,
        "CPU spent copying data between processes, over the run's wall: a note at the "
        "bar a stage's share of the path needs to be a finding (rules' finding_share, "
        "5%), the copy being time of the same kind outside every stage. frame_stats.py's "
        "runs read 0.50-0.76 (a CI run's 0.495 fell under the former bar of half a core, "
        "a count of cores that means less the more a host has); pool_score.py's, a pool "
        "of small tasks, 0.01-0.02 (2026-12-05)",
    )


TRANSFER = Transfer()


def transfer_table(samples: pd.DataFrame) -> pd.DataFrame:
    """Per thread that moved data between processes: seconds of CPU sending (pickling,
    writing), seconds blocked sending (a full pipe: the write waits for its reader,
    which may be busy with its work: not counted as moving data), seconds of CPU
    receiving (reading, unpickling; a blocked read waits for the next message).
    ``samples``: attributed samples with ``label_stacks``' ``transfer`` column."""
    columns = ["send_cpu_s", "send_blocked_s", "receive_cpu_s"]
    if samples.empty or "transfer" not in samples or not (samples["transfer"] != "").any():
        return pd.DataFrame(columns=columns)
    side, by = samples["transfer"], samples["thread_id"]
    cpu, wait = samples["cpu_ns"] / 1e9, samples["wait_ns"] / 1e9
    blocked = (side == "send") & samples["reason"].isin(BLOCKING_REASONS)
    table = pd.DataFrame(
        {
            "send_cpu_s": cpu.where(side == "send", 0.0).groupby(by).sum(),
            "send_blocked_s": wait.where(blocked, 0.0).groupby(by).sum(),
            "receive_cpu_s": cpu.where(side == "receive", 0.0).groupby(by).sum(),
        }
    )
    return table[table.sum(axis=1) > 0]


def copy_cores(table: pd.DataFrame, wall_s: float) -> float:
    """The CPU ``transfer_table``'s threads spent copying, in cores over the run."""
    if table.empty or wall_s <= 0:
        return 0.0
    return float(table["send_cpu_s"].sum() + table["receive_cpu_s"].sum()) / wall_s


def transfer_notes(table: pd.DataFrame, wall_s: float, settings: Transfer = TRANSFER) -> list[str]:
    """A line when copying data between processes (``transfer_table``) took CPU of
    ``note_share`` of the run's wall or more, as the verdict and the report say it."""
    if copy_cores(table, wall_s) < settings.note_share:
        return []
    sent, read = float(table["send_cpu_s"].sum()), float(table["receive_cpu_s"].sum())
    blocked = float(table["send_blocked_s"].max())
    waited = f", and blocked on full pipes {blocked:.1f} s more" if blocked >= 0.05 else ""
    return [
        f"moving data between processes by copy took {sent + read:.1f} s of CPU in a "
        f"{wall_s:.1f}-s run ({(sent + read) / wall_s:.1f} of a core): multiprocessing "
        f"pickling and writing into pipes {sent:.1f} s{waited}; reading and unpickling "
        f"{read:.1f} s. Pass large arrays by reference instead (multiprocessing."
        "shared_memory, a memory-mapped file, or a path the worker reads), or run the "
        "work on threads where it releases the GIL (numpy, most I/O)"
    ]
