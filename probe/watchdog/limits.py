"""What the watchdog's options mean: sizes, durations, and the cgroup's memory limit;
and the cores a process may use (affinity, the cgroup's CPU quota and its throttling)."""

from __future__ import annotations

import os
import re
from pathlib import Path

__all__ = [
    "cgroup_cpu_quota",
    "cores_allowed",
    "cgroup_cpu_throttling",
    "cgroup_memory_limit",
    "memory_limit",
    "parse_duration",
    "parse_size",
]

_SIZE_UNITS = {
    "": 1,
    "b": 1,
    "k": 1000,
    "kb": 1000,
    "m": 1000**2,
    "mb": 1000**2,
    "g": 1000**3,
    "gb": 1000**3,
    "t": 1000**4,
    "tb": 1000**4,
    "kib": 1024,
    "mib": 1024**2,
    "gib": 1024**3,
    "tib": 1024**4,
}
_DURATION_UNITS = {"": 1.0, "ms": 1e-3, "s": 1.0, "m": 60.0, "min": 60.0, "h": 3600.0, "d": 86400.0}
# cgroup v1 says "no limit" with a huge number (PAGE_COUNTER_MAX in bytes)
_UNLIMITED = 1 << 62


def parse_size(text: str) -> int:
    """``"2GiB"`` -> 2147483648; ``"512MB"``, ``"1.5G"``, ``"4096"`` (bytes)."""
    m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*([a-zA-Z]*)\s*", text)
    unit = m.group(2).lower() if m else ""
    if not m or unit not in _SIZE_UNITS:
        raise ValueError(f"not a size: {text!r} (try 2GiB, 512MB, 1.5G)")
    value = float(m.group(1)) * _SIZE_UNITS[unit]
    if value <= 0:
        raise ValueError(f"a size must be positive: {text!r}")
    return int(value)


def parse_duration(text: str) -> float:
    """``"30m"`` -> 1800.0; ``"60s"``, ``"2h"``, ``"500ms"``, ``"15"`` (seconds)."""
    m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*([a-zA-Z]*)\s*", text)
    unit = m.group(2).lower() if m else ""
    if not m or unit not in _DURATION_UNITS:
        raise ValueError(f"not a duration: {text!r} (try 30m, 60s, 2h, 500ms)")
    return float(m.group(1)) * _DURATION_UNITS[unit]


def _read_limit(path: Path) -> int | None:
    try:
        text = path.read_text().strip()
    except OSError:
        return None
    if text == "max" or not text.isdigit():
        return None
    value = int(text)
    return value if 0 < value < _UNLIMITED else None


def _cgroup_dirs(pid: int | str, v1_controller: str, root: Path, proc: Path) -> list[Path]:
    """The cgroup folders ``pid`` runs in, for one controller (v2's unified hierarchy, or
    v1's ``v1_controller``), from its own up to the root. In a container the cgroup path
    may not exist under the mount (a namespaced view): the mount's own files then speak
    for it."""
    try:
        lines = (proc / str(pid) / "cgroup").read_text().splitlines()
    except OSError:
        return []
    dirs: list[Path] = []
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if controllers == "":  # v2 unified hierarchy
            base = root if (root / "cgroup.controllers").exists() else root / "unified"
        elif v1_controller in controllers.split(","):
            base = root / controllers
            if not base.exists():
                base = root / v1_controller
        else:
            continue
        parts = [p for p in path.split("/") if p]
        dirs += [base.joinpath(*parts[:depth]) for depth in range(len(parts), -1, -1)]
    return dirs


def cgroup_memory_limit(
    pid: int | str = "self", root: Path = Path("/sys/fs/cgroup"), proc: Path = Path("/proc")
) -> int | None:
    """The memory limit of the cgroup ``pid`` runs in (v2 ``memory.max``, v1
    ``memory.limit_in_bytes``), the tightest along the path to the root; None if unlimited
    or unreadable."""
    limits = [
        limit
        for folder in _cgroup_dirs(pid, "memory", root, proc)
        for name in ("memory.max", "memory.limit_in_bytes")
        if (limit := _read_limit(folder / name)) is not None
    ]
    return min(limits) if limits else None


