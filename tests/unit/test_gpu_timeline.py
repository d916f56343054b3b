"""GPU busy/idle time and each idle gap's cause (``analyzers.gpu_timeline``), on traces
declared here event by event: what the host did while the GPU waited decides the cause."""

from __future__ import annotations

import pandas as pd
import pytest

from probe.analyzers.gpu_timeline import gpu_timeline

US = 1000  # ns


def kernels(*spans: tuple[float, float, int | None]) -> pd.DataFrame:
    """(start us, duration us, correlation) each, on device 0."""
    return pd.DataFrame(
        {
            "ts_ns": [int(s * US) for s, _, _ in spans],
            "dur_ns": [int(d * US) for _, d, _ in spans],
            "device": [0] * len(spans),
            "correlation": pd.array([c for _, _, c in spans], dtype="Int64"),
        }
    )


def calls(*spans: tuple[str, float, float, int | None], tid: int = 1) -> pd.DataFrame:
    """Runtime calls on host thread ``tid``: (name, start us, duration us, correlation)."""
    return pd.DataFrame(
        {
            "ts_ns": [int(s * US) for _, s, _, _ in spans],
            "dur_ns": [int(d * US) for _, _, d, _ in spans],
            "name": [n for n, _, _, _ in spans],
            "tid": [tid] * len(spans),
            "correlation": pd.array([c for _, _, _, c in spans], dtype="Int64"),
        }
    )


def named(*spans: tuple[str, float, float], tid: int = 1) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "ts_ns": [int(s * US) for _, s, _ in spans],
            "dur_ns": [int(d * US) for _, _, d in spans],
            "name": [n for n, _, _ in spans],
            "tid": [tid] * len(spans),
        }
    )


NO_COPIES = kernels()
NOTHING = named()


def causes(k, rt, ops=NOTHING, annotations=NOTHING) -> list[str]:
    return list(gpu_timeline(k, NO_COPIES, rt, ops, annotations).gaps["cause"])


def test_busy_time_is_the_union_of_overlapping_work_over_the_window():
    # two streams overlap on [10, 20]: busy 0-30 and 40-50 of a 50-us window
    k = kernels((0, 20, 1), (10, 20, 2), (40, 10, 3))
    tl = gpu_timeline(k, NO_COPIES, calls(), NOTHING, NOTHING)
    d = tl.devices.iloc[0]
    assert d["window_ns"] == 50 * US and d["busy_ns"] == 40 * US
    assert d["busy_share"] == pytest.approx(0.8)
    assert list(tl.gaps["dur_ns"]) == [10 * US]


def test_many_small_kernels_waiting_on_their_launches_are_launch_bound():
    # each launch takes 5 us of host time, each kernel 2 us: the GPU waits on launches
    k = kernels(*[(6 * i + 5, 2, i) for i in range(20)])
    rt = calls(*[("cudaLaunchKernel", 6 * i, 5, i) for i in range(20)])
    got = causes(k, rt)
    assert got and set(got) == {"launch"}


def test_a_gap_after_a_synchronisation_is_the_synchronisation_s():
    # the host waits in cudaStreamSynchronize until the kernel ends at 100 us, then
    # post-processes for 200 us before the next launch: the sync exposed it all
    k = kernels((0, 100, 1), (305, 50, 2))
    rt = calls(
        ("cudaLaunchKernel", 0, 3, 1), ("cudaStreamSynchronize", 5, 96, None),
        ("cudaLaunchKernel", 300, 4, 2),
    )  # fmt: skip
    assert causes(k, rt) == ["sync"]


def test_host_work_before_a_launch_is_host_time_and_a_data_loader_s_is_input():
    k = kernels((0, 100, 1), (405, 50, 2))
    rt = calls(("cudaLaunchKernel", 0, 3, 1), ("cudaLaunchKernel", 400, 4, 2))
    preprocess = named(("aten::resize", 110, 280))
    assert causes(k, rt, ops=preprocess) == ["host"]
    loader = named(("enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", 105, 290))
    assert causes(k, rt, annotations=loader) == ["input"]


def test_allocation_and_module_loading_are_warm_up_not_a_steady_state():
    k = kernels((0, 10, 1), (5_020, 10, 2))
    rt = calls(
        ("cudaLaunchKernel", 0, 3, 1), ("cudaMalloc", 12, 3_000, None),
        ("cuModuleLoadData", 3_015, 1_990, None), ("cudaLaunchKernel", 5_010, 5, 2),
    )  # fmt: skip
    tl = gpu_timeline(k, NO_COPIES, rt, NOTHING, NOTHING)
    assert list(tl.gaps["cause"]) == ["warm_up"] and not tl.steady


def test_work_launched_before_the_gap_waited_on_the_gpu_side():
    # both launched at once; the second kernel starts late (waiting on an event)
    k = kernels((0, 10, 1), (60, 10, 2))
    rt = calls(("cudaLaunchKernel", 0, 3, 1), ("cudaLaunchKernel", 4, 3, 2))
    assert causes(k, rt) == ["queued"]


def test_a_kernel_whose_launch_is_not_in_the_trace_leaves_its_gap_unknown():
    k = kernels((0, 10, None), (60, 10, 99))
    assert causes(k, calls(("cudaLaunchKernel", 0, 3, 1))) == ["unknown"]


def test_idle_time_by_cause_sums_the_gaps_over_the_window():
    k = kernels((0, 100, 1), (405, 95, 2))
    rt = calls(("cudaLaunchKernel", 0, 3, 1), ("cudaLaunchKernel", 400, 4, 2))
    by = gpu_timeline(k, NO_COPIES, rt, NOTHING, NOTHING).by_cause.set_index("cause")
    assert by.loc["host", "idle_ns"] == 305 * US and by.loc["host", "share"] == pytest.approx(0.61)
    assert by["idle_ns"].sum() == 305 * US


def test_a_trace_without_gpu_work_has_no_timeline_and_no_error():
    tl = gpu_timeline(NO_COPIES, NO_COPIES, calls(), NOTHING, NOTHING)
    assert tl.devices.empty and tl.gaps.empty and tl.steady


def test_dispatching_the_ops_that_launch_is_the_framework_s_time_cpu_work_is_the_host_s():
    # the gap 100-405 us: the host is inside the next op, which launches the kernel at its
    # end (eager mode's per-op cost); a CPU op that launches nothing is other host work
    k = kernels((0, 100, 1), (405, 50, 2))
    rt = calls(("cudaLaunchKernel", 0, 3, 1), ("cudaLaunchKernel", 400, 4, 2))
    dispatching = named(("aten::linear", 105, 300), ("aten::addmm", 110, 295))
    assert causes(k, rt, ops=dispatching) == ["framework"]
    cpu_only = named(("aten::resize", 105, 280))  # ends before the launch: launches nothing
    assert causes(k, rt, ops=cpu_only) == ["host"]
