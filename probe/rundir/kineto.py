"""Kineto traces (torch.profiler's Chrome-trace JSON) read into tables, streaming.

``read_kineto(path)`` reads a trace written by ``torch.profiler`` (``export_chrome_trace``,
``tensorboard_trace_handler``: ``.json`` or ``.json.gz``, recorded anywhere) into one
DataFrame per kind of event, with times in nanoseconds on the trace's clock:

* ``kernels``: GPU kernels (``cat`` ``kernel``): device, stream, the ``correlation`` id
  that ties each to the runtime call that launched it, the op's ``external_id``, grid
  and block;
* ``copies``: GPU memcpy and memset (``gpu_memcpy``, ``gpu_memset``): the kind as Kineto
  names it ("Memcpy HtoD (Pageable -> Device)"), bytes, correlation;
* ``runtime``: CUDA/HIP runtime and driver calls on the host (``cuda_runtime``,
  ``cuda_driver``): the launches, the synchronisations, the copies' host side;
* ``syncs``: what a stream or event synchronisation waited for on the GPU
  (``cuda_sync``, Kineto 2.1+);
* ``ops``: the framework's CPU ops (``cpu_op``: ``aten::addmm`` ...) with their input
  shapes and dtypes when ``record_shapes`` was on;
* ``annotations``: ``record_function`` ranges and profiler steps, on the host
  (``user_annotation``) and as Kineto mirrors them on the GPU (``gpu_user_annotation``);
* ``python``: Python frames when ``with_stack`` was on (``python_function``);
* ``memory``: the caching allocator's ``[memory]`` instants (``profile_memory``);
* ``threads``: process and thread names (the ``M`` metadata events).

Events of a category this reader does not know are counted in ``notes`` (a newer Kineto
schema), never an error. A trace cut short (a profiler killed mid-write, a truncated
download) keeps every event read before the cut, with a note saying where it stopped.

Memory stays bounded by the events kept, not the file: the JSON is parsed as a stream
(``ijson``'s C backend, the standard streaming JSON parser for Python), each event
reduced to a row at once. ``benchmarks/kineto_load.py`` measures the RSS per MB of trace.
The top-level keys besides ``traceEvents`` (``deviceProperties``, ``schemaVersion``,
``distributedInfo`` ...) are read in a second pass that builds nothing of the events:
Kineto writes some before ``traceEvents`` and some after.

This module imports pandas; collection never imports it.
"""

from __future__ import annotations

import gzip
import json
import zlib
from array import array
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from sys import intern
from typing import IO, Any, cast

import ijson
import numpy as np
import pandas as pd

from probe.errors import EXIT_USAGE, ProbeError

__all__ = ["KINETO_COLUMNS", "KinetoTrace", "read_kineto"]

# table -> its columns (every table also has ts_ns and dur_ns first)
KINETO_COLUMNS: dict[str, tuple[str, ...]] = {
    "kernels": (
        "name", "device", "stream", "correlation", "external_id", "grid", "block",
    ),
    "copies": ("name", "category", "device", "stream", "correlation", "external_id", "bytes"),
    "runtime": ("name", "category", "pid", "tid", "correlation", "external_id"),
    "syncs": ("name", "device", "stream", "correlation", "external_id"),
    "ops": ("name", "pid", "tid", "external_id", "input_dims", "input_types"),
    "annotations": ("name", "side", "pid", "tid", "external_id"),
    "python": ("name", "pid", "tid", "python_id", "parent_id"),
    "memory": ("device_type", "device_id", "bytes", "total_allocated", "total_reserved"),
    "threads": ("pid", "tid", "kind", "label"),
}  # fmt: skip

# Kineto's categories (lower-cased: the schema of torch 1.8-1.9 capitalised them,
# "Operator", "Runtime", "Kernel", "Memcpy", "Memset") -> the table their events go to
_TABLE_OF = {
    "kernel": "kernels",
    "gpu_memcpy": "copies",
    "gpu_memset": "copies",
    "memcpy": "copies",
    "memset": "copies",
    "cuda_runtime": "runtime",
    "cuda_driver": "runtime",
    "runtime": "runtime",
    "cuda_sync": "syncs",
    "cpu_op": "ops",
    "operator": "ops",
    "user_annotation": "annotations",
    "gpu_user_annotation": "annotations",
    "python_function": "python",
}
# categories read and deliberately not kept: the flow arrows (``ac2g``, formerly
# ``async``) repeat the correlation ids the runtime calls and kernels carry; the
# profiler's own span and instants
_NOT_KEPT = {"ac2g", "async", "trace", "cpu_instant_event", "overhead"}
# the columns whose values repeat (names, kinds): pandas categoricals, a fraction of
# the memory of a string per row
_CATEGORICAL = {"name", "category", "side", "kind", "grid", "block"}


