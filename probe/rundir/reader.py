"""Loading a run directory into DataFrames, and compacting it to Parquet.

``load(path)`` reads ``meta.json`` and every table, Parquet first and the live
``.jsonl`` otherwise. A run whose process was killed leaves ``.jsonl`` files whose last
line may be cut short: complete rows are kept and ``Run.notes`` says what was dropped.
``compact(path)`` turns the ``.jsonl`` tables into Parquet (atomically, one table at a
time). A run that is diagnosed as it ends is compacted then; one that is not (``probe
run --no-report``) keeps its journals until it is first loaded: ``load`` compacts a
finished run whose process is gone, where the directory is writable, so ending a run
costs no pandas or pyarrow import (issue 17: 0.5 s of a 0.6-s fixed cost).

This module imports pandas and pyarrow; collection never imports it.
"""

from __future__ import annotations

import functools
import json
import os
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor, wait
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from probe.atomicfile import atomic_output, write_json_atomic
from probe.errors import ProbeError
from probe.pids import alive
from probe.rundir import shards
from probe.rundir.journals import JournalFollower, read_jsonl, schema
from probe.rundir.kineto import KinetoTrace, read_kineto
from probe.rundir.schema import (
    COLUMNS,
    SCHEMA_NAME,
    SCHEMA_VERSION,
    SPAN_RANGE_PREFIX,
    TABLES,
)
from probe.rundir.validate import check_meta, check_table

__all__ = [
    "Run",
    "compact",
    "compact_and_load",
    "compacting",
    "load",
    "read_meta",
    "without_the_launcher",
]


@dataclass(frozen=True)
class Run:
    """A loaded run directory: its metadata, its tables, and what loading had to drop."""

    path: Path
    meta: dict[str, Any]
    tables: dict[str, pd.DataFrame]
    notes: list[str] = field(default_factory=list)
    # (meta.json's entry, the trace) of each torch.profiler window read (probe.samplers.
    # torch_windows)
    torch_windows: list[tuple[dict[str, Any], KinetoTrace]] = field(default_factory=list)
    # The worker processes whose shards were merged (probe.rundir.shards.worker_summary):
    # empty for a run of one process.
    workers: list[dict[str, Any]] = field(default_factory=list)
    # What the load driver's clients saw (``probe run --load``: RUN_DIR/load/requests.parquet,
    # ``probe.load.store``), one row a request; None when no load ran.
    load_requests: pd.DataFrame | None = None

    def __getattr__(self, name: str) -> pd.DataFrame:
        tables = object.__getattribute__(self, "tables")
        if name in tables:
            return tables[name]
        raise AttributeError(name)


