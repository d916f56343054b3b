"""The torch.profiler windows in a run's diagnosis: which window speaks for the run, and
its fixes re-estimated over the part of the run the windows represent."""

from __future__ import annotations

import pandas as pd
import pytest

from probe.analyzers.recommendations import Recommendation
from probe.analyzers.torch_windows import torch_windows_diagnosis
from probe.analyzers.trace_diagnosis import TraceDiagnosis


def window(
    summary: str, recs: list[Recommendation], *, gpu: bool = True, minor=()
) -> TraceDiagnosis:
    empty = pd.DataFrame()
    return TraceDiagnosis(
        run={"gpu": gpu}, primary={"summary": summary}, findings=[], recommendations=recs,
        kernels=empty, idle=empty, copies=empty, stages=empty,
        minor_recommendations=list(minor),
    )  # fmt: skip


def kv(p: float, s: float) -> Recommendation:
    return Recommendation(
        id="kv_cache", stage="", estimated_speedup=1 / ((1 - p) + p / s), p=p, s=s,
        ceiling=1 / (1 - p), title="Cache the keys and values", how="...",
    )  # fmt: skip


def test_the_window_with_most_ops_speaks_for_the_run_and_its_fix_counts_on_the_steady_part():
    small = ({"file": "torch/window-1.json", "start_s": 2.0, "end_s": 2.1}, window("a", []), 10)
    big = (
        {"file": "torch/window-2.json", "start_s": 12.0, "end_s": 12.1},
        window("b", [kv(0.8, 2.0)]),
        900,
    )
    t = torch_windows_diagnosis([small, big], forward_at_s=5.0, wall_s=10.0)
    assert t is not None and t.chosen == "torch/window-2.json"
    assert [w["ops"] for w in t.windows] == [10, 900] and t.windows[1]["limit"] == "b"
    [r] = t.recommendations
    # half the run is after the first forward pass: p = 0.8 * 0.5 on the run
    assert r.p == pytest.approx(0.4) and r.estimated_speedup == pytest.approx(1 / (0.6 + 0.2))
    assert r.ceiling == pytest.approx(1 / 0.6) and r.evidence["window_estimate"] == pytest.approx(
        1 / 0.6, abs=1e-3
    )
    assert t.to_dict()["steady_share"] == 0.5


def test_the_pauses_the_windows_made_are_not_counted_as_the_run_s_steady_work():
    # a 10-s run, its first forward pass at 2 s, its window's opening and closing stopped
    # the target 2 s: unprofiled it runs 8 s, of which 6 s are steady (0.75, not 0.8)
    entry = {"file": "torch/window-1.json", "open_s": 0.5, "stall_s": 1.5}
    t = torch_windows_diagnosis(
        [(entry, window("a", [kv(0.8, 2.0)]), 9)], forward_at_s=2.0, wall_s=10.0
    )
    assert t is not None and t.steady_share == pytest.approx(0.75)
    assert t.recommendations[0].p == pytest.approx(0.6)


def test_a_window_s_fix_under_the_bar_is_re_estimated_for_the_run_beside_the_others():
    # the window's KV cache at 1.2x (a noisy window of the decoder) is not dropped: the
    # run ranks it with its own fixes, under 1.25x among those proposed beside them
    entry = {"file": "torch/window-1.json"}
    small = kv(0.3, 2.0)  # 1 / (0.7 + 0.15) = 1.18x
    assert small.estimated_speedup < 1.25
    t = torch_windows_diagnosis(
        [(entry, window("a", [], minor=[small]), 9)], forward_at_s=0.0, wall_s=10.0
    )
    assert t is not None
    [r] = t.recommendations
    assert r.id == "kv_cache" and r.evidence["window_estimate"] == pytest.approx(1 / 0.85, abs=1e-3)


def test_no_window_read_is_no_torch_block():
    assert torch_windows_diagnosis([], forward_at_s=1.0, wall_s=10.0) is None


def test_a_window_without_gpu_work_is_listed_as_host_ops_not_as_a_gpu_limit():
    cpu = ({"file": "torch/window-1.json"}, window("No GPU work in this trace", [], gpu=False), 5)
    t = torch_windows_diagnosis([cpu], forward_at_s=1.0, wall_s=10.0)
    assert t is not None and t.windows[0]["limit"] == "no GPU work: the host's ops only"
    block = t.to_dict()
    assert block["cpu"]["ops"] == [] and block["gpu"]["kernels"] == []


def test_the_run_s_full_collections_after_the_first_forward_pass_are_not_steady_work():
    # a 10-s run, its first forward pass at 2 s, 3 s of full collections after it: the
    # window's shares are of its time outside collections, which is 5 s of the run's 10
    entry = {"file": "torch/window-1.json"}
    t = torch_windows_diagnosis(
        [(entry, window("a", [kv(0.8, 2.0)]), 9)], forward_at_s=2.0, wall_s=10.0,
        collected_s=3.0,
    )  # fmt: skip
    assert t is not None and t.steady_share == pytest.approx(0.5)
    assert t.recommendations[0].p == pytest.approx(0.4)
