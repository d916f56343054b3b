"""What the watchdog's options mean: sizes, durations, and the cgroup's memory limit."""

from __future__ import annotations

import re
from pathlib import Path

__all__ = ["cgroup_memory_limit", "memory_limit", "parse_duration", "parse_size"]

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


def cgroup_memory_limit(
    pid: int | str = "self", root: Path = Path("/sys/fs/cgroup"), proc: Path = Path("/proc")
) -> int | None:
    """The memory limit of the cgroup ``pid`` runs in (v2 ``memory.max``, v1
    ``memory.limit_in_bytes``), the tightest along the path to the root; None if unlimited
    or unreadable. In a container the cgroup path may not exist under the mount (a
    namespaced view): the mount's own files then speak for it."""
    try:
        lines = (proc / str(pid) / "cgroup").read_text().splitlines()
    except OSError:
        return None
    limits: list[int] = []
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if controllers == "":  # v2 unified hierarchy
            base, name = root, "memory.max"
            if not (base / "cgroup.controllers").exists():
                base = root / "unified"
        elif "memory" in controllers.split(","):
            base, name = root / "memory", "memory.limit_in_bytes"
        else:
            continue
        parts = [p for p in path.split("/") if p]
        for depth in range(len(parts), -1, -1):
            limit = _read_limit(base.joinpath(*parts[:depth], name))
            if limit is not None:
                limits.append(limit)
    return min(limits) if limits else None


def memory_limit(
    given: int | None, given_as: str, pid: int | str = "self"
) -> tuple[int | None, str | None]:
    """The limit the time-to-limit estimate uses, and where it came from: the one given
    (named ``given_as``), else the cgroup's of ``pid``, else none."""
    if given:
        return given, given_as
    cgroup = cgroup_memory_limit(pid)
    return cgroup, "cgroup" if cgroup else None
