"""Memory leaks: is the process leaking, since when, how fast, and what grows.

Five parts, one job each:

* ``trend``     the statistics (Theil-Sen, Mann-Kendall, floors, shapes), numpy only;
* ``rate``      a floor's rise against the request rate (a store bounded in time grows
                with it), which both verdicts weigh;
* ``recorded``  the verdict on a recorded series (``probe run``): leak / no leak /
                undetermined, judged per request when the requests are known;
* ``live``      the live detector (``probe watch``, ``probe.watchdog``), reading by
                reading in bounded memory;
* ``growth``    what grows: allocation sites, gc types, named containers, and how much
                of it small Python objects can hold (their live blocks).

``verdict`` holds the one result all of them speak, ``words`` what it says of what holds a
leak and what piles up beside it. Everything but ``growth``'s pandas helpers needs numpy
only: the in-process watchdog imports this package in the service. ``verdict`` and
``words`` need neither, and this package imports its parts when a name is first asked for:
a run with nothing to judge is told so without numpy's import (``analyzers.empty_run``).
``trend``, the function, is imported from its module (``leaks.trend``): lazily exported,
its name would resolve to the module once that is imported.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from probe.analyzers.leaks.growth import growing_sites as growing_sites
    from probe.analyzers.leaks.growth import growing_types as growing_types
    from probe.analyzers.leaks.growth import malloc_share as malloc_share
    from probe.analyzers.leaks.growth import piling_up as piling_up
    from probe.analyzers.leaks.growth import shares_of_the_rise as shares_of_the_rise
    from probe.analyzers.leaks.growth import small_objects_share as small_objects_share
    from probe.analyzers.leaks.growth import snapshot_growth as snapshot_growth
    from probe.analyzers.leaks.live import DetectorSettings as DetectorSettings
    from probe.analyzers.leaks.live import LiveLeakDetector as LiveLeakDetector
    from probe.analyzers.leaks.live import TracedStart as TracedStart
    from probe.analyzers.leaks.live import final_verdict as final_verdict
    from probe.analyzers.leaks.recorded import RecordedSettings as RecordedSettings
    from probe.analyzers.leaks.recorded import covering_the_run as covering_the_run
    from probe.analyzers.leaks.recorded import judge_recorded as judge_recorded
    from probe.analyzers.leaks.trend import Trend as Trend
    from probe.analyzers.leaks.trend import estimate_onset as estimate_onset
    from probe.analyzers.leaks.verdict import LEAK as LEAK
    from probe.analyzers.leaks.verdict import NO_LEAK as NO_LEAK
    from probe.analyzers.leaks.verdict import UNDETERMINED as UNDETERMINED
    from probe.analyzers.leaks.verdict import LeakVerdict as LeakVerdict
    from probe.analyzers.leaks.verdict import State as State
    from probe.analyzers.leaks.words import held_by as held_by
    from probe.analyzers.leaks.words import pile_notes as pile_notes
    from probe.analyzers.leaks.words import pile_text as pile_text
    from probe.analyzers.leaks.words import small_objects_part as small_objects_part
    from probe.analyzers.leaks.words import what_holds as what_holds

_WHERE = {
    "DetectorSettings": "probe.analyzers.leaks.live",
    "LEAK": "probe.analyzers.leaks.verdict",
    "LeakVerdict": "probe.analyzers.leaks.verdict",
    "LiveLeakDetector": "probe.analyzers.leaks.live",
    "NO_LEAK": "probe.analyzers.leaks.verdict",
    "RecordedSettings": "probe.analyzers.leaks.recorded",
    "State": "probe.analyzers.leaks.verdict",
    "TracedStart": "probe.analyzers.leaks.live",
    "Trend": "probe.analyzers.leaks.trend",
    "UNDETERMINED": "probe.analyzers.leaks.verdict",
    "covering_the_run": "probe.analyzers.leaks.recorded",
    "estimate_onset": "probe.analyzers.leaks.trend",
    "final_verdict": "probe.analyzers.leaks.live",
    "growing_sites": "probe.analyzers.leaks.growth",
    "growing_types": "probe.analyzers.leaks.growth",
    "held_by": "probe.analyzers.leaks.words",
    "judge_recorded": "probe.analyzers.leaks.recorded",
    "malloc_share": "probe.analyzers.leaks.growth",
    "pile_notes": "probe.analyzers.leaks.words",
    "pile_text": "probe.analyzers.leaks.words",
    "piling_up": "probe.analyzers.leaks.growth",
    "shares_of_the_rise": "probe.analyzers.leaks.growth",
    "small_objects_part": "probe.analyzers.leaks.words",
    "small_objects_share": "probe.analyzers.leaks.growth",
    "snapshot_growth": "probe.analyzers.leaks.growth",
    "what_holds": "probe.analyzers.leaks.words",
}

__all__ = [
    "LEAK",
    "NO_LEAK",
    "UNDETERMINED",
    "DetectorSettings",
    "LeakVerdict",
    "LiveLeakDetector",
    "RecordedSettings",
    "State",
    "Trend",
    "estimate_onset",
    "TracedStart",
    "final_verdict",
    "growing_sites",
    "growing_types",
    "held_by",
    "malloc_share",
    "pile_notes",
    "pile_text",
    "piling_up",
    "shares_of_the_rise",
    "small_objects_part",
    "small_objects_share",
    "covering_the_run",
    "judge_recorded",
    "snapshot_growth",
    "what_holds",
]


def __getattr__(name: str) -> Any:
    if name in _WHERE:
        return getattr(importlib.import_module(_WHERE[name]), name)
    raise AttributeError(f"module 'probe.analyzers.leaks' has no attribute {name!r}")
