"""What a run directory may hold, checked as it is read: nothing below the reader sees a
malformed value.

Run directories travel (shared folders, tickets, re-analysed elsewhere) and a damaged or
hostile one must end in one clear line naming the file and the field (``ProbeError``:
exit status 2), never in a traceback from deep inside the analysis. A fuzz of 300
mutated directories ended in tracebacks 129 times before these checks: meta.json as
``null`` or a list, sections of the wrong type, NaN/Inf and numbers past 2**63, columns
retyped or emptied, tables swapped, JSON nested thousands deep.

``meta.json``: the fields the analysis and the reports read have a type (``META``);
others pass as they are. Tables: every column of the schema present (a trailing column
an older probe did not write may be missing: it reads as null, so only nullable types
may be missing), of its type, non-null where probe always writes a value (``int64``,
``bool``, the text columns in ``_TEXT_REQUIRED``), finite, and within +-2**62
(nanosecond timestamps are subtracted and summed as int64). A run's numbers are far
inside that: ``time.time_ns()`` is 1.8e18 in 2026.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from probe.errors import ProbeError

__all__ = ["ARROW_TYPES", "check_meta", "check_table"]

ARROW_TYPES = {
    "int64": pa.int64(),
    "Int64": pa.int64(),
    "float64": pa.float64(),
    "string": pa.string(),
    "bool": pa.bool_(),
}

_LIMIT = 2**62

Check = Callable[[Any], str]  # "" when the value is right, else what is wrong with it


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _int(value: Any) -> str:
    if isinstance(value, bool) or not isinstance(value, int):
        return f"expected an integer, got {_shown(value)}"
    return "" if abs(value) < _LIMIT else f"{value} is out of range"


def _number(value: Any) -> str:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return f"expected a number, got {_shown(value)}"
    if not math.isfinite(value) or abs(value) >= _LIMIT:
        return f"{_shown(value)} is not a finite number in range"
    return ""


def _of(kind: type, name: str) -> Check:
    return lambda value: "" if isinstance(value, kind) else f"expected {name}, got {_shown(value)}"


def _optional(check: Check) -> Check:
    return lambda value: "" if value is None else check(value)


def _list_of(check: Check) -> Check:
    def checked(value: Any) -> str:
        if not isinstance(value, list):
            return f"expected a list, got {_shown(value)}"
        return next((f"item {k}: {e}" for k, v in enumerate(value) if (e := check(v))), "")

    return checked


def _dict_of(check: Check) -> Check:
    def checked(value: Any) -> str:
        if not isinstance(value, dict):
            return f"expected an object, got {_shown(value)}"
        return next((f"{k}: {e}" for k, v in value.items() if (e := check(v))), "")

    return checked


_STR, _BOOL, _DICT = _of(str, "text"), _of(bool, "true or false"), _of(dict, "an object")

# The fields read below the reader. A nested dict is a section whose own fields are
# checked the same way; absent fields are fine (older or killed runs lack some).
META: dict[str, Any] = {
    "schema": _STR,
    "schema_version": _int,
    "probe_version": _STR,
    "command": _list_of(_STR),
    "target": {"kind": _STR, "name": _STR, "argv": _list_of(_STR)},
    "cwd": _STR,
    "pid": _int,
    "python": {"version": _STR, "implementation": _STR, "library_paths": _list_of(_STR)},
    "host": {
        "cpu_count": _int,
        "memory_limit_bytes": _optional(_int),
        "cores_allowed": _optional(_number),
        "cpu_limit": _optional(_STR),
    },
    "limits": {"open_files": _optional(_int)},
    "start_unix_ns": _int,
    "start": _STR,
    "clock": {"perf_ns": _int, "unix_ns": _int},
    "duration_limit_s": _optional(_number),
    "trace_s": _optional(_number),
    "settings": {"hz": _number, "resource_hz": _number},
    "end_unix_ns": _int,
    "end": _STR,
    "duration_s": _number,
    "exit": {"status": _optional(_int), "ended_by": _STR},
    # the CPU quota's throttling over the run (where a quota binds the process)
    "cpu_throttling": {"periods": _int, "throttled_periods": _int, "throttled_s": _number},
    "collector": {
        "collector_cpu_s": _dict_of(_number),
        "kernel_states": {"unavailable": _STR},
        "rows_written": _dict_of(_int),
    },
    "gpus": {"available": _BOOL, "devices": _list_of(_DICT), "reason": _STR},
    "notes": _list_of(_STR),
    "exception": _STR,
}


def check_meta(meta: Any, where: Path) -> dict[str, Any]:
    """``meta`` when it is a run's metadata; else ``ProbeError`` naming the field."""
    if not isinstance(meta, dict):
        raise ProbeError(f"{where}: expected a JSON object, got {type(meta).__name__}")
    _check_section(meta, META, where, "")
    return meta


