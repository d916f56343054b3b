"""A sweep's file: ``batch_sweep.json`` in its output directory.

It keeps every timed call (the advice can be made again from it, with another SLA or
rate): by size, in the order made, with how many each pass made. And what was called
with what, the run it was set against, and the advice made when it was written -- what
``probe diff --sweep`` holds a later run to.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pandas as pd

from probe.atomicfile import write_atomic
from probe.errors import ProbeError

__all__ = ["SCHEMA", "SWEEP_FILE", "read_sweep", "write_sweep"]

SCHEMA = "probe.batch_sweep/1"
SWEEP_FILE = "batch_sweep.json"


def write_sweep(out_dir: Path, calls: pd.DataFrame, document: dict[str, Any]) -> Path:
    """Write ``document`` with the calls (latencies by batch size, and with a ``pass``
    column the calls each pass made) as ``out_dir``'s sweep."""
    ordered = calls.sort_values(["batch", "pass"], kind="stable") if "pass" in calls else calls
    by_size: dict[str, list[float]] = {}
    for size, latency in zip(ordered["batch"], ordered["latency_s"], strict=True):
        by_size.setdefault(str(int(size)), []).append(round(float(latency), 9))
    body = {"schema": SCHEMA, **document, "calls_s": by_size}
    if "pass" in calls:
        counts = calls.groupby([calls["batch"].astype(int), "pass"]).size()
        body["calls_per_pass"] = {
            str(size): [int(n) for n in counts.loc[size]] for size in counts.index.levels[0]
        }
    path = out_dir / SWEEP_FILE
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
        write_atomic(path, json.dumps(body, indent=1, allow_nan=False) + "\n")
    except OSError as e:
        raise ProbeError(f"cannot write {path}: {e.strerror or e}", exit_code=1) from None
    return path


def read_sweep(where: Path) -> tuple[dict[str, Any], pd.DataFrame]:
    """(the sweep's document, its calls) from a sweep directory or its file; ProbeError
    naming what is wrong otherwise."""
    path = where / SWEEP_FILE if where.is_dir() else where
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ProbeError(f"{where} holds no {SWEEP_FILE} (written by probe batch-sweep)") from None
    except (OSError, ValueError) as e:
        raise ProbeError(f"{path} is not a readable sweep: {e}") from None
    if not isinstance(document, dict) or document.get("schema") != SCHEMA:
        raise ProbeError(f"{path} is not a batch sweep (schema {SCHEMA})")
    calls = document.get("calls_s")
    if not isinstance(calls, dict):
        raise ProbeError(f"{path}: calls_s is not an object of batch sizes")
    per_pass = document.get("calls_per_pass")
    rows = []
    for size, latencies in calls.items():
        if not str(size).isdigit() or not isinstance(latencies, list):
            raise ProbeError(f"{path}: calls_s[{size!r}] is not a list under a batch size")
        for s in latencies:
            if not isinstance(s, (int, float)) or not math.isfinite(s) or s <= 0:
                raise ProbeError(f"{path}: calls_s[{size!r}] holds {s!r}, not a latency")
        passes = _passes(per_pass, size, len(latencies)) if per_pass is not None else None
        if passes is None and per_pass is not None:
            raise ProbeError(f"{path}: calls_per_pass[{size!r}] does not count calls_s's calls")
        for i, s in enumerate(latencies):
            rows.append(
                (int(size), float(s)) if passes is None else (int(size), float(s), passes[i])
            )
    columns = ["batch", "latency_s", *(() if per_pass is None else ("pass",))]
    return document, pd.DataFrame(rows, columns=columns)


def _passes(per_pass: Any, size: str, calls: int) -> list[int] | None:
    """Each call's pass, from the calls each pass made (a sweep written before passes
    has none); None where the counts do not add up to the calls."""
    counts = per_pass.get(size) if isinstance(per_pass, dict) else None
    if not isinstance(counts, list) or not all(isinstance(n, int) and n >= 0 for n in counts):
        return None
    if sum(counts) != calls:
        return None
    return [k for k, n in enumerate(counts) for _ in range(n)]
