"""Analyzers: pure functions from a loaded run (DataFrames) to results.

No printing, plotting, clocks or file I/O: same run directory, same result.
``diagnose(run)`` is the whole pipeline: breakdown -> findings -> recommendations, leaks.
"""

from analyzers.attribution import BLOCKING_REASONS, attribute
from analyzers.breakdown import Breakdown, breakdown
from analyzers.diagnosis import Diagnosis, diagnose
from analyzers.diff import Comparison, compare
from analyzers.leaks import LeakVerdict, detect_leak

__all__ = [
    "BLOCKING_REASONS",
    "Breakdown",
    "Comparison",
    "Diagnosis",
    "LeakVerdict",
    "attribute",
    "breakdown",
    "compare",
    "detect_leak",
    "diagnose",
]
