"""The run directory: the contract between collection and analysis.

``probe.rundir.load(path)`` returns a ``Run`` (meta + DataFrames); importing this
package does not import pandas -- the reader is loaded on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from probe.rundir.schema import COLUMNS, SCHEMA_NAME, SCHEMA_VERSION, TABLES

if TYPE_CHECKING:
    from probe.rundir.reader import Run, compact, load, read_meta

__all__ = [
    "COLUMNS",
    "SCHEMA_NAME",
    "SCHEMA_VERSION",
    "TABLES",
    "Run",
    "compact",
    "load",
    "read_meta",
]


def __getattr__(name: str) -> Any:
    if name in ("Run", "compact", "load", "read_meta"):
        from probe.rundir import reader

        return getattr(reader, name)
    raise AttributeError(name)