def read_meta(path: Path) -> dict[str, Any]:
    meta_path = path / "meta.json"
    if not path.is_dir():
        raise ProbeError(f"{path}: no such run directory")
    if not meta_path.is_file():
        raise ProbeError(f"{path}: not a probe run directory (no meta.json)")
    try:
        meta = json.loads(meta_path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise ProbeError(f"{meta_path}: unreadable ({e})") from None
    except RecursionError:
        raise ProbeError(f"{meta_path}: unreadable (nested too deeply)") from None
    meta = check_meta(meta, meta_path)
    if meta.get("schema") != SCHEMA_NAME:
        raise ProbeError(f"{meta_path}: not a probe run (schema {meta.get('schema')!r})")
    version = meta.get("schema_version")
    if not isinstance(version, int):
        raise ProbeError(f"{meta_path}: schema_version missing or not a number")
    if version > SCHEMA_VERSION:
        raise ProbeError(
            f"{path}: run directory schema version {version} is newer than this probe "
            f"understands (version {SCHEMA_VERSION}); upgrade probe to read it"
        )
    return meta


def _frame(table: str, arrow: pa.Table, where: Path) -> pd.DataFrame:
    """The one Arrow -> pandas conversion, so live and compacted runs give equal frames;
    what the schema does not allow is a ``ProbeError`` naming ``where`` (validate.py)."""
    arrow = check_table(table, arrow, COLUMNS[table], where)
    df = arrow.to_pandas(types_mapper={pa.string(): pd.StringDtype()}.get)
    for name, dtype in COLUMNS[table]:
        if name not in df.columns:
            df[name] = pd.Series([None] * len(df), dtype=dtype)
        elif dtype in ("Int64", "bool") and str(df[name].dtype) != dtype:
            df[name] = df[name].astype(dtype)
    return df[[c for c, _ in COLUMNS[table]]]


def _empty_frame(table: str) -> pd.DataFrame:
    # a copy of one made per table and process: converting an empty Arrow table to a
    # typed frame costs ~1-3 ms, and most runs have several empty tables (no spans, no
    # GPU...) at the end of every run
    return _empty_frame_of(table).copy()


@functools.cache
def _empty_frame_of(table: str) -> pd.DataFrame:
    return _frame(table, schema(table).empty_table(), Path(table))


def _read_table(path: Path, table: str) -> tuple[pd.DataFrame, list[str]]:
    parquet, jsonl = path / f"{table}.parquet", path / f"{table}.jsonl"
    for _attempt in range(2):
        if parquet.is_file():
            try:
                arrow = pq.read_table(parquet)
            except (OSError, pa.ArrowException) as e:
                if not jsonl.is_file():
                    return _empty_frame(table), [f"{table}: unreadable Parquet dropped ({e})"]
            else:
                return _frame(table, arrow, parquet), []
        if jsonl.is_file():
            try:
                arrow, notes = read_jsonl(jsonl, table)
                return _frame(table, arrow, jsonl), notes
            except FileNotFoundError:
                continue  # compacted under our feet: read the Parquet on the next pass
        break
    return _empty_frame(table), []


def load(path: str | os.PathLike[str], *, tables: list[str] | None = None) -> Run:
    """Load a run directory (complete, live or left behind by a killed process), its
    workers' shards merged in (``probe.rundir.shards``). A finished run still in journals
    is compacted first (the module's docstring); a read-only one is read as it is."""
    root = Path(path)
    if _finished_in_journals(root):
        try:
            return compact_and_load(root, tables=tables)[0]
        except OSError:
            pass  # not ours to rewrite (read-only, disk full): its journals read as well
    return _assemble(root, tables, {})


def _finished_in_journals(root: Path) -> bool:
    """Ended (meta.json says so) by a process that is gone, with journals left: no
    writer appends to them any more."""
    if not any(root.glob("*.jsonl")):
        return False
    meta = _quiet_meta(root)
    pid = meta.get("pid")
    return "end" in meta and isinstance(pid, int) and not alive(pid)


def _assemble(root: Path, tables: list[str] | None, read: dict[str, pd.DataFrame]) -> Run:
    """``load``, with the tables in ``read`` already parsed."""
    meta = read_meta(root)
    frames: dict[str, pd.DataFrame] = {}
    notes: list[str] = []
    for table in TABLES if tables is None else tables:
        if table not in COLUMNS:
            raise ProbeError(f"unknown table {table!r}; tables are {', '.join(TABLES)}")
        if table in read:
            frames[table] = read[table]
            continue
        frames[table], table_notes = _read_table(root, table)
        notes.extend(table_notes)
    if "end" not in meta:
        notes.insert(0, "the run did not finish cleanly (no end time): data up to the last flush")
    if "stacks" in frames and "frames" in frames:
        frames["stacks"], own = _split_at_the_launcher(frames["stacks"], frames["frames"])
        if own and "samples" in frames:  # probe's start and end, not the target's time
            samples = frames["samples"]
            frames["samples"] = samples[~samples["stack_id"].isin(own)].reset_index(drop=True)
    windows = _torch_windows(root, meta, notes)
    workers: list[dict[str, Any]] = []
    merged = [t for t in frames if t in shards.MERGED]
    if merged:
        loaded = _load_shards(root, notes)
        frames = shards.merge(int(meta.get("pid") or 0), frames, loaded)
        workers, worker_notes = shards.worker_summary(loaded)
        notes.extend(worker_notes)
        for shard in loaded:
            windows.extend(_torch_windows(shard.path, shard.meta, notes, within=root))
    return Run(
        path=root,
        meta=meta,
        tables=frames,
        notes=notes,
        torch_windows=windows,
        workers=workers,
        load_requests=_load_requests(root, notes),
    )


def without_the_launcher(stacks: pd.DataFrame, frames: pd.DataFrame) -> pd.DataFrame:
    """The stacks of the target's main thread from its own first frame: ``probe run``
    runs it in-process (``probe.launcher``, through runpy), so each of its stacks starts
    with probe's command line, click's and runpy's frames -- fifteen frames no profile of
    ``python service.py`` has, at the root of every flame graph. Cut at runpy's
    ``_run_code`` above the launcher's frame; a stack without the launcher (the target's
    other threads and processes, a service's own runpy use) is left whole."""
    return _split_at_the_launcher(stacks, frames)[0]


def probe_s_own_stacks(stacks: pd.DataFrame, frames: pd.DataFrame) -> set[int]:
    """The stacks of the main thread in probe's own code around the target: through the
    launcher's frame but not into runpy's ``_run_code`` (the session starting, or
    closing after the target returned -- an import it makes there was read as the
    target's "<library> disk 100%"). Their samples are not the target's time."""
    return _split_at_the_launcher(stacks, frames)[1]


_LAUNCHER_FILE = "/probe/launcher.py"


def _split_at_the_launcher(
    stacks: pd.DataFrame, frames: pd.DataFrame
) -> tuple[pd.DataFrame, set[int]]:
    """(``without_the_launcher``'s stacks, ``probe_s_own_stacks``), in one walk."""
    if stacks.empty or frames.empty:
        return stacks, set()
    files = frames["filename"].astype(str)
    launcher = set(frames["frame_id"][files.str.endswith(_LAUNCHER_FILE)].astype(int))
    if not launcher:
        return stacks, set()
    runs = set(
        frames["frame_id"][
            (frames["function"].astype(str) == "_run_code")
            & files.str.endswith(("<frozen runpy>", "/runpy.py"))
        ].astype(int)
    )
    ids = stacks["frame_ids"].fillna("").astype(str)
    cut, own = [], set()
    for sid, text in zip(stacks["stack_id"], ids, strict=True):
        target, probe_s = _from_the_target(text, launcher, runs)
        cut.append(target)
        if probe_s:
            own.add(int(sid))
    return stacks.assign(frame_ids=pd.Series(cut, index=ids.index, dtype=ids.dtype)), own


def _from_the_target(text: str, launcher: set[int], runs: set[int]) -> tuple[str, bool]:
    """(the stack from the target's first frame, or whole; whether it is probe's own:
    through the launcher and never into runpy's ``_run_code`` below it)."""
    ids = text.split(";")
    seen_launcher = False
    for i, frame in enumerate(ids):
        if not frame:
            continue
        fid = int(frame)
        if fid in launcher:
            seen_launcher = True
        elif seen_launcher and fid in runs:
            return ";".join(ids[i + 1 :]) or text, False  # the target's frames, if any
    return text, seen_launcher


# the load driver's records in a run directory (probe.load.runner.REQUESTS)
LOAD_REQUESTS = "load/requests.parquet"


def _load_requests(root: Path, notes: list[str]) -> pd.DataFrame | None:
    path = root / LOAD_REQUESTS
    if not path.is_file():
        return None
    try:
        return pq.read_table(path).to_pandas()
    except (OSError, ValueError, pa.ArrowException) as e:
        notes.append(f"the load's records ({LOAD_REQUESTS}) unreadable, left out: {e}")
        return None


def _load_shards(root: Path, notes: list[str]) -> list[shards.Shard]:
    """The workers' shards (``probe.rundir.shards``); a shard that cannot be read is a
    note, and the rest of the run stands."""
    out = []
    for path in shards.shard_dirs(root):
        try:
            meta = read_meta(path)
            tables, shard_notes = {}, []
            for table in shards.MERGED:
                tables[table], table_notes = _read_table(path, table)
                shard_notes.extend(table_notes)
        except ProbeError as e:
            notes.append(f"worker shard {path.name} unreadable, left out: {e}")
            continue
        notes.extend(f"worker {path.name}: {n}" for n in shard_notes)
        out.append(shards.Shard(path=path, meta=meta, tables=tables))
    return out


def _torch_windows(
    root: Path, meta: dict[str, Any], notes: list[str], within: Path | None = None
) -> list[tuple[dict[str, Any], KinetoTrace]]:
    """The torch.profiler windows meta.json lists that can be read (a missing or broken
    one is a note: the rest of the run stands). ``within``: the run a worker's shard
    ``root`` belongs to; the window's file is then named from the run's folder."""
    torch = (meta.get("collector") or {}).get("torch") or {}
    out = []
    for entry in torch.get("windows") or []:
        path = root / str(entry.get("file", ""))
        if within is not None:
            entry = {**entry, "file": os.path.relpath(path, within)}
        if not path.is_file():
            notes.append(f"torch.profiler window {entry.get('file')} is missing")
            continue
        try:
            trace = read_kineto(path)
        except ProbeError as e:
            notes.append(f"torch.profiler window {entry.get('file')} unreadable: {e}")
            continue
        # probe's own thread is not the target's: a run written before 2026-12-07 has the
        # ops it ran there to measure the profiler's cost (now read off the target's ops)
        own = entry.get("probe_tid")
        if own is not None:
            for name, table in trace.tables.items():
                if "tid" in table:
                    trace.tables[name] = table[table["tid"] != own].reset_index(drop=True)
        _spans_to_ranges(trace.tables)
        base = int(trace.meta.get("baseTimeNanoseconds") or 0)
        closed = entry.get("closed_unix_ns")
        cut = _drop_ranges_cut_by_the_stop(trace.tables, closed - base) if closed else 0
        entry = {**entry, "cut_ranges": cut}
        out.append((entry, trace))
    return out


def _spans_to_ranges(tables: dict[str, Any]) -> None:
    """probe's spans in the window (``SPAN_RANGE_PREFIX``: torch's fast range files them
    as CPU ops) become the window's ``record_function`` ranges, under their own names:
    as ops they would hold every op of a stage, and the span table would not see them."""
    ops, ranges = tables.get("ops"), tables.get("annotations")
    if ops is None or ranges is None or ops.empty:
        return
    names = ops["name"].astype(str)
    ours = names.str.startswith(SPAN_RANGE_PREFIX)
    if not ours.any():
        return
    moved = ops[ours][["ts_ns", "dur_ns", "pid", "tid", "external_id"]].copy()
    moved["name"] = names[ours].str.slice(len(SPAN_RANGE_PREFIX)).to_numpy()
    moved["side"] = "cpu"
    joined = pd.concat([ranges.astype({"name": str, "side": str}), moved[ranges.columns]])
    tables["annotations"] = joined.sort_values("ts_ns", kind="stable").reset_index(drop=True)
    tables["ops"] = ops[~ours].reset_index(drop=True)


def _drop_ranges_cut_by_the_stop(tables: dict[str, Any], closed_ns: int) -> int:
    """Drop the ``record_function`` ranges (probe's spans among them:
    ``probe.samplers.torch_windows.SpanRanges``) still open when the window closed, and
    return how many: torch writes them as ending at the stop, after the window's close
    has stalled the target (a request "took" 49 ms where its neighbours took 0.5), and
    what they launched after the stop is not in the trace. ``closed_ns``: when probe
    closed the window, on the trace's clock (Unix time less the trace's base); a range
    that ended before it was not cut, whatever ended last."""
    ranges = tables.get("annotations")
    if ranges is None or ranges.empty:
        return 0
    host = ranges["side"].astype(str) != "gpu"
    cut = host & (ranges["ts_ns"] + ranges["dur_ns"] >= closed_ns)
    tables["annotations"] = ranges[~cut].reset_index(drop=True)
    return int(cut.sum())


# Runs (or schedules) the job that writes a table's Parquet: (the table, the job).
_Write = Callable[[str, Callable[[], None]], None]


def _now(table: str, job: Callable[[], None]) -> None:
    job()


def _compact(
    root: Path, write: _Write = _now, follower: JournalFollower | None = None
) -> tuple[dict[str, pd.DataFrame], list[str]]:
    """Each journal of ``root`` parsed into its frame (what ``follower`` parsed of it
    while the run went on, and the rest); ``write`` runs (or schedules) the job that
    writes its Parquet and then drops the journal."""
    journals = follower if follower is not None else JournalFollower(root)  # none followed
    frames: dict[str, pd.DataFrame] = {}
    notes: list[str] = []
    for table in TABLES:
        try:
            arrow, table_notes = journals.take(table)
        except FileNotFoundError:
            continue  # none, or another reader compacted it just now: its Parquet is read
        notes.extend(table_notes)
        write(table, functools.partial(_to_parquet, root, table, arrow))
        frames[table] = _frame(table, arrow, root / f"{table}.parquet")
    return frames, notes


def _to_parquet(root: Path, table: str, arrow: pa.Table) -> None:
    """``table``'s Parquet written atomically, then its journal dropped: a write that
    fails leaves the journal, which loads as well."""
    with atomic_output(root / f"{table}.parquet") as f:
        pq.write_table(arrow, f, compression="zstd")
    (root / f"{table}.jsonl").unlink(missing_ok=True)


def _compact_shards(root: Path) -> list[str]:
    """Compact each worker's shard whose process is gone (a live one still appends)."""
    notes: list[str] = []
    for path in shards.shard_dirs(root):
        try:
            pid = int(path.name.split("-")[0])
        except ValueError:
            continue
        if (path / "meta.json").is_file() and "end" not in _quiet_meta(path) and alive(pid):
            notes.append(f"worker {pid} still runs: its shard is left as journals")
            continue
        notes.extend(f"worker {path.name}: {n}" for n in _compact(path)[1])
    return notes


def _quiet_meta(path: Path) -> dict[str, Any]:
    try:
        meta = json.loads((path / "meta.json").read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):
        return {}
    return meta if isinstance(meta, dict) else {}


def _compact_all(
    root: Path, write: _Write = _now, follower: JournalFollower | None = None
) -> tuple[dict[str, pd.DataFrame], list[str]]:
    """The run's tables and its workers' compacted; the notes kept in meta.json, since
    the journals they describe are gone now (or will be, once ``write`` has run its jobs)."""
    frames, notes = _compact(root, write, follower)
    notes = notes + _compact_shards(root)
    if notes:
        meta = read_meta(root)
        meta.setdefault("notes", []).extend(notes)
        write_json_atomic(root / "meta.json", meta)
    return frames, notes


def compact(path: str | os.PathLike[str]) -> list[str]:
    """Convert every ``.jsonl`` table of a run directory (and of its workers' shards) to
    Parquet; returns notes (also kept in meta.json)."""
    return _compact_all(Path(path))[1]


def compact_and_load(
    path: str | os.PathLike[str], *, tables: list[str] | None = None
) -> tuple[Run, list[str]]:
    """``compact`` then ``load``, reusing the tables just parsed instead of reading back.

    Returns the run and, apart, the notes compaction itself made (rows it had to drop).
    """
    return _compacted(Path(path), tables)


def _compacted(
    root: Path,
    tables: list[str] | None,
    write: _Write = _now,
    follower: JournalFollower | None = None,
) -> tuple[Run, list[str]]:
    frames, notes = _compact_all(root, write, follower)
    run = _assemble(root, tables, frames)
    return replace(run, notes=[*run.notes, *notes]), notes


@contextmanager
def compacting(
    path: str | os.PathLike[str],
    failed: Callable[[str, Exception], None],
    follower: JournalFollower | None = None,
) -> Iterator[tuple[Run, list[str]]]:
    """``compact_and_load`` whose Parquet files are written on a thread of their own while
    the ``with`` block works on the run (pyarrow encodes and compresses with the GIL
    released): a verdict does not wait for its run's files. The block's end waits for
    them; ``failed(table, error)`` for each that could not be written (its journal stays,
    and loads as well). ``follower``: what was parsed of the journals as the run went on
    (``probe.rundir.journals.JournalFollower``), to parse only the rest."""
    root = Path(path)
    jobs: list[tuple[str, Future[None]]] = []
    with ThreadPoolExecutor(1, thread_name_prefix="probe-compaction") as pool:
        try:
            yield _compacted(
                root, None, lambda table, job: jobs.append((table, pool.submit(job))), follower
            )
        finally:
            wait([job for _, job in jobs])
    for table, job in jobs:
        error = job.exception()
        if isinstance(error, Exception):
            failed(table, error)
