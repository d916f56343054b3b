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
    "attribute": "probe.analyzers.attribution",
    "Breakdown": "probe.analyzers.breakdown",
    "breakdown": "probe.analyzers.breakdown",
    "Diagnosis": "probe.analyzers.diagnosis",
    "diagnose": "probe.analyzers.diagnosis",
    "Comparison": "probe.analyzers.diff",
    "compare": "probe.analyzers.diff",
    "LeakVerdict": "probe.analyzers.leaks",
    "judge_recorded": "probe.analyzers.leaks",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module 'analyzers' has no attribute {name!r}")
    return getattr(importlib.import_module(_EXPORTS[name]), name)
