"""Writing a run directory while the target runs (collection side: stdlib only).

Rows are appended to ``<table>.jsonl`` in batches, one ``[prefix, rows]`` JSON line per
``append`` (see ``schema``), and flushed to the OS by ``flush()``, which the collector
calls at least once a second: a process killed with SIGKILL loses at most what it
collected since the last flush (the page cache keeps the rest). ``meta.json`` is
replaced atomically (``probe.atomicfile``).
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import IO, Any

from probe.atomicfile import write_json_atomic
from probe.errors import ProbeError
from probe.rundir.schema import COLUMNS

__all__ = ["RunWriter", "prepare_run_dir"]


def prepare_run_dir(path: Path) -> Path:
    """Create ``path`` for a new run, or raise ProbeError before anything runs.

    Returns the absolute path: the target may change its working directory.
    """
    path = path.absolute()
    if path.exists() and not path.is_dir():
        raise ProbeError(f"--out {path}: exists and is not a directory")
    if path.is_dir() and any(path.iterdir()):
        raise ProbeError(f"--out {path}: directory is not empty (it may hold another run)")
    try:
        path.mkdir(parents=True, exist_ok=True)
        probe_file = path / ".write-test"
        os.close(os.open(probe_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW))
        probe_file.unlink()
    except OSError as e:
        raise ProbeError(f"--out {path}: cannot write there ({e.strerror or e})") from None
    return path


class RunWriter:
    """Appends rows to the tables of one run directory."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._files: dict[str, IO[str]] = {}
        self._dumps = json.JSONEncoder(separators=(",", ":"), default=str).encode
        self.rows_written: dict[str, int] = {}

    def _file(self, table: str) -> IO[str]:
        f = self._files.get(table)
        if f is None:
            if table not in COLUMNS:
                raise KeyError(f"unknown table {table!r}")
            # never through a symlink planted under the journal's name (the directory
            # may be shared): O_NOFOLLOW refuses it (ELOOP) instead of appending there
            fd = os.open(
                self.path / f"{table}.jsonl",
                os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC,
                0o666,
            )
            f = os.fdopen(fd, "a", encoding="utf-8")
            self._files[table] = f
        return f

    def append(self, table: str, rows: Sequence[Sequence[Any]], prefix: Sequence[Any] = ()) -> None:
        """Append one batch: each of ``rows`` stands for the row ``prefix + row``."""
        if not rows:
            return
        self.append_line(table, self._dumps([prefix, rows]), len(rows))

    def append_line(self, table: str, line: str, rows: int) -> None:
        """Append one batch already encoded as ``append`` would (``rows`` of them)."""
        self._file(table).write(line + "\n")
        self.rows_written[table] = self.rows_written.get(table, 0) + rows

    def flush(self) -> None:
        for f in self._files.values():
            f.flush()

    def close(self) -> None:
        for f in self._files.values():
            try:
                f.close()
            except OSError:
                pass
        self._files.clear()

    def write_meta(self, meta: dict[str, Any]) -> None:
        write_json_atomic(self.path / "meta.json", meta)
