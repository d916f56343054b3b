"""Analyzers: pure functions from a loaded run (DataFrames) to results.

No printing, plotting, clocks or file I/O: same run directory, same result.
"""

from analyzers.summary import FunctionTime, RunSummary, ThreadTime, summarize

__all__ = ["FunctionTime", "RunSummary", "ThreadTime", "summarize"]
