"""A glance at a small finished run directory, in plain Python: its meta.json, its
journals' rows as lists, and what else it holds -- no pyarrow, no pandas (the loader,
``probe.rundir.reader``, imports both: ~0.3 s that a run with nothing to judge does
not need; ``analyzers.empty_run``)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from probe.rundir.schema import TABLES

__all__ = ["GLANCE_MAX_BYTES", "Glance", "glance", "may_be_empty"]

# The most journal bytes a glance parses: a run with nothing to judge writes a few
# kilobytes (an empty script: ~3 KB in six journals); one with more is not one.
GLANCE_MAX_BYTES = 256 * 1024

Glance = tuple[dict[str, Any], dict[str, list[list[Any]]], list[str]]


def may_be_empty(run_dir: Path) -> bool:
    """Could the run at ``run_dir`` have nothing to judge? False, from the files' sizes
    alone, where its stack samples' or spans' journal holds a batch: the run that took
    a sample is told so before anything is imported or parsed (a long run's end would
    pay ~15 ms of imports for the question otherwise)."""
    for table in ("samples", "spans"):
        try:
            if os.stat(run_dir / f"{table}.jsonl").st_size > 0:
                return False
        except OSError:
            pass
    return not (run_dir / "samples.parquet").exists()


def glance(run_dir: Path) -> Glance | None:
    """(meta.json, each journal's rows -- a batch's prefix leading each of its rows --,
    the other names in ``run_dir``), or None where that cannot be read plainly: no
    meta.json (or one not an object), journals over ``GLANCE_MAX_BYTES`` in all, a torn
    or corrupt batch (the loader would note it), a table already compacted."""
    try:
        names = os.listdir(run_dir)
        meta = json.loads((run_dir / "meta.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(meta, dict):
        return None
    journals = {table for table in TABLES if f"{table}.jsonl" in names}
    known = {"meta.json", *(f"{table}.jsonl" for table in journals)}
    others = sorted(n for n in names if n not in known)
    rows: dict[str, list[list[Any]]] = {}
    left = GLANCE_MAX_BYTES
    for table in sorted(journals):
        try:
            with open(run_dir / f"{table}.jsonl", "rb") as f:
                raw = f.read(left + 1)
        except OSError:
            return None
        left -= len(raw)
        parsed = _rows(raw) if left >= 0 else None
        if parsed is None:
            return None
        rows[table] = parsed
    return meta, rows, others


def _rows(raw: bytes) -> list[list[Any]] | None:
    """A journal's rows, or None where a batch is torn or not ``[prefix, rows]``."""
    if raw and not raw.endswith(b"\n"):
        return None
    rows: list[list[Any]] = []
    for line in raw.splitlines():
        try:
            prefix, batch = json.loads(line)
        except (ValueError, TypeError, RecursionError):
            return None
        if not isinstance(batch, list) or not isinstance(prefix, list | type(None)):
            return None
        lead = list(prefix or ())
        for row in batch:
            if not isinstance(row, list):
                return None
            rows.append(lead + row)
    return rows
