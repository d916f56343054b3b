"""Samplers: small objects with an injected clock and source, each bounded in memory.

Each has ``sample()`` (one tick) and ``drain()`` (rows per run-directory table since the
previous drain); ``Ticker`` calls ``sample()`` at a rate on a daemon thread. Submodules
load on first use: the profiled process needs the stack sampler, not psutil or NVML.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from probe.samplers.gpu import GpuSampler
    from probe.samplers.heap import HeapSampler
    from probe.samplers.memory import MemorySampler
    from probe.samplers.resources import ResourceSampler
    from probe.samplers.stacks import StackSampler, thread_cpu_ns
    from probe.samplers.ticker import Ticker
    from probe.samplers.tree import TreeSampler
    from probe.samplers.waits import WaitClassifier

__all__ = [
    "GpuSampler",
    "HeapSampler",
    "MemorySampler",
    "ResourceSampler",
    "StackSampler",
    "Ticker",
    "TreeSampler",
    "WaitClassifier",
    "thread_cpu_ns",
]

_HOME = {
    "GpuSampler": "gpu",
    "HeapSampler": "heap",
    "MemorySampler": "memory",
    "ResourceSampler": "resources",
    "StackSampler": "stacks",
    "thread_cpu_ns": "stacks",
    "Ticker": "ticker",
    "TreeSampler": "tree",
    "WaitClassifier": "waits",
}


def __getattr__(name: str) -> Any:
    if name in _HOME:
        return getattr(importlib.import_module(f"probe.samplers.{_HOME[name]}"), name)
    raise AttributeError(name)
