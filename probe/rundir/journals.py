"""A run's journals (each table's ``.jsonl``, appended while the run goes on) parsed into
Arrow tables: whole, or followed as they grow (``JournalFollower``).

A journal line is one flushed batch, ``[prefix, rows]``: the prefix's values lead each of
its rows (a thread's id, for its spans). The collector only appends; a batch torn by a
kill is the last line, and only a whole journal's reading drops it.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa

from probe.rundir.schema import COLUMNS, TABLES
from probe.rundir.validate import ARROW_TYPES
from probe.samplers.collection import collector_held_off

__all__ = ["JournalFollower", "arrow_from_batches", "read_jsonl", "schema"]

# The most journal bytes a follower keeps parsed in memory: past it, the rest of a run's
# journals is read at its end, as if not followed. A decorated loop's spans come at
# ~1.8 MB/s (25,000 spans a second): 256 MiB holds ~2 minutes of such a run.
FOLLOW_MAX_BYTES = 256 << 20


def schema(table: str) -> pa.Schema:
    return pa.schema([(c, ARROW_TYPES[t]) for c, t in COLUMNS[table]])


def arrow_from_batches(table: str, batches: list[Any]) -> pa.Table:
    """Journal batches (each ``[prefix, rows]``: the prefix's values lead every row) -> an
    Arrow table, one C-level array per column. Built column by column: a batch's rows are
    transposed by ``zip`` and its prefix repeated, not each row rebuilt with its prefix in
    Python (0.9 s of a 30-s decorated loop's 700,000 spans, then 0.5 s padding them and
    the transposition of all of them at once; 2026-12-02)."""
    fields = schema(table)
    width = len(fields)
    columns: list[list[Any]] = [[] for _ in range(width)]
    for prefix, rows in batches:
        if not rows:
            continue
        n, lead = len(rows), len(prefix or ())
        if set(map(len, rows)) != {width - lead}:
            # written by an older probe with fewer trailing columns (padded), or torn
            rows = [(list(r) + [None] * width)[: width - lead] for r in rows]
        for column, value in zip(columns, prefix or (), strict=False):
            column.extend([value] * n)
        for column, values in zip(columns[lead:], zip(*rows, strict=True), strict=False):
            column.extend(values)
    # spans' attrs: a JSON object in the journal, JSON text in the table (a stage's are
    # most often none: the types are looked at in C before any row is in Python)
    if table == "spans" and set(map(type, columns[8])) - {type(None), str}:
        columns[8] = [a if a is None or isinstance(a, str) else json.dumps(a) for a in columns[8]]
    return pa.Table.from_arrays(
        [
            pa.array(column, type=typed.type, from_pandas=True)
            for column, typed in zip(columns, fields, strict=True)
        ],
        schema=fields,
    )


def read_jsonl(path: Path, table: str, offset: int = 0) -> tuple[pa.Table, list[str]]:
    """Parse a live table (from byte ``offset`` on); a torn last batch (the process was
    killed) is dropped."""
    with open(path, "rb") as f:
        f.seek(offset)
        raw = f.read()
    notes: list[str] = []
    if not raw:
        return schema(table).empty_table(), notes
    end = raw.rfind(b"\n")
    complete, tail = raw[: end + 1], raw[end + 1 :]
    if tail.strip():
        notes.append(f"{table}: dropped 1 incomplete batch at the end ({len(tail)} bytes)")
    text = complete.decode("utf-8", errors="replace").rstrip("\n")
    if not text:
        return schema(table).empty_table(), notes
    # Without cyclic collections: a journal parses into millions of lists and tuples that
    # all stay alive, and each collection of the oldest generation walks all of them (a
    # 30-s decorated loop's 700,000 spans: the parse 1.3 -> 0.5 s, the columns 0.9 ->
    # 0.2 s; 2026-12-02). What they hold has no cycles: nothing waits for a collection.
    with collector_held_off():
        return parsed(text, table, notes)


def parsed(text: str, table: str, notes: list[str]) -> tuple[pa.Table, list[str]]:
    try:
        # One C-level parse of the whole journal: each line is a JSON array and json never
        # writes a raw newline inside a value, so newline -> comma makes a valid list.
        batches = json.loads("[" + text.replace("\n", ",") + "]")
    except (ValueError, RecursionError):
        batches, bad = [], 0
        for line in text.split("\n"):
            try:
                batches.append(json.loads(line))
            except (ValueError, RecursionError):  # RecursionError: nested too deeply
                bad += 1
        notes.append(f"{table}: dropped {bad} corrupt batch(es)")
    try:
        return arrow_from_batches(table, batches), notes
    except (TypeError, ValueError, OverflowError, pa.ArrowException):
        return schema(table).empty_table(), [*notes, f"{table}: unreadable journal dropped"]


@dataclass
class _Followed:
    inode: int
    offset: int = 0  # bytes parsed: up to the end of a complete line
    parts: list[pa.Table] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


class JournalFollower:
    """A run directory's journals parsed as they grow, so that the end of the run parses
    only what came last: ``catch_up()`` now and then while the run goes on (``probe
    run``'s finisher does, at idle priority, once a second), then ``take(table)`` for each
    whole journal. Only complete lines are parsed before the end. A journal replaced or
    cut shorter than what was parsed (another reader compacted it) is read afresh; past
    ``max_bytes`` parsed, the rest waits for ``take``."""

    def __init__(self, root: Path, max_bytes: int = FOLLOW_MAX_BYTES) -> None:
        self.root = root
        self.max_bytes = max_bytes
        self._followed: dict[str, _Followed] = {}

    @property
    def parsed_bytes(self) -> int:
        return sum(f.offset for f in self._followed.values())

    def catch_up(self) -> None:
        for table in TABLES:
            self._catch_up(table)

    def _catch_up(self, table: str) -> None:
        try:
            with open(self.root / f"{table}.jsonl", "rb") as f:
                followed = self._current(table, os.fstat(f.fileno()))
                if followed is None:
                    return
                budget = self.max_bytes - self.parsed_bytes
                f.seek(followed.offset)
                raw = f.read(max(0, budget))
        except OSError:
            return
        complete = raw[: raw.rfind(b"\n") + 1]
        if not complete:
            return
        text = complete.decode("utf-8", errors="replace").rstrip("\n")
        with collector_held_off():
            arrow, notes = parsed(text, table, [])
        followed.parts.append(arrow)
        followed.notes.extend(notes)
        followed.offset += len(complete)

    def _current(self, table: str, stat: os.stat_result) -> _Followed | None:
        """What was parsed of ``table``, fresh where its file is another now; None where
        it is shorter than that (rewritten: ``take`` reads it afresh)."""
        followed = self._followed.get(table)
        if followed is None or followed.inode != stat.st_ino:
            followed = self._followed[table] = _Followed(stat.st_ino)
        return followed if stat.st_size >= followed.offset else None

    def take(self, table: str) -> tuple[pa.Table, list[str]]:
        """The whole journal, as ``read_jsonl`` reads it: what was parsed, and the rest
        now. FileNotFoundError where there is none."""
        path = self.root / f"{table}.jsonl"
        followed = self._followed.pop(table, None)
        if followed is not None:
            with open(path, "rb") as f:
                stat = os.fstat(f.fileno())
            if followed.inode == stat.st_ino and stat.st_size >= followed.offset:
                rest, notes = read_jsonl(path, table, followed.offset)
                return pa.concat_tables([*followed.parts, rest]), [*followed.notes, *notes]
        return read_jsonl(path, table)
