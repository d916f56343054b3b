"""Process-tree and GPU sampling, usable from any process.

``TreeSampler`` pairs the resource sampler (psutil) and the GPU sampler (NVML) for the
process tree rooted at ``pid``. ``probe run`` drives it from its sidecar process, outside
the target: there it costs the target nothing (in-process at 10 Hz, ~1% of a pure-Python
service's throughput: ``benchmarks/tree_sampling_cost.py``), and it samples on to the
target's very end, even a SIGKILL. Timestamps are ``time.perf_counter_ns()``,
CLOCK_MONOTONIC on Linux: one clock for every process on the host, so rows line up with
the target's spans and stack samples.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from probe.samplers.gpu import GpuSampler
from probe.samplers.resources import ResourceSampler

__all__ = ["TreeSampler"]


class TreeSampler:
    """Resources of a process tree plus every GPU, ticked together."""

    def __init__(
        self,
        pid: int,
        *,
        gpu: bool = True,
        clock: Callable[[], int] = time.perf_counter_ns,
        resources: ResourceSampler | None = None,
        gpus: GpuSampler | None = None,
    ) -> None:
        self.resources = resources or ResourceSampler(pid, clock=clock)
        self.gpu = gpus or GpuSampler(clock=clock, pids=self.resources.tree_pids)
        self._gpu_enabled = gpu
        self.gpu_status: dict[str, Any] = {"available": False, "reason": "not started"}

    def start(self) -> dict[str, Any]:
        """Open NVML (never raises); returns the GPU status for meta.json."""
        self.gpu_status = (
            self.gpu.start()
            if self._gpu_enabled
            else {"available": False, "reason": "disabled (--no-gpu)"}
        )
        return self.gpu_status

    def sample(self) -> None:
        self.resources.sample()
        self.gpu.sample()

    def drain(self) -> dict[str, list[tuple[Any, ...]]]:
        return {**self.resources.drain(), **self.gpu.drain()}

    def stop(self) -> dict[str, Any]:
        """Close NVML; returns figures for meta.json."""
        self.gpu.close()
        return {
            "peak_rss_bytes": self.resources.peak_rss,
            "gpu_notes": list(self.gpu.notes),
            "pids_seen": sorted(self.resources.pids_seen),
        }
