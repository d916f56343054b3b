"""How long `probe analyze` takes on an hour-long run, and how its cost grows with the data.

Builds synthetic run directories (Parquet, as `probe run` writes them): an hour of a
service on 8 threads, 1,000,000 spans (200,000 requests of 5 spans) and 360,000 stack
samples (100 Hz), with resources at 10 Hz; and the same at a tenth of the size. Runs
`probe analyze --no-write` on each in a fresh process and reports wall time and peak
RSS. Targets (issue 4): <= 10 s and <= 2 GB on the full run; the 10x run takes <= 12x
the time of the 1x run (cost grows linearly).

    python benchmarks/analyze_speed.py [--scale 1.0] [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from probe.rundir.schema import COLUMNS, SCHEMA_NAME, SCHEMA_VERSION

SEC = 1_000_000_000
T0 = 1_000 * SEC


def _write(path: Path, table: str, data: dict[str, np.ndarray | list]) -> None:
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


def build(path: Path, spans: int, samples: int, seconds: float, threads: int = 8) -> None:
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
    parent = table["parent_id"].astype("float64")
    parent[parent < 0] = np.nan
    table["parent_id"] = pd.array(parent, dtype="Int64")
    _write(path, "spans", table)

    frames = 400
    _write(
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
    _write(
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
    _write(
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
    _write(
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
    _write(
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


def analyze(path: Path) -> tuple[float, float]:
    """Wall seconds and peak RSS (MiB) of `probe analyze` in a fresh process."""
    code = (
        "import resource, sys, time\n"
        "t = time.perf_counter()\n"
        "from probe.cli import main\n"
        "try:\n"
        f"    main(['analyze', '--no-write', {str(path)!r}])\n"
        "except SystemExit:\n"
        "    pass\n"
        "sys.stderr.write(f'{time.perf_counter() - t} '\n"
        "    f'{resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}\\n')\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    wall, rss = out.stderr.strip().splitlines()[-1].split()
    return float(wall), float(rss)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--scale", type=float, default=1.0, help="fraction of the hour-long run")
    p.add_argument("--repeat", type=int, default=3)
    args = p.parse_args()
    spans, samples = int(1_000_000 * args.scale), int(360_000 * args.scale)
    with tempfile.TemporaryDirectory() as tmp:
        full, tenth = Path(tmp) / "full", Path(tmp) / "tenth"
        t = time.perf_counter()
        build(full, spans, samples, 3600 * args.scale)
        build(tenth, spans // 10, samples // 10, 360 * args.scale)
        print(f"built {spans:,} spans and {samples:,} samples in {time.perf_counter() - t:.1f} s")
        # interleaved: the machine's noise hits both alike
        runs = [(analyze(tenth), analyze(full)) for _ in range(args.repeat)]
        small = statistics.median(r[0][0] for r in runs)
        big = statistics.median(r[1][0] for r in runs)
        rss = max(r[1][1] for r in runs)
        print(f"1x  ({spans // 10:,} spans, {samples // 10:,} samples): {small:.2f} s")
        print(f"10x ({spans:,} spans, {samples:,} samples): {big:.2f} s, peak RSS {rss:.0f} MiB")
        print(f"10x data / 1x data: {big / small:.1f}x the time (target <= 12x)")
        ok = big <= 10.0 and rss <= 2048 and big / small <= 12.0
        print("targets met" if ok else "TARGETS MISSED")
    return 0 if ok else 1


if __name__ == "__main__":
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    sys.exit(main())
