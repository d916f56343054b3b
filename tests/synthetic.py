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
    ) -> None:
        cpu = wall_ms if cpu_ms is None else cpu_ms
        self.rows["samples"].append(
            (T0 + int(ts_ms * MS), thread, stack, int(wall_ms * MS), int(cpu * MS), reason, 1)
        )
        if not any(r[0] == thread for r in self.rows["threads"]):
            self.rows["threads"].append((thread, thread, f"thread-{thread}", T0))

    def resources(self, ts_ms: float, cpu_s: float, rss_bytes: int, *, pid: int = 42) -> None:
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
