"""What limits a traced window (``analyzers.trace_limits``): the GPU or the host feeding
it, and how, on GPU timelines declared here as their busy time and idle time by cause."""

from __future__ import annotations

import pandas as pd
import pytest

from probe.analyzers.copies import read_copies
from probe.analyzers.gpu_timeline import GAP_CAUSES, GpuTimeline
from probe.analyzers.trace_limits import trace_findings

NO_COPIES = read_copies(
    pd.DataFrame(columns=["name", "bytes", "dur_ns", "ts_ns", "correlation"]),
    pd.DataFrame(columns=["name", "correlation"]),
)


def timeline(busy: float, **idle: float) -> GpuTimeline:
    """A 1-s window, ``busy`` of it busy, the rest idle by cause (shares of the window)."""
    window = 1_000_000_000
    devices = pd.DataFrame(
        [{"device": 0, "start_ns": 0, "window_ns": window, "busy_ns": int(busy * window),
          "busy_share": busy}]
    )  # fmt: skip
    by_cause = pd.DataFrame(
        [{"cause": c, "gaps": 1, "idle_ns": int(idle.get(c, 0.0) * window),
          "share": idle.get(c, 0.0)} for c in GAP_CAUSES]
    )  # fmt: skip
    return GpuTimeline(devices, pd.DataFrame(), by_cause)


def test_a_gpu_busy_most_of_the_window_is_the_limit():
    primary, *rest = trace_findings(timeline(0.9, host=0.1), NO_COPIES)
    assert (primary.subkind, primary.share) == ("gpu_compute", 0.9)
    assert primary.confidence == pytest.approx(0.8)
    assert [f.evidence["cause"] for f in rest] == ["host"]  # 10%: a finding of its own


def test_idle_mostly_in_launch_calls_is_launch_bound_and_host_work_starves_the_gpu():
    (launch, *_) = trace_findings(timeline(0.2, launch=0.6, host=0.2), NO_COPIES)
    assert launch.subkind == "launch_bound" and launch.share == pytest.approx(0.6)
    assert launch.confidence == pytest.approx(0.6 * 0.75)  # clear split, cause 3/4 of idle
    (starved, loader) = trace_findings(timeline(0.3, host=0.45, input=0.25), NO_COPIES)
    assert (starved.subkind, starved.evidence["cause"]) == ("gpu_starved", "host")
    assert (loader.subkind, loader.evidence["cause"]) == ("gpu_starved", "input")


def test_an_even_split_is_no_verdict_either_way():
    (primary, *_) = trace_findings(timeline(0.51, host=0.49), NO_COPIES)
    assert primary.confidence < 0.05


def test_a_window_mostly_warming_up_is_said_to_be_warm_up_not_diagnosed():
    (primary, *_) = trace_findings(timeline(0.05, warm_up=0.9, host=0.05), NO_COPIES)
    assert primary.subkind == "warm_up" and primary.share == pytest.approx(0.9)


def test_synchronous_copies_holding_a_share_of_the_window_are_a_transfer_finding():
    copies = read_copies(
        pd.DataFrame({"name": ["Memcpy HtoD (Pageable -> Device)"], "bytes": [1 << 30],
                      "dur_ns": [100_000_000], "ts_ns": [0],
                      "correlation": pd.array([1], dtype="Int64")}),
        pd.DataFrame({"name": ["cudaMemcpyAsync"], "correlation": pd.array([1], "Int64")}),
    )  # fmt: skip
    findings = trace_findings(timeline(0.8, host=0.2), copies)
    assert [f.subkind for f in findings] == ["gpu_compute", "gpu_starved", "transfer"]


def test_no_gpu_work_no_findings():
    empty = GpuTimeline(pd.DataFrame(), pd.DataFrame(), pd.DataFrame())
    assert trace_findings(empty, NO_COPIES) == []
