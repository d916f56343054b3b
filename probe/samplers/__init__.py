"""Samplers: small objects with an injected clock and source, each bounded in memory.

Each has ``sample()`` (one tick) and ``drain()`` (rows per run-directory table since the
previous drain); ``Ticker`` calls ``sample()`` at a rate on a daemon thread.
"""

from probe.samplers.gpu import GpuSampler
from probe.samplers.memory import MemorySampler
from probe.samplers.resources import ResourceSampler
from probe.samplers.stacks import StackSampler, thread_cpu_ns
from probe.samplers.ticker import Ticker
from probe.samplers.waits import REASONS, WaitClassifier

__all__ = [
    "REASONS",
    "GpuSampler",
    "MemorySampler",
    "ResourceSampler",
    "StackSampler",
    "Ticker",
    "WaitClassifier",
    "thread_cpu_ns",
]
