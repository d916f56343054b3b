"""Merging the shards of a run's worker processes into its tables (``probe.workers``).

Each worker process recorded ``RUN_DIR/workers/<pid>/``, a run directory of its own.
Loading the run merges what describes threads and their work -- spans, threads, stack
samples and their stacks and frames, asyncio tasks and loops, the collector's pauses (each
row with its process's pid) -- so that every analysis sees the service's requests and
threads whichever process served them:

* thread ids are the kernel's TIDs, unique across the host's live processes: they stay;
  ``threads.pid`` says whose each is;
* span ids were numbered from ``pid << 32`` in each worker (``probe.spans.reset_ids``):
  they stay, and so do the request ids made from them;
* stack ids are each process's own: a shard's are moved past every id before it; frames
  are one table, a function recorded by several processes is one frame.

Per-process tables stay in the shard and are not merged: the heap and tracemalloc series
(a sum over processes would read as one process's growth and shrinkage), the torch
windows' traces apart (read with their shard, named by its folder). The process tree's
resources were sampled once, for all of them, by the root's sidecar.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

__all__ = ["MERGED", "Shard", "merge", "shard_dirs", "worker_summary"]

# The tables merged into the run's; the others stay per process.
MERGED = (
    "spans", "threads", "samples", "stacks", "frames", "task_samples", "loop_samples",
    "gc_pauses", "awaited_sockets",
)  # fmt: skip
# The merged tables that say which process each row is of (``pid``, not written by the
# process itself: filled in here)
_OF_A_PROCESS = ("threads", "gc_pauses")

# A shard's stack ids are moved by (its rank + 1) << this: past any process's own count
# (the stack sampler interns at most a few hundred thousand, probe.samplers.stacks).
_STACK_ID_SHIFT = 40


@dataclass(frozen=True)
class Shard:
    """One worker's shard, loaded: its meta.json, its tables, what loading it noted."""

    path: Path
    meta: dict[str, Any]
    tables: dict[str, pd.DataFrame]
    notes: list[str] = field(default_factory=list)

    @property
    def pid(self) -> int:
        return int(self.meta.get("pid") or 0)

    @property
    def closed(self) -> bool:
        """False for a worker that ended without closing its shard (killed, os._exit)."""
        return "end" in self.meta

    @property
    def recorded(self) -> bool:
        return any(not self.tables[t].empty for t in ("samples", "spans") if t in self.tables)


def shard_dirs(root: Path) -> list[Path]:
    """The shard folders of a run, oldest worker first (by the start in their meta)."""
    from probe.workers import SHARDS

    folder = root / SHARDS
    if not folder.is_dir():
        return []
    return sorted(
        (p for p in folder.iterdir() if p.is_dir() and (p / "meta.json").is_file()),
        key=lambda p: (_start_of(p), p.name),
    )


def _start_of(path: Path) -> int:
    import json

    try:
        return int(json.loads((path / "meta.json").read_text()).get("start_unix_ns") or 0)
    except (OSError, ValueError, TypeError, AttributeError):
        return 0


def merge(
    root_pid: int, tables: dict[str, pd.DataFrame], shards: list[Shard]
) -> dict[str, pd.DataFrame]:
    """The run's tables with every recorded shard's merged in (root's rows first)."""
    out = dict(tables)
    for name in _OF_A_PROCESS:
        if name in out:
            out[name] = _with_pid(out[name], root_pid)
    parts: dict[str, list[pd.DataFrame]] = {t: [out[t]] for t in MERGED if t in out}
    frames = out.get("frames")
    frame_key: dict[tuple[str, str, int], int] = {}
    next_frame = 1
    if frames is not None and not frames.empty:
        frame_key = {
            (str(f), str(n), int(line)): int(i)
            for i, f, n, line in zip(
                frames["frame_id"],
                frames["function"],
                frames["filename"],
                frames["first_line"],
                strict=True,
            )
        }
        next_frame = int(frames["frame_id"].max()) + 1
    for rank, shard in enumerate(s for s in shards if s.recorded):
        offset = (rank + 1) << _STACK_ID_SHIFT
        t = shard.tables
        frame_map: dict[int, int] = {}
        new_frames = []
        if "frames" in t:
            for i, f, n, line in zip(
                t["frames"]["frame_id"],
                t["frames"]["function"],
                t["frames"]["filename"],
                t["frames"]["first_line"],
                strict=True,
            ):
                key = (str(f), str(n), int(line))
                known = frame_key.get(key)
                if known is None:
                    known = frame_key[key] = next_frame
                    next_frame += 1
                    new_frames.append((known, f, n, int(line)))
                frame_map[int(i)] = known
        for name in MERGED:
            if name not in t or name not in parts:
                continue
            df = t[name]
            if name == "frames":
                df = pd.DataFrame(new_frames, columns=list(df.columns)).astype(df.dtypes)
            elif name in _OF_A_PROCESS:
                df = _with_pid(df, shard.pid)
            elif name == "stacks":
                df = df.assign(
                    stack_id=df["stack_id"] + offset,
                    frame_ids=[_renumbered(ids, frame_map) for ids in df["frame_ids"]],
                ).astype(df.dtypes)
            elif "stack_id" in df:
                df = df.assign(stack_id=df["stack_id"] + offset)
            parts[name].append(df)
    for name, frames_of in parts.items():
        kept = [f for f in frames_of if not f.empty]
        if len(kept) > 1:
            out[name] = pd.concat(kept, ignore_index=True)
        elif kept:
            out[name] = kept[0]
    return out


def _with_pid(table: pd.DataFrame, pid: int) -> pd.DataFrame:
    if "pid" in table and table["pid"].notna().all():
        return table
    filled = table["pid"].fillna(pid) if "pid" in table else pid
    return table.assign(pid=pd.Series(filled, index=table.index, dtype="Int64"))


def _renumbered(ids: Any, frame_map: dict[int, int]) -> str:
    if not isinstance(ids, str) or not ids:
        return "" if not isinstance(ids, str) else ids
    return ";".join(str(frame_map.get(int(i), int(i))) for i in ids.split(";") if i)


def worker_summary(shards: list[Shard]) -> tuple[list[dict[str, Any]], list[str]]:
    """Per recorded worker: pid, parent, how it started and ended; and the notes the merge
    owes the reader (workers that ended without closing their shard)."""
    rows, unclosed = [], []
    for s in shards:
        if not s.recorded:
            continue
        w = s.meta.get("worker") or {}
        exit_ = s.meta.get("exit") or {}
        rows.append(
            {
                "pid": s.pid,
                "ppid": w.get("ppid"),
                "started_by": w.get("started_by"),
                "closed": s.closed,
                "exit_status": exit_.get("status"),
                "duration_s": s.meta.get("duration_s"),
                "shard": os.path.join(s.path.parent.name, s.path.name),
            }
        )
        if not s.closed:
            unclosed.append(str(s.pid))
    notes = []
    if unclosed:
        notes.append(
            f"{len(unclosed)} of {len(rows)} worker process(es) ended without closing their "
            f"shard (killed, or ended by os._exit: pid {', '.join(unclosed)}): their records "
            "up to their last flush (at most a second before the end) are kept"
        )
    return rows, notes