@dataclass(frozen=True)
class KinetoTrace:
    """A Kineto trace as tables; ``meta``: its top-level keys other than the events;
    ``notes``: what was skipped or cut short, in words."""

    path: Path
    tables: dict[str, pd.DataFrame]
    meta: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    events: int = 0  # trace events read (kept or not)

    @property
    def has_gpu(self) -> bool:
        return bool(len(self.tables["kernels"]) or len(self.tables["copies"]))


def read_kineto(path: str | Path) -> KinetoTrace:
    """Read the trace at ``path`` (``.json`` or ``.json.gz``); a ``ProbeError`` (one line,
    exit status 2) when it is missing, not gzip or JSON, or not a Chrome trace."""
    path = Path(path)
    if not path.is_file():
        raise ProbeError(f"no such trace: {path}", EXIT_USAGE)
    rows: dict[str, dict[str, Any]] = {
        name: {"ts_ns": array("q"), "dur_ns": array("q"), **{c: [] for c in cols}}
        for name, cols in KINETO_COLUMNS.items()
    }
    unknown: Counter[str] = Counter()
    notes: list[str] = []
    events = 0
    try:
        with _open(path) as f:
            for event in ijson.items(f, "traceEvents.item", use_float=True):
                events += 1
                if isinstance(event, dict):
                    _add(event, rows, unknown)
    except ijson.IncompleteJSONError as e:
        if events == 0:
            raise ProbeError(f"{path} is not a Chrome/Kineto trace ({_first_line(e)})") from e
        notes.append(
            f"the trace is cut short after {events:,} events ({_first_line(e)}): "
            "the events before the cut are read"
        )
    except (OSError, EOFError, zlib.error) as e:
        if events == 0:
            raise ProbeError(f"{path} cannot be read as a trace ({_first_line(e)})") from e
        notes.append(
            f"the trace's compressed stream breaks after {events:,} events "
            f"({_first_line(e)}): the events before the break are read"
        )
    if events == 0:
        raise ProbeError(f'{path} holds no trace events (no "traceEvents" list)')
    if unknown:
        listed = ", ".join(f"{c} ({n:,})" for c, n in unknown.most_common(5))
        notes.append(f"events of categories this reader does not know were skipped: {listed}")
    return KinetoTrace(path, _tables(rows), _top_level(path), notes, events)


def _open(path: Path) -> IO[bytes]:
    with path.open("rb") as f:
        gzipped = f.read(2) == b"\x1f\x8b"
    return cast(IO[bytes], gzip.open(path, "rb")) if gzipped else path.open("rb")


