"""Each span's GPU time from what it launched (``analyzers.device_time``), on event
sequences declared here: async launches, a later synchronisation, a helper thread."""

from __future__ import annotations

import pandas as pd
import pytest

from probe.analyzers.device_time import device_time, device_time_by_name

US = 1000


def table(rows: list[dict]) -> pd.DataFrame:
    return pd.DataFrame(rows)


def span(name: str, tid: int, start_us: float, dur_us: float) -> dict:
    return {"name": name, "tid": tid, "ts_ns": int(start_us * US), "dur_ns": int(dur_us * US)}


def launch(tid: int, at_us: float, corr: int, name: str = "cudaLaunchKernel") -> dict:
    return {"name": name, "tid": tid, "ts_ns": int(at_us * US), "dur_ns": 5 * US,
            "correlation": corr}  # fmt: skip


def kernel(start_us: float, dur_us: float, corr: int) -> dict:
    return {"ts_ns": int(start_us * US), "dur_ns": int(dur_us * US), "correlation": corr}


NO_COPIES = pd.DataFrame(columns=["ts_ns", "dur_ns", "correlation"])


def test_a_stage_that_launches_async_work_gets_its_gpu_time_not_the_stage_that_syncs():
    # "model" launches 3 kernels of 1 ms and returns after 30 us; "postprocess" calls
    # .item(): its host time holds the wait for the model's kernels
    spans = table([span("model", 1, 0, 30), span("postprocess", 1, 30, 3_000)])
    runtime = table(
        [launch(1, 5, 1), launch(1, 12, 2), launch(1, 19, 3),
         {**launch(1, 31, 4, "cudaStreamSynchronize"), "dur_ns": 2_990 * US}]
    )  # fmt: skip
    kernels = table([kernel(10, 1_000, 1), kernel(1_010, 1_000, 2), kernel(2_010, 1_000, 3)])
    out = device_time(spans, runtime, kernels, NO_COPIES).set_index("name")
    assert out.loc["model", "device_ns"] == 3_000 * US and out.loc["model", "launches"] == 3
    assert out.loc["model", "host_ns"] == 30 * US
    assert out.loc["model", "lag_ns"] == pytest.approx((3_010 - 30) * US)
    assert out.loc["postprocess", "device_ns"] == 0


def test_work_a_helper_thread_launches_inside_one_thread_s_span_is_that_span_s():
    # autograd's engine thread (tid 9, no spans) launches the backward while "step" waits
    spans = table([span("step", 1, 0, 1_000)])
    runtime = table([launch(1, 10, 1), launch(9, 500, 2)])
    kernels = table([kernel(20, 100, 1), kernel(510, 300, 2)])
    out = device_time(spans, runtime, kernels, NO_COPIES)
    assert out.loc[0, "device_ns"] == 400 * US and out.loc[0, "launches"] == 2


def test_helper_work_while_two_threads_have_spans_open_belongs_to_neither():
    spans = table([span("request-a", 1, 0, 1_000), span("request-b", 2, 0, 1_000)])
    runtime = table([launch(1, 10, 1), launch(2, 10, 2), launch(9, 500, 3)])
    kernels = table([kernel(20, 100, 1), kernel(20, 100, 2), kernel(510, 300, 3)])
    out = device_time(spans, runtime, kernels, NO_COPIES).set_index("name")
    assert list(out["device_ns"]) == [100 * US, 100 * US]


def test_spans_by_name_put_host_and_device_time_side_by_side():
    spans = table([span("model", 1, 0, 30), span("model", 1, 100, 30)])
    runtime = table([launch(1, 5, 1), launch(1, 105, 2)])
    kernels = table([kernel(10, 500, 1), kernel(600, 500, 2)])
    by = device_time_by_name(device_time(spans, runtime, kernels, NO_COPIES)).iloc[0]
    assert (by["spans"], by["host_ns"], by["device_ns"]) == (2, 60 * US, 1_000 * US)
