"""The verdict's line of fixes under the bar: a fix whose id a listed one shares names its
stage, so that it does not read as that fix again."""

from __future__ import annotations

from types import SimpleNamespace

from probe.analyzers.recommendations import Recommendation
from probe.reports.terminal import _minor_lines


def fix(id_: str, stage: str, speedup: float) -> Recommendation:
    return Recommendation(id_, stage, speedup, 0.5, 2.0, 2.0, "title", "how")


def test_a_fix_under_the_bar_with_a_listed_fix_s_id_names_its_stage_and_others_do_not():
    # a process pool's job (tests/threads_corpus/services/pool_score.py): the workers'
    # function vectorised 3.3x, listed; the parent's list comprehension 1.05x, under it
    d = SimpleNamespace(
        recommendations=[fix("vectorize_python", "score_document (pool_score.py)", 3.27)],
        minor_recommendations=[
            fix("vectorize_python", "main (pool_score.py)", 1.053),
            fix("lazy_init", "load (app.py)", 1.2),
        ],
    )
    assert _minor_lines(d) == ["vectorize_python in main (pool_score.py) 1.05×", "lazy_init 1.20×"]