def _first_line(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return (text[0] if text else type(e).__name__)[:200]


def _ns(value: Any) -> int | None:
    """Kineto's microseconds (a float, or a string in some writers) as nanoseconds."""
    try:
        us = float(value)
    except (TypeError, ValueError):
        return None
    if us != us or us in (float("inf"), float("-inf")):
        return None
    # whole microseconds times 1000 exactly: epoch microseconds (1.6e15) are exact in a
    # float, but times 1000 they are not (the float's step there is 256 ns)
    whole = int(us)
    return whole * 1000 + round((us - whole) * 1000)


def _add(e: dict[str, Any], rows: dict[str, dict[str, Any]], unknown: Counter[str]) -> None:
    """One event into the row lists of its table (or counted, when its kind is unknown)."""
    ph, cat = e.get("ph"), e.get("cat")
    cat = cat.lower() if isinstance(cat, str) else None
    if ph == "M":
        _add_thread(e, rows["threads"])
        return
    if ph == "i" and e.get("name") == "[memory]":
        _add_memory(e, rows["memory"])
        return
    if cat is None:
        return
    table = _TABLE_OF.get(cat)
    if table is None or ph != "X":
        if cat not in _NOT_KEPT and cat not in _TABLE_OF:
            unknown[cat] += 1
        return
    ts = _ns(e.get("ts"))
    if ts is None:
        return
    args = _args(e)
    out = rows[table]
    out["ts_ns"].append(ts)
    out["dur_ns"].append(_ns(e.get("dur")) or 0)
    for column, read in _EXTRACTORS[table]:
        out[column].append(read(e, args, cat))


# how each column is read from an event (``e``), its ``args`` and its lower-cased ``cat``
_Extract = Callable[[dict[str, Any], dict[str, Any], str], Any]
_READ: dict[str, _Extract] = {
    # names repeat thousands of times: one string object each (sys.intern), not one a row
    "name": lambda e, a, c: intern(str(e.get("name", ""))),
    "category": lambda e, a, c: c,
    "side": lambda e, a, c: "gpu" if c.startswith("gpu_") else "cpu",
    "pid": lambda e, a, c: _int(e.get("pid")),
    "tid": lambda e, a, c: _int(e.get("tid")),
    # "external id" in the older schema
    "external_id": lambda e, a, c: _int(a.get("External id", a.get("external id"))),
    "device": lambda e, a, c: _int(a.get("device")),
    "stream": lambda e, a, c: _int(a.get("stream")),
    "correlation": lambda e, a, c: _int(a.get("correlation")),
    "bytes": lambda e, a, c: _int(a.get("bytes")),
    "grid": lambda e, a, c: _text(_dims(a.get("grid"))),
    "block": lambda e, a, c: _text(_dims(a.get("block"))),
    "input_dims": lambda e, a, c: _text(_compact_json(a.get("Input Dims"))),
    "input_types": lambda e, a, c: _text(_compact_json(a.get("Input type"))),
    "python_id": lambda e, a, c: _int(a.get("Python id")),
    "parent_id": lambda e, a, c: _int(a.get("Python parent id")),
}
_EXTRACTORS = {
    table: tuple((column, _READ[column]) for column in columns)
    for table, columns in KINETO_COLUMNS.items()
    if table not in ("memory", "threads")  # instants and metadata: read apart
}


def _add_thread(e: dict[str, Any], out: dict[str, list[Any]]) -> None:
    kind = e.get("name")
    args = _args(e)
    if kind not in ("process_name", "thread_name") or "name" not in args:
        return  # sort indices, labels: nothing the analyses read
    out["ts_ns"].append(_ns(e.get("ts")) or 0)
    out["dur_ns"].append(0)
    out["pid"].append(_int(e.get("pid")))
    out["tid"].append(_int(e.get("tid")))
    out["kind"].append(kind)
    out["label"].append(str(args["name"]))


def _add_memory(e: dict[str, Any], out: dict[str, list[Any]]) -> None:
    args = _args(e)
    ts = _ns(e.get("ts"))
    if ts is None:
        return
    out["ts_ns"].append(ts)
    out["dur_ns"].append(0)
    out["device_type"].append(_int(args.get("Device Type")))
    out["device_id"].append(_int(args.get("Device Id")))
    out["bytes"].append(_int(args.get("Bytes")))
    out["total_allocated"].append(_int(args.get("Total Allocated")))
    out["total_reserved"].append(_int(args.get("Total Reserved")))


def _args(e: dict[str, Any]) -> dict[str, Any]:
    args = e.get("args")
    return args if isinstance(args, dict) else {}


def _int(value: Any) -> int | None:
    """An id or a count; None when absent. Some writers give pids and tids as strings
    ("Spans", or a number in quotes): those that are numbers are kept."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int):
        return value
    try:
        return int(float(value))
    except (TypeError, ValueError):
        return None


def _text(value: str | None) -> str | None:
    return None if value is None else intern(value)


def _dims(value: Any) -> str | None:
    if isinstance(value, list):
        return ",".join(str(v) for v in value)
    return None


def _compact_json(value: Any) -> str | None:
    return None if value is None else json.dumps(value, separators=(",", ":"))


def _tables(rows: dict[str, dict[str, Any]]) -> dict[str, pd.DataFrame]:
    tables = {}
    for name, columns in rows.items():
        frame = pd.DataFrame(
            {k: np.frombuffer(v, dtype="int64") if isinstance(v, array) else v
             for k, v in columns.items()}
        )  # fmt: skip
        for column in frame.columns:
            if column in _CATEGORICAL:
                frame[column] = frame[column].astype("category")
            elif column in ("ts_ns", "dur_ns"):
                frame[column] = frame[column].astype("int64")
            elif column not in ("input_dims", "input_types", "label"):
                frame[column] = frame[column].astype("Int64")  # nullable: ids may be absent
        tables[name] = frame.sort_values("ts_ns", kind="stable", ignore_index=True)
    return tables


def _top_level(path: Path) -> dict[str, Any]:
    """The top-level keys other than ``traceEvents``, built from the parser's events
    without building the trace events (a second pass: some come after them)."""
    meta: dict[str, Any] = {}
    builder: ijson.ObjectBuilder | None = None
    key = ""
    try:
        with _open(path) as f:
            for prefix, event, value in _skipping_events(ijson.parse(f, use_float=True)):
                if prefix == "" and event == "map_key":
                    _keep(meta, key, builder)
                    key = value
                    builder = None if value == "traceEvents" else ijson.ObjectBuilder()
                elif builder is not None and prefix != "":
                    builder.event(event, value)
            _keep(meta, key, builder)
    except (ijson.JSONError, OSError, EOFError, zlib.error):
        _keep(meta, key, builder)  # cut short: what was read of them (the events' pass said so)
    return meta


def _keep(meta: dict[str, Any], key: str, builder: Any) -> None:
    if builder is not None and hasattr(builder, "value"):
        meta[key] = builder.value


def _skipping_events(
    parsed: Iterator[tuple[str, str, Any]],
) -> Iterator[tuple[str, str, Any]]:
    for item in parsed:
        if not item[0].startswith("traceEvents"):
            yield item
