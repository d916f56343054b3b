"""A diagnosed run and the views of it that outputs draw: the one model renderers read.

``analyze(run)`` -> ``Analysis``: the diagnosis, the run's metadata, and -- computed on
first use, so a verdict alone costs none of them -- the sampled call tree, the resource
series, the names of the threads and the run on one timeline (bounded by ``limits``).
Every output (terminal, diagnosis.json, the HTML report, and exporters) reads this
object, never the run's tables. The diagnosis too is made on first use: an export of the
timeline does not pay for it.
"""

from __future__ import annotations

from functools import cached_property
from pathlib import Path
from typing import Any

from probe.analyzers.breakdown import run_start_ns
from probe.analyzers.calltree import CallTree, call_tree
from probe.analyzers.diagnosis import Diagnosis, diagnose
from probe.analyzers.series import ResourceSeries, resource_series
from probe.analyzers.timeline import Timeline, TimelineLimits, timeline
from probe.rundir.reader import Run

__all__ = ["Analysis", "analyze"]


class Analysis:
    def __init__(
        self, run: Run, diagnosis: Diagnosis | None = None, *, limits: TimelineLimits | None = None
    ) -> None:
        self._run = run
        self.limits = limits or TimelineLimits()
        if diagnosis is not None:
            self.__dict__["diagnosis"] = diagnosis  # the cached property's value, given

    @cached_property
    def diagnosis(self) -> Diagnosis:
        return diagnose(self._run)

    @property
    def meta(self) -> dict[str, Any]:
        return self._run.meta

    @property
    def path(self) -> Path:
        """The run directory (where its outputs are written)."""
        return self._run.path

    @cached_property
    def t0_ns(self) -> int:
        """The run's time origin on the sampling clock: its start, as meta.json gives it
        (else the first reading of any table)."""
        t0 = run_start_ns(self._run)
        if t0 is not None:
            return t0
        tables = self._run.tables
        starts = [
            int(tables[t]["ts_ns"].min()) for t in ("samples", "resources") if not tables[t].empty
        ]
        if not tables["spans"].empty:
            starts.append(int(tables["spans"]["start_ns"].min()))
        return min(starts) if starts else 0

    @cached_property
    def call_tree(self) -> CallTree:
        t = self._run.tables
        brief = self.diagnosis.breakdown.brief_lock_stacks
        return call_tree(t["samples"], t["stacks"], t["frames"], brief)

    @cached_property
    def series(self) -> ResourceSeries:
        return resource_series(self._run.tables, self.t0_ns)

    @cached_property
    def thread_names(self) -> dict[int, str]:
        threads = self._run.tables["threads"].drop_duplicates("thread_id")
        return {int(t): str(n) for t, n in zip(threads["thread_id"], threads["name"], strict=True)}

    @cached_property
    def timeline(self) -> Timeline:
        meta = self._run.meta
        target = meta.get("target") or {}
        argv = [str(a) for a in target.get("argv") or [target.get("name") or ""]]
        command = " ".join([argv[0].rsplit("/", 1)[-1], *argv[1:]]).strip()
        return timeline(
            self._run.tables,
            root_pid=int(meta.get("pid") or 0),
            command=command,
            limits=self.limits,
            torch_windows=self._run.torch_windows,
            clock=meta.get("clock"),
        )

    @property
    def notes(self) -> list[str]:
        """What loading the run had to drop or repair."""
        return list(self._run.notes)


def analyze(
    run: Run, diagnosis: Diagnosis | None = None, *, limits: TimelineLimits | None = None
) -> Analysis:
    """The analysis of a loaded run (``probe.rundir.load``); ``diagnosis`` if already made
    (else made on first use); ``limits``: how much of the run its timeline holds."""
    return Analysis(run, diagnosis, limits=limits)
