"""Build synthetic run directories: exact tables for edge cases a real run cannot pin down.

    b = RunBuilder(duration_s=1.0)
    work = b.stack("main", "postprocess")
    b.span("request", 0, 100, category="request")
    b.sample(thread=1, ts_ms=50, stack=work)
    run_dir = b.write(tmp_path / "run")

Times are milliseconds from the run's start; the files written are what ``probe run``
writes (``meta.json`` and Parquet tables in the schema's column order), so the reader,
the analyzers and the CLI all see a real run directory.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from probe.rundir.schema import COLUMNS, SCHEMA_NAME, SCHEMA_VERSION

MS = 1_000_000
T0 = 10_000 * MS  # perf_counter at the run's start


def frame_table(name: str, rows: list[tuple[Any, ...]]) -> pd.DataFrame:
    cols = [c for c, _ in COLUMNS[name]]
    # rows may leave trailing columns out, as an older probe's runs do (read as missing)
    df = pd.DataFrame([(*r, *[None] * (len(cols) - len(r))) for r in rows], columns=cols)
    for c, dtype in COLUMNS[name]:
        df[c] = df[c].astype(dtype)
    return df


class RunBuilder:
    def __init__(self, *, duration_s: float = 1.0, cpu_count: int = 2, gpu: bool = False):
        self.duration_s = duration_s
        self.cpu_count = cpu_count
        self.gpu = gpu
        self.rows: dict[str, list[tuple[Any, ...]]] = {t: [] for t in COLUMNS}
        self._frames: dict[tuple[str, str], int] = {}
        self._stacks: dict[tuple[Any, ...], int] = {}
        self._span_id = 0
        self.meta_extra: dict[str, Any] = {}

    def frame(self, function: str, filename: str = "/srv/app.py") -> int:
        key = (function, filename)
        if key not in self._frames:
            self._frames[key] = len(self._frames) + 1
            self.rows["frames"].append((self._frames[key], function, filename, 1))
        return self._frames[key]

    def stack(
        self, *functions: str, leaf_call: str = "", line: int = 10, filename: str = "/srv/app.py"
    ) -> int:
        ids = tuple(self.frame(f, filename) for f in functions)
        key = (ids, line, leaf_call)
        if key not in self._stacks:
            sid = len(self._stacks) + 1
            self._stacks[key] = sid
            self.rows["stacks"].append((sid, ";".join(map(str, ids)), line, leaf_call))
        return self._stacks[key]

    def span(
        self,
        name: str,
        start_ms: float,
        end_ms: float,
        *,
        thread: int = 1,
        category: str = "stage",
        parent: int | None = None,
        request: str | None = None,
        attrs: str | None = None,  # JSON text, as the spans table keeps it
    ) -> int:
        self._span_id += 1
        self.rows["spans"].append(
            (
                thread,
                self._span_id,
                parent,
                name,
                category,
                T0 + int(start_ms * MS),
                T0 + int(end_ms * MS),
                request,
                attrs,
            )
        )
        return self._span_id

    def sample(
        self,
        thread: int,
        ts_ms: float,
        stack: int,
        *,
        wall_ms: float = 10.0,
        cpu_ms: float | None = None,
        reason: str = "",
        queued_ms: float | None = None,
    ) -> None:
        """``queued_ms``: of the interval, the time on a run queue (None: not read, as an
        older probe's runs)."""
        cpu = wall_ms if cpu_ms is None else cpu_ms
        row = (T0 + int(ts_ms * MS), thread, stack, int(wall_ms * MS), int(cpu * MS), reason, 1)
        if queued_ms is not None:
            row += ("", int(queued_ms * MS))
        self.rows["samples"].append(row)
        if not any(r[0] == thread for r in self.rows["threads"]):
            self.rows["threads"].append((thread, thread, f"thread-{thread}", T0))

    def resources(
        self,
        ts_ms: float,
        cpu_s: float,
        rss_bytes: int,
        *,
        pid: int = 42,
        children_cpu_s: float = float("nan"),
    ) -> None:
        nan = float("nan")
        self.rows["resources"].append(
            (
                T0 + int(ts_ms * MS),
                pid,
                1,
                pid == 42,
                cpu_s,
                0.0,
                rss_bytes,
                nan,
                0.0,
                0.0,
                0,
                0,
                1,
                nan,
                nan,
                nan,
                children_cpu_s,
            )
        )

    def system(self, ts_ms: float, cpu_percent: float, probe_cpu_s: float | None = None) -> None:
        row = (T0 + int(ts_ms * MS), cpu_percent, 1 << 30, 0, 0, probe_cpu_s)
        self.rows["system"].append(row)

    def gpu_reading(self, ts_ms: float, util: float) -> None:
        nan = float("nan")
        self.rows["gpu"].append((T0 + int(ts_ms * MS), 0, util, nan, nan, nan, nan, nan, nan, nan))

    def meta(self, *, finished: bool = True) -> dict[str, Any]:
        meta: dict[str, Any] = {
            "schema": SCHEMA_NAME,
            "schema_version": SCHEMA_VERSION,
            "probe_version": "test",
            "target": {"kind": "script", "name": "app.py", "argv": ["app.py"]},
            "pid": 42,
            "python": {"version": "3.11", "library_paths": ["/usr/lib/python3.11"]},
            "host": {"cpu_count": self.cpu_count},
            "start_unix_ns": 0,
            "clock": {"perf_ns": T0, "unix_ns": 0},
            "settings": {"hz": 100.0},
            "gpus": {"available": True, "devices": [{"name": "FakeGPU"}]}
            if self.gpu
            else {"available": False, "reason": "test"},
        }
        if finished:
            meta.update(
                {
                    "end": "x",
                    "duration_s": self.duration_s,
                    "exit": {"status": 0, "ended_by": "completed"},
                }
            )
        meta.update(self.meta_extra)
        return meta

    def tables(self) -> dict[str, pd.DataFrame]:
        return {name: frame_table(name, rows) for name, rows in self.rows.items()}

    def write(self, path: Path, *, finished: bool = True) -> Path:
        path.mkdir(parents=True, exist_ok=True)
        (path / "meta.json").write_text(json.dumps(self.meta(finished=finished)))
        for name, df in self.tables().items():
            if len(df):
                pq.write_table(
                    pa.Table.from_pandas(df, preserve_index=False), path / f"{name}.parquet"
                )
        return path


SEC = 1_000_000_000


def _write_columns(path: Path, table: str, data: dict[str, np.ndarray | list]) -> None:
    df = pd.DataFrame(data)
    for column, dtype in COLUMNS[table]:
        if column not in df:
            df[column] = pd.Series([None] * len(df))
        df[column] = df[column].astype(dtype)
    df = df[[c for c, _ in COLUMNS[table]]]
    pq.write_table(
        pa.Table.from_pandas(df, preserve_index=False),
        path / f"{table}.parquet",
        compression="zstd",
    )


def hour_long_run(
    path: Path,
    spans: int = 1_000_000,
    samples: int = 360_000,
    seconds: float = 3600,
    threads: int = 8,
) -> Path:
    """An hour of a service on 8 threads, built column-wise (for the analysis, report
    and export bounds: ``benchmarks/analyze_speed.py``, ``report_speed.py``,
    ``export_bounds.py``): ``spans`` spans (requests of 5: decode, model, postprocess,
    and tokenize inside model; requests carry HTTP attributes), ``samples`` stack
    samples at 100 Hz over 2,000 stacks (network and sleep waits among them), resources
    at 10 Hz."""
    rng = np.random.default_rng(0)
    path.mkdir(parents=True)
    requests = spans // 5
    per_thread = requests // threads
    dur = int(seconds * SEC / per_thread)  # each thread serves back to back
    thread = np.repeat(np.arange(1, threads + 1), per_thread)
    k = np.tile(np.arange(per_thread), threads)
    start = T0 + k * dur
    # request, then decode / model / postprocess / (nested in model) tokenize
    parts = np.array([0.1, 0.3, 0.5])
    ids = np.arange(len(k)) * 5 + 1
    rows = {
        "thread_id": [],
        "span_id": [],
        "parent_id": [],
        "name": [],
        "category": [],
        "start_ns": [],
        "end_ns": [],
        "request_id": [],
    }

    def add(tid, sid, parent, name, cat, s, e):
        rows["thread_id"].append(tid)
        rows["span_id"].append(sid)
        rows["parent_id"].append(parent)
        rows["name"].append(np.full(len(sid), name))
        rows["category"].append(np.full(len(sid), cat))
        rows["start_ns"].append(s)
        rows["end_ns"].append(e)
        rows["request_id"].append(np.char.add("r", (sid // 5).astype(str)))

    add(thread, ids, np.full(len(ids), -1), "request", "request", start, start + dur)
    edges = start[:, None] + (np.concatenate([[0], np.cumsum(parts)]) * dur).astype(np.int64)
    for j, name in enumerate(("decode", "model", "postprocess")):
        add(thread, ids + 1 + j, ids, name, "stage", edges[:, j], edges[:, j + 1])
    add(thread, ids + 4, ids + 2, "tokenize", "span", edges[:, 1], edges[:, 1] + dur // 20)
    table = {key: np.concatenate(value) for key, value in rows.items()}
    http = json.dumps({"method": "POST", "route": "/predict", "status": 200})
    table["attrs"] = np.where(table["category"] == "request", http, None)
    parent = table["parent_id"].astype("float64")
    parent[parent < 0] = np.nan
    table["parent_id"] = pd.array(parent, dtype="Int64")
    _write_columns(path, "spans", table)

    frames = 400
    _write_columns(
        path,
        "frames",
        {
            "frame_id": np.arange(1, frames + 1),
            "function": [f"f{i}" for i in range(frames)],
            "filename": [f"/srv/app/mod{i % 20}.py" for i in range(frames)],
            "first_line": np.arange(frames),
        },
    )
    stacks = 2000
    depth = rng.integers(3, 12, stacks)
    frame_ids = [";".join(map(str, rng.integers(1, frames + 1, d))) for d in depth]
    calls = rng.choice(["", "", "np.dot", "sock.recv_into", "time.sleep"], stacks)
    _write_columns(
        path,
        "stacks",
        {
            "stack_id": np.arange(1, stacks + 1),
            "frame_ids": frame_ids,
            "leaf_line": rng.integers(1, 500, stacks),
            "leaf_call": calls,
        },
    )
    per = samples // threads
    ts = T0 + (np.tile(np.arange(per), threads) * (seconds * SEC / per)).astype(np.int64)
    sid = rng.integers(1, stacks + 1, per * threads)
    reason = np.where(
        calls[sid - 1] == "sock.recv_into",
        "network",
        np.where(calls[sid - 1] == "time.sleep", "sleep", ""),
    )
    wall = np.full(per * threads, int(seconds * SEC / per))
    _write_columns(
        path,
        "samples",
        {
            "ts_ns": ts,
            "thread_id": np.repeat(np.arange(1, threads + 1), per),
            "stack_id": sid,
            "wall_ns": wall,
            "cpu_ns": np.where(reason == "", wall, 0),
            "wait_reason": reason,
            "samples": np.ones(per * threads, dtype=np.int64),
        },
    )
    ticks = int(seconds * 10)
    t = T0 + np.arange(ticks) * (SEC // 10)
    _write_columns(
        path,
        "resources",
        {
            "ts_ns": t,
            "pid": np.full(ticks, 42),
            "ppid": np.ones(ticks),
            "is_root": np.ones(ticks, dtype=bool),
            "cpu_user_s": np.arange(ticks) * 0.08,
            "cpu_system_s": np.zeros(ticks),
            "rss_bytes": 300_000_000 + rng.integers(0, 5_000_000, ticks),
            "ctx_voluntary": np.zeros(ticks),
            "ctx_involuntary": np.zeros(ticks),
            "num_threads": np.full(ticks, threads + 2),
        },
    )
    _write_columns(
        path,
        "system",
        {
            "ts_ns": t,
            "cpu_percent": np.full(ticks, 45.0),
            "mem_available_bytes": np.full(ticks, 1 << 34),
            "net_sent_bytes": np.zeros(ticks),
            "net_recv_bytes": np.zeros(ticks),
        },
    )
    meta = {
        "schema": SCHEMA_NAME,
        "schema_version": SCHEMA_VERSION,
        "probe_version": "bench",
        "target": {"argv": ["app.py"]},
        "pid": 42,
        "host": {"cpu_count": 2},
        "python": {"library_paths": []},
        "end": "x",
        "duration_s": seconds,
        "exit": {"status": 0, "ended_by": "completed"},
        "gpus": {"available": False},
    }
    (path / "meta.json").write_text(json.dumps(meta))
    return path
