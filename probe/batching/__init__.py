"""``probe batch-sweep``: a model stage's latency at several batch sizes, measured by calling
the function the user names (``target``: the function and its inputs; ``sweep``: the
timed calls; ``store``: the sweep's file). The advice is ``analyzers.batching``'s."""

from __future__ import annotations

from probe.batching.store import SWEEP_FILE, read_sweep, write_sweep
from probe.batching.sweep import SweepSettings, sweep
from probe.batching.target import batch_maker, resolve

__all__ = [
    "SWEEP_FILE",
    "SweepSettings",
    "batch_maker",
    "read_sweep",
    "resolve",
    "sweep",
    "write_sweep",
]
