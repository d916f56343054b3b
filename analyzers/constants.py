"""Constants that carry their source: every threshold and assumed figure of the analysis.

A rule's number is only as good as where it comes from, so each lives in a frozen
dataclass field declared with ``constant(value, source)``; ``sources(obj)`` lists them,
and a test holds every field of ``Thresholds``, ``Model`` (and the leak detector's
settings) to having one.
"""

from __future__ import annotations

import dataclasses
from typing import Any

__all__ = ["constant", "sources"]


def constant(value: Any, source: str) -> Any:
    """A dataclass field defaulting to ``value``, with where the number comes from."""
    return dataclasses.field(default=value, metadata={"source": source})


def sources(obj: Any) -> dict[str, str]:
    """Field name -> documented source ("" where none was given)."""
    return {f.name: str(f.metadata.get("source", "")) for f in dataclasses.fields(obj)}
