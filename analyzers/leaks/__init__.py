"""Memory leaks: is the process leaking, since when, how fast, and what grows.

Four parts, one job each:

* ``trend``     the statistics (Theil-Sen, Mann-Kendall, floors, shapes), numpy only;
* ``recorded``  the verdict on a recorded series (``probe run``): leak / no leak /
                undetermined, judged per request when the requests are known;
* ``live``      the live detector (``probe watch``, ``probe.watchdog``), reading by
                reading in bounded memory;
* ``growth``    what grows: allocation sites, gc types, named containers, and how much
                of it small Python objects can hold (their live blocks).

``verdict`` holds the one result all of them speak. Everything but ``growth``'s pandas
helpers needs numpy only: the in-process watchdog imports this package in the service.
"""

from probe.analyzers.leaks.growth import (
    growing_sites,
    growing_types,
    held_by,
    malloc_share,
    pile_notes,
    pile_text,
    piling_up,
    shares_of_the_rise,
    small_objects_part,
    small_objects_share,
    snapshot_growth,
    what_holds,
)
from probe.analyzers.leaks.live import (
    DetectorSettings,
    LiveLeakDetector,
    TracedStart,
    final_verdict,
)
from probe.analyzers.leaks.recorded import (
    RecordedSettings,
    covering_the_run,
    judge_recorded,
)
from probe.analyzers.leaks.trend import Trend, estimate_onset, trend
from probe.analyzers.leaks.verdict import LEAK, NO_LEAK, UNDETERMINED, LeakVerdict, State

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
    "trend",
    "what_holds",
]
