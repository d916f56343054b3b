"""speedscope renderer: the stack samples as sampled profiles (speedscope's file format,
https://www.speedscope.app/file-format-schema.json).

Two profiles per thread, from the run's timeline (``probe.analyzers.timeline``): its
on-CPU time and its waiting, each sample weighted by the time the analysis attributes to
it (``analyzers.attribution``: the thread's exact CPU shared among the samples caught
running, the rest of its wall time waited), the waiting ones ending in a frame that says
on what: ``[waiting: network]``, ``[waiting: gil]``. Samples stay in time order,
consecutive identical stacks merged, so speedscope's time-order view is the thread's own;
weights are in nanoseconds. A profile
that would still hold more than ``MAX_ENTRIES`` stacks is aggregated, one entry per
distinct stack (its weights exact, its time order gone: the profile's name says so).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from probe import __version__

if TYPE_CHECKING:
    from probe.analyzers.analysis import Analysis
    from probe.analyzers.timeline import Timeline

__all__ = ["SpeedscopeProfile"]

_SCHEMA = "https://www.speedscope.app/file-format-schema.json"
# An entry costs ~3 bytes a frame plus its weight; 5,000 entries of 30 frames ~0.5 MB a
# profile (measured on the hour-long synthetic run, benchmarks/export_bounds.py), so a
# dozen threads' profiles stay well under 10 MB
MAX_ENTRIES = 5_000


@dataclass(frozen=True)
class SpeedscopeProfile:
    format: ClassVar[str] = "speedscope"
    filename: ClassVar[str] = "profile.speedscope.json"

    timeline: Timeline

    @classmethod
    def from_analysis(cls, analysis: Analysis) -> SpeedscopeProfile:
        return cls(analysis.timeline)

    def render(self) -> str:
        t = self.timeline
        frames = _Frames(t)
        names = dict(zip(t.threads["thread_id"], t.threads["name"], strict=True))
        profiles: list[dict[str, Any]] = []
        for tid, rows in t.samples.groupby("thread_id", sort=True):
            label = f"{names.get(tid) or 'thread'} ({tid})"
            profiles.extend(_profiles(label, rows, frames))
        doc = {
            "$schema": _SCHEMA,
            "name": " · ".join(t.processes["name"].astype(str).head(1).tolist()) or "probe",
            "exporter": f"probe {__version__}",
            "activeProfileIndex": 0,
            "shared": {"frames": frames.shared},
            "profiles": profiles,
        }
        return json.dumps(doc, separators=(",", ":"))


class _Frames:
    """speedscope's shared frame list: one entry per function and file, plus the wait
    frames; the index of each stack's frames, root first."""

    def __init__(self, t: Timeline) -> None:
        self.shared: list[dict[str, Any]] = []
        self._index: dict[tuple[str, str, int], int] = {}
        self._timeline = t
        self._paths: dict[int, list[int]] = {}

    def _of(self, name: str, file: str = "", line: int = 0) -> int:
        key = (name, file, line)
        if key not in self._index:
            self._index[key] = len(self.shared)
            entry: dict[str, Any] = {"name": name}
            if file:
                entry["file"] = file
            if line > 0:
                entry["line"] = line
            self.shared.append(entry)
        return self._index[key]

    def path(self, stack: int) -> list[int]:
        if stack not in self._paths:
            t = self._timeline
            self._paths[stack] = [self._of(*t.frame(f)) for f in t.stacks.get(stack, ())]
        return self._paths[stack]

    def wait(self, reason: str) -> int:
        return self._of(f"[waiting: {reason or 'unknown'}]")


def _profiles(label: str, rows: Any, frames: _Frames) -> list[dict[str, Any]]:
    rows = rows.sort_values("ts_ns", kind="stable")
    stacks = rows["stack_id"].to_numpy()
    reasons = rows["waited_on"].fillna("").astype(str).to_numpy()
    cpu = rows["on_cpu_ns"].to_numpy().round().astype("int64").clip(min=0)
    off = rows["waited_ns"].to_numpy().round().astype("int64").clip(min=0)
    out = []
    for kind, weights, waiting in (("on-CPU", cpu, False), ("waiting", off, True)):
        samples: list[list[int]] = []
        values: list[int] = []
        last: tuple[int, str] | None = None
        for stack, reason, weight in zip(stacks.tolist(), reasons.tolist(), weights.tolist(),
                                         strict=True):  # fmt: skip
            if weight <= 0:
                continue
            key = (stack, reason if waiting else "")
            if key == last:
                values[-1] += weight
                continue
            path = frames.path(stack)
            samples.append([*path, frames.wait(reason)] if waiting else path)
            values.append(weight)
            last = key
        name = f"{label} · {kind}"
        if len(samples) > MAX_ENTRIES:
            samples, values = _aggregated(samples, values)
            name += " (aggregated by stack: time order not kept)"
        if samples:
            out.append({"type": "sampled", "name": name, "unit": "nanoseconds",
                        "startValue": 0, "endValue": int(np.sum(values)),
                        "samples": samples, "weights": values})  # fmt: skip
    return out


def _aggregated(samples: list[list[int]], values: list[int]) -> tuple[list[list[int]], list[int]]:
    total: dict[tuple[int, ...], int] = {}
    for path, weight in zip(samples, values, strict=True):
        key = tuple(path)
        total[key] = total.get(key, 0) + weight
    return [list(k) for k in total], list(total.values())
