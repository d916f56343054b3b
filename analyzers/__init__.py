"""Analyzers: pure functions from a loaded run (DataFrames) to results.

No printing, plotting, clocks or file I/O: same run directory, same result.
"""

from analyzers.attribution import BLOCKING_REASONS, attribute
from analyzers.summary import FunctionTime, RunSummary, ThreadTime, summarize

__all__ = ["BLOCKING_REASONS", "FunctionTime", "RunSummary", "ThreadTime", "attribute", "summarize"]
