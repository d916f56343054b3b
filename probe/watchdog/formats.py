"""The formats that cross from the watched process to the watcher and the analysis.

The attribution agent runs inside the watched service and writes its snapshots as JSON
(``sites.json``); the watcher reads them and ``analyzers.leaks.growth.snapshot_growth``
turns them into what grew. Typing only: importing this costs the service nothing.
"""

from __future__ import annotations

from typing import Any, TypedDict

__all__ = ["AttributionSnapshot", "TracingState"]


class AttributionSnapshot(TypedDict):
    t_s: float  # when it was taken, on the agent's clock (seconds)
    # allocation site "file:line" -> [live bytes, live blocks, traceback newest first]
    sites: dict[str, list[Any]]
    types: dict[str, int]  # gc-tracked type -> live objects
    # "module.name" of a module-level container -> [its type, items]
    containers: dict[str, list[Any]]


class TracingState(TypedDict):
    """What attribution's own tracing costs the watched process's memory, and when it
    stopped: the memory probe adds is not the service's (times: ``time.monotonic()``, the
    same clock in every process of the host)."""

    bookkeeping_bytes: int  # tracemalloc's own tables now (0 when not tracing)
    stopping_at: float | None  # the last stop began (its final snapshot: seconds, a heap copy)
    stopped_at: float | None  # ... and ended (tracing off, its tables freed)
    # why the tracker stopped tracing on its own (its tables' bound), if it did
    stopped_because: str | None
