"""The spans a run's journals gained since the last read, while the run goes on.

The span recorder flushes ``spans.jsonl`` (and each worker's, under ``workers/<pid>/``)
at least once a second, one batch per line (``probe.rundir.writer``): ``[prefix, rows]``,
each row standing for ``prefix + row`` in the order of ``probe.rundir.schema``'s spans
table. A line still being written waits for the next read; a torn line (a killed
writer) is skipped. Stdlib only: this runs in the sidecar, beside a busy service.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, NamedTuple

__all__ = ["LiveSpan", "SpanJournals"]


class LiveSpan(NamedTuple):
    """One finished span, as the journal has it (times on the run's perf_counter clock)."""

    pid: int
    thread_id: int
    span_id: int
    parent_id: int | None
    name: str
    category: str
    start_ns: int
    end_ns: int
    request_id: str | None
    attrs: dict[str, Any]


class _Tail:
    """What one journal gained since the last read: whole lines only."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.offset = 0
        self.partial = b""

    def new_lines(self) -> list[bytes]:
        try:
            with open(self.path, "rb") as f:
                f.seek(self.offset)
                data = f.read()
        except OSError:
            return []
        self.offset += len(data)
        data = self.partial + data
        lines = data.split(b"\n")
        self.partial = lines.pop()
        return [line for line in lines if line.strip()]


class SpanJournals:
    """The run's span journals (the main process's, ``pid``, and every worker's)."""

    def __init__(self, run_dir: Path, pid: int) -> None:
        self.run_dir = run_dir
        self.pid = pid
        self._tails: dict[Path, tuple[int, _Tail]] = {}

    def poll(self) -> list[LiveSpan]:
        """The spans written since the last call, journal by journal."""
        out: list[LiveSpan] = []
        for path, pid in self._journals():
            _, tail = self._tails.setdefault(path, (pid, _Tail(path)))
            for line in tail.new_lines():
                out.extend(_spans(line, pid))
        return out

    def _journals(self) -> list[tuple[Path, int]]:
        found = [(self.run_dir / "spans.jsonl", self.pid)]
        for path in self.run_dir.glob("workers/*/spans.jsonl"):
            try:
                found.append((path, int(path.parent.name)))
            except ValueError:
                continue
        return found


def _spans(line: bytes, pid: int) -> list[LiveSpan]:
    try:
        prefix, rows = json.loads(line)
    except (ValueError, TypeError):
        return []  # a torn batch (a killed writer): its spans are lost to the live view
    out = []
    for row in rows:
        try:
            fields: list[Any] = [*prefix, *row]
            tid, sid, parent, name, category, start, end = fields[:7]
            request_id = fields[7] if len(fields) > 7 else None
            attrs = fields[8] if len(fields) > 8 else None
            out.append(
                LiveSpan(
                    pid,
                    int(tid),
                    int(sid),
                    None if parent is None else int(parent),
                    str(name),
                    str(category),
                    int(start),
                    max(int(end), int(start)),
                    None if request_id is None else str(request_id),
                    _attrs(attrs),
                )
            )
        except (TypeError, ValueError):
            continue
    return out


def _attrs(attrs: Any) -> dict[str, Any]:
    if isinstance(attrs, str):
        try:
            attrs = json.loads(attrs)
        except ValueError:
            return {}
    return attrs if isinstance(attrs, dict) else {}