def _check_section(section: dict[str, Any], spec: dict[str, Any], where: Path, at: str) -> None:
    for key, rule in spec.items():
        if key not in section:
            continue
        value, name = section[key], f"{at}{key}"
        if isinstance(rule, dict):
            if not isinstance(value, dict):
                raise ProbeError(f"{where}: {name}: expected an object, got {_shown(value)}")
            _check_section(value, rule, where, f"{name}.")
        elif problem := rule(value):
            raise ProbeError(f"{where}: {name}: {problem}")


# schema type -> the Arrow types a column of it may come as (cast to the schema's)
_ACCEPTED: dict[str, Callable[[pa.DataType], bool]] = {
    "int64": pa.types.is_integer,
    "Int64": pa.types.is_integer,
    "float64": lambda t: pa.types.is_floating(t) or pa.types.is_integer(t),
    "string": lambda t: pa.types.is_string(t) or pa.types.is_large_string(t),
    "bool": pa.types.is_boolean,
}
_NULLABLE = {"Int64", "float64", "string"}
# Text columns probe writes with a value in every row; the rest may be null (a span
# outside a request, a stack whose leaf calls nothing, an older run's missing column).
_TEXT_REQUIRED = {
    ("spans", "name"), ("spans", "category"), ("threads", "name"),
    ("samples", "wait_reason"), ("stacks", "frame_ids"), ("frames", "function"),
    ("frames", "filename"), ("gc_types", "type"), ("task_samples", "wait_reason"),
    ("awaited_sockets", "connection"),
}  # fmt: skip
# Columns added after runs were recorded without them: missing, they read as their
# type's empty value (false); present, they hold a value in every row.
_ADDED_LATER = {("task_samples", "main_task")}


def check_table(
    table: str, arrow: pa.Table, columns: list[tuple[str, str]], where: Path
) -> pa.Table:
    """``arrow`` reduced to the schema's columns when each holds what its type allows;
    else ``ProbeError`` naming the column."""
    kept: dict[str, pa.ChunkedArray] = {}
    for name, kind in columns:
        required = kind not in _NULLABLE or (table, name) in _TEXT_REQUIRED
        if name not in arrow.column_names:
            if required and arrow.num_rows and (table, name) not in _ADDED_LATER:
                raise ProbeError(f"{where}: no column {name!r} (is this the {table} table?)")
            continue
        column = arrow.column(name)
        if required and column.null_count:
            raise ProbeError(f"{where}: column {name!r}: {column.null_count} missing value(s)")
        if not pa.types.is_null(column.type):
            if not _ACCEPTED[kind](column.type):
                raise ProbeError(f"{where}: column {name!r} holds {column.type}, not {kind}")
            if problem := _values(column, kind):
                raise ProbeError(f"{where}: column {name!r}: {problem}")
            column = column.cast(ARROW_TYPES[kind])  # int32 -> int64, ints -> float64
        kept[name] = column
    return pa.table(kept) if kept else arrow.select([])


def _values(column: pa.ChunkedArray, kind: str) -> str:
    if kind in ("int64", "Int64", "float64") and len(column) > column.null_count:
        as_float = pc.cast(column, pa.float64(), safe=False)  # 2**62 is no float exactly
        if kind == "float64" and pc.any(pc.is_inf(as_float)).as_py():
            return "infinite value(s)"
        extreme = pc.max(pc.abs(as_float.filter(pc.is_finite(as_float)))).as_py()
        if extreme is not None and extreme >= _LIMIT:
            return f"value {extreme:.3g} out of range"
    return ""
