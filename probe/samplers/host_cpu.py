"""The host's CPU counters as /proc/stat has them, with no psutil: ``probe run`` reads
them as it starts its sidecar, in the profiled process, which imports no psutil (~10 ms
of its start-up)."""

from __future__ import annotations

import os
from types import SimpleNamespace
from typing import Any

__all__ = ["host_cpu_jiffies", "host_times_from_jiffies"]


# /proc/stat's first line, in its order (proc(5)): the names psutil.cpu_times gives them
_HOST_CPU_FIELDS = (
    "user",
    "nice",
    "system",
    "idle",
    "iowait",
    "irq",
    "softirq",
    "steal",
    "guest",
    "guest_nice",
)


def host_cpu_jiffies(stat: str = "/proc/stat") -> str | None:
    """The host's CPU counters now, as /proc/stat's first line has them (ticks,
    comma-separated); None where there is no such file. Read by ``probe run`` as it
    starts its sidecar: the sidecar's first reading of the host counts from here, not
    from its own start, which a saturated host delays by seconds (niced, it imported for
    1.2 s of a 2.4 s run beside a busy loop, and for all of another: its only reading
    came after the target's end, 2026-11-28)."""
    try:
        with open(stat, encoding="ascii") as f:
            fields = f.readline().split()
    except OSError:
        return None
    if not fields or fields[0] != "cpu" or not all(v.isdigit() for v in fields[1:]):
        return None
    return ",".join(fields[1 : len(_HOST_CPU_FIELDS) + 1])


def host_times_from_jiffies(jiffies: str) -> Any:
    """``host_cpu_jiffies``'s counters as ``psutil.cpu_times`` gives them (seconds, its
    field names), to start the sampler's first interval at; None where unreadable."""
    try:
        ticks = [int(v) for v in jiffies.split(",")]
    except ValueError:
        return None
    if len(ticks) < 4:  # user, nice, system, idle at least
        return None
    hz = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
    names = _HOST_CPU_FIELDS[: len(ticks)]
    return SimpleNamespace(_fields=names, **{n: t / hz for n, t in zip(names, ticks, strict=False)})
