"""``probe diff --applied``: which of RUN_A's recommendations an id names (``ID``: the
highest-ranked of that id; ``ID@STAGE``: the one on that stage), where two stages have
the same fix."""

from __future__ import annotations

from types import SimpleNamespace

from probe.analyzers.diff import _chosen, _named
from probe.analyzers.recommendations import Recommendation


def rec(rid: str, stage: str, speedup: float) -> Recommendation:
    return Recommendation(rid, stage, speedup, 0.5, 4.0, 2.0, "title", "how")


# ranked as the route_features run's were: vectorize_python on two loops, listed 1st and 3rd
FEATURES = rec("vectorize_python", "features (route_features.py)", 1.88)
CATALOGUE = rec("vectorize_python", "load_catalogue (route_features.py)", 1.49)
MINOR = rec("vectorize_python", "score (route_features.py)", 1.04)
INSTANCES = rec("multi_instance", "features (route_features.py)", 1.79)
A = SimpleNamespace(recommendations=[FEATURES, INSTANCES, CATALOGUE], minor_recommendations=[MINOR])


def test_an_id_two_stages_share_names_the_highest_ranked_not_the_last():
    chosen, how, unmatched = _chosen(A, ["vectorize_python"])  # type: ignore[arg-type]
    assert chosen == [FEATURES] and how == "given" and unmatched == ""


def test_id_at_stage_names_that_stage_s_fix_by_its_full_name_or_its_function():
    assert _chosen(A, ["vectorize_python@load_catalogue"])[0] == [CATALOGUE]  # type: ignore[arg-type]
    full = "vectorize_python@load_catalogue (route_features.py)"
    assert _chosen(A, [full])[0] == [CATALOGUE]  # type: ignore[arg-type]
    assert _chosen(A, ["vectorize_python@score"])[0] == [MINOR]  # type: ignore[arg-type]


def test_an_unknown_stage_is_said_with_what_the_diagnosis_has_by_stage_where_ids_repeat():
    chosen, how, unmatched = _chosen(A, ["vectorize_python@rank"])  # type: ignore[arg-type]
    assert chosen == [] and how == ""
    assert unmatched.startswith("RUN_A's diagnosis has no recommendation vectorize_python@rank")
    assert "vectorize_python@load_catalogue (route_features.py)" in unmatched
    assert ", multi_instance," in unmatched  # an id no other stage has goes bare


def test_the_comparison_names_the_stage_of_a_fix_two_stages_share():
    # the diff's text and JSON say which vectorize_python it held the run to
    assert _named([CATALOGUE], [*A.recommendations, *A.minor_recommendations]) == [
        "vectorize_python@load_catalogue (route_features.py)"
    ]
    assert _named([INSTANCES], A.recommendations) == ["multi_instance"]