def _cpu_quota_in(folder: Path) -> float | None:
    """The cores one cgroup folder's CPU quota allows, or None (no quota, no file)."""
    try:
        quota, period = (folder / "cpu.max").read_text().split()[:2]  # v2: "max 100000"
    except (OSError, ValueError):
        try:
            quota = (folder / "cpu.cfs_quota_us").read_text().strip()  # v1: -1 for none
            period = (folder / "cpu.cfs_period_us").read_text().strip()
        except OSError:
            return None
    try:
        cores = int(quota) / int(period)
    except (ValueError, ZeroDivisionError):
        return None  # "max", or not the format this reads
    return cores if cores > 0 else None


def cgroup_cpu_quota(
    pid: int | str = "self", root: Path = Path("/sys/fs/cgroup"), proc: Path = Path("/proc")
) -> float | None:
    """The cores the CPU quota of the cgroup ``pid`` runs in allows (v2 ``cpu.max``, v1
    ``cpu.cfs_quota_us`` over ``cpu.cfs_period_us``: a Kubernetes CPU limit, ``docker
    --cpus``), the tightest along the path to the root; None if there is none."""
    binding = _binding_quota(pid, root, proc)
    return binding[0] if binding else None


def _binding_quota(pid: int | str, root: Path, proc: Path) -> tuple[float, Path] | None:
    """The tightest CPU quota along the cgroup path of ``pid`` (cores) and its folder."""
    quotas = [(q, d) for d in _cgroup_dirs(pid, "cpu", root, proc) if (q := _cpu_quota_in(d))]
    return min(quotas, key=lambda qd: qd[0]) if quotas else None


def cores_allowed() -> dict[str, float | str]:
    """``cores_allowed``: the CPUs of this process's affinity mask (``taskset``, a
    cpuset), capped by its cgroup's CPU quota (a container's CPU limit); ``cpu_limit``
    says which limits it ("" when neither does: all the host's CPUs)."""
    count = os.cpu_count() or 1
    try:
        affinity = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not Linux
        affinity = count
    quota = cgroup_cpu_quota()
    cores, limit = float(count), ""
    if affinity < cores:
        cores, limit = float(affinity), "affinity"
    if quota is not None and quota < cores:
        cores, limit = quota, "cgroup quota"
    return {"cores_allowed": round(cores, 3), "cpu_limit": limit}


def cgroup_cpu_throttling(
    pid: int | str = "self", root: Path = Path("/sys/fs/cgroup"), proc: Path = Path("/proc")
) -> dict[str, float] | None:
    """The kernel's throttling counters of the CPU quota that binds the cgroup ``pid``
    runs in (the tightest along its path, as ``cgroup_cpu_quota``), from that folder's
    ``cpu.stat``: ``periods`` (quota periods in which it ran), ``throttled_periods``
    (those in which it used the quota up and waited for the next) and ``throttled_s``
    (that wait, summed over its CPUs: v1 ``throttled_time`` in ns, v2 ``throttled_usec``).
    None without a quota or where the counters cannot be read."""
    binding = _binding_quota(pid, root, proc)
    if binding is None:
        return None
    folder = binding[1]
    try:
        lines = (folder / "cpu.stat").read_text().splitlines()
        stat = {k: int(v) for k, v in (line.split() for line in lines if line.count(" ") == 1)}
    except (OSError, ValueError):
        return None
    if "nr_periods" not in stat or "nr_throttled" not in stat:
        return None
    if "throttled_usec" in stat:
        throttled_s = stat["throttled_usec"] / 1e6
    else:
        throttled_s = stat.get("throttled_time", 0) / 1e9
    return {
        "periods": float(stat["nr_periods"]),
        "throttled_periods": float(stat["nr_throttled"]),
        "throttled_s": throttled_s,
    }


def memory_limit(
    given: int | None, given_as: str, pid: int | str = "self"
) -> tuple[int | None, str | None]:
    """The limit the time-to-limit estimate uses, and where it came from: the one given
    (named ``given_as``), else the cgroup's of ``pid``, else none."""
    if given:
        return given, given_as
    cgroup = cgroup_memory_limit(pid)
    return cgroup, "cgroup" if cgroup else None
