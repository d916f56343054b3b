"""Resources over time: the series the report's charts draw and counter exporters write.

``resource_series(tables, t0_ns)`` -> ``ResourceSeries``, each series in base units
(cores, bytes, bytes per second, percent) against seconds since ``t0_ns``. Rates come
from the cumulative counters of the process tree (summed over its processes at each
reading); GPU utilisation is per device; memory is the profiled process's own RSS, and
what tracemalloc traced with ``--memory``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

__all__ = ["ResourceSeries", "Series", "resource_series"]


@dataclass(frozen=True)
class Series:
    t_s: np.ndarray  # seconds since the run's t0
    values: np.ndarray

    def __len__(self) -> int:
        return len(self.t_s)


@dataclass(frozen=True)
class ResourceSeries:
    process_cores: Series | None = None  # CPU of the process tree, in cores
    disk_bytes_per_s: Series | None = None  # read + written by the tree
    gpu_util_percent: dict[int, Series] = field(default_factory=dict)  # per device
    host_cpu_percent: Series | None = None
    rss_bytes: Series | None = None  # the profiled process (the tree's root)
    traced_bytes: Series | None = None  # tracemalloc's total per snapshot (--memory)


def _rates(resources: pd.DataFrame, t0_ns: int) -> tuple[Series, Series]:
    tick = (
        resources.groupby("ts_ns")[["cpu_user_s", "cpu_system_s", "read_bytes", "write_bytes"]]
        .sum()
        .sort_index()
    )
    t = (tick.index.to_numpy() - t0_ns) / 1e9
    dt = np.diff(t)
    step = np.where(dt > 0, dt, np.nan)
    cores = np.diff(tick["cpu_user_s"] + tick["cpu_system_s"]) / step
    io = np.diff(tick["read_bytes"] + tick["write_bytes"]) / step
    return Series(t[1:], cores), Series(t[1:], io)


def resource_series(tables: dict[str, pd.DataFrame], t0_ns: int) -> ResourceSeries:
    resources, gpu = tables["resources"], tables["gpu"]
    system, sites = tables["system"], tables["memory_sites"]
    cores = disk = rss = host = traced = None
    if not resources.empty:
        cores, disk = _rates(resources, t0_ns)
        root = resources[resources["is_root"]]
        if not root.empty:
            rss = Series(
                root["ts_ns"].to_numpy() / 1e9 - t0_ns / 1e9,
                root["rss_bytes"].to_numpy(dtype="float64"),
            )
    gpus = {
        int(device): Series(
            (part["ts_ns"].to_numpy() - t0_ns) / 1e9,
            part["util_percent"].to_numpy(dtype="float64"),
        )
        for device, part in gpu.groupby("gpu")
    }
    if not system.empty:
        host = Series(
            (system["ts_ns"].to_numpy() - t0_ns) / 1e9,
            system["cpu_percent"].to_numpy(dtype="float64"),
        )
    if not sites.empty:
        per = sites.groupby("snapshot").agg(ts=("ts_ns", "max"), size=("size_bytes", "sum"))
        traced = Series(
            ((per["ts"] - t0_ns) / 1e9).to_numpy(), per["size"].to_numpy(dtype="float64")
        )
    return ResourceSeries(
        process_cores=cores,
        disk_bytes_per_s=disk,
        gpu_util_percent=gpus,
        host_cpu_percent=host,
        rss_bytes=rss,
        traced_bytes=traced,
    )
