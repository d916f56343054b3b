"""A sweep's file: ``batch_sweep.json`` in its output directory.

It keeps every timed call (the advice can be made again from it, with another SLA or
rate), what was called with what, the run it was set against, and the advice made when it
was written -- what ``probe diff --sweep`` holds a later run to.
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
    """Write ``document`` with the calls (latencies by batch size) as ``out_dir``'s sweep."""
    by_size: dict[str, list[float]] = {}
    for size, latency in zip(calls["batch"], calls["latency_s"], strict=True):
        by_size.setdefault(str(int(size)), []).append(round(float(latency), 9))
    body = {"schema": SCHEMA, **document, "calls_s": by_size}
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
    rows = []
    calls = document.get("calls_s")
    if not isinstance(calls, dict):
        raise ProbeError(f"{path}: calls_s is not an object of batch sizes")
    for size, latencies in calls.items():
        if not str(size).isdigit() or not isinstance(latencies, list):
            raise ProbeError(f"{path}: calls_s[{size!r}] is not a list under a batch size")
        for s in latencies:
            if not isinstance(s, (int, float)) or not math.isfinite(s) or s <= 0:
                raise ProbeError(f"{path}: calls_s[{size!r}] holds {s!r}, not a latency")
            rows.append((int(size), float(s)))
    return document, pd.DataFrame(rows, columns=["batch", "latency_s"])
