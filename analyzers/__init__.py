"""Analyzers: pure functions from a loaded run (DataFrames) to results.

No printing, plotting, clocks or file I/O: same run directory, same result.
``diagnose(run)`` is the whole pipeline: breakdown -> findings -> recommendations, leaks.

The names below load on first use: the in-process leak watchdog imports
``analyzers.leaks`` (numpy only) into the watched service, and importing this package
must not drag pandas in with it.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "BLOCKING_REASONS": "analyzers.attribution",
    "attribute": "analyzers.attribution",
    "Breakdown": "analyzers.breakdown",
    "breakdown": "analyzers.breakdown",
    "Diagnosis": "analyzers.diagnosis",
    "diagnose": "analyzers.diagnosis",
    "Comparison": "analyzers.diff",
    "compare": "analyzers.diff",
    "LeakVerdict": "analyzers.leaks",
    "detect_leak": "analyzers.leaks",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module 'analyzers' has no attribute {name!r}")
    return getattr(importlib.import_module(_EXPORTS[name]), name)
