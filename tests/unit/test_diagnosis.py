"""The diagnosis on synthetic run directories: each edge case gives the verdict it must."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd
import pytest

from probe.analyzers.diagnosis import diagnose
from probe.analyzers.diff import compare, held_error
from probe.analyzers.recommendations import MODEL
from probe.analyzers.rules import runnable_beside_idle_cores
from probe.analyzers.vocabulary import WAITS
from probe.reports.json import DiagnosisJson
from probe.reports.terminal import DiffText, Verdict
from probe.rundir import load
from tests.synthetic import MS, T0, RunBuilder


def sequential_requests(
    b: RunBuilder,
    n: int,
    stages: list[tuple[str, float, dict]],
    *,
    thread: int = 1,
    start_ms: float = 0.0,
    every_ms: float = 2.0,
) -> float:
    """``n`` requests one after another on ``thread``; each stage is (name, ms, sample kw).

    Samples every ``every_ms`` inside each stage with the given stack/reason. Returns the
    end time.
    """
    t = start_ms
    for i in range(n):
        req = b.span(
            "request",
            t,
            t + sum(ms for _, ms, _ in stages),
            thread=thread,
            category="request",
            request=f"r{i}",
        )
        s = t
        for name, ms, kw in stages:
            b.span(name, s, s + ms, thread=thread, parent=req, request=f"r{i}")
            k = s + every_ms / 2
            while k < s + ms:
                b.sample(
                    thread,
                    k,
                    kw["stack"],
                    wall_ms=every_ms,
                    cpu_ms=kw.get("cpu", every_ms),
                    reason=kw.get("reason", ""),
                )
                k += every_ms
            s += ms
        t = s
    return t


def add_cpu(b: RunBuilder, end_ms: float, cores: float) -> None:
    for k in range(0, int(end_ms) + 1, 100):
        b.resources(k, cores * k / 1000.0, 100 << 20)
        b.system(k, 100.0 * cores / b.cpu_count)


def network_requests(b: RunBuilder, n: int, start_ms: float = 0.0) -> float:
    """``n`` requests one after another, each 45 ms on the network then 5 ms of CPU; the
    last one's end (ms)."""
    wait = b.stack("main", "handle", "download", leaf_call="sock.recv_into")
    work = b.stack("main", "handle", "classify")
    steps = [
        ("download", 45.0, {"stack": wait, "reason": "network", "cpu": 0.0}),
        ("classify", 5.0, {"stack": work}),
    ]
    return sequential_requests(b, n, steps, start_ms=start_ms)


def first_request_init(b: RunBuilder, ms: float) -> int:
    """A first request that is nothing but an ``init`` stage of ``ms``; its stack."""
    cold = b.span("request", 0.0, ms, category="request", request="cold")
    b.span("init", 0.0, ms, parent=cold, request="cold")
    return b.stack("main", "handle", "init")


def io_bound_run(tmp_path):
    b = RunBuilder(duration_s=2.0)
    end = network_requests(b, 40)
    add_cpu(b, end, 0.1)
    return b.write(tmp_path / "io")


def cpu_python_run(tmp_path):
    b = RunBuilder(duration_s=2.0)
    model = b.stack("main", "model", leaf_call="np.dot")
    loop = b.stack("main", "postprocess")
    end = sequential_requests(
        b,
        40,
        [
            ("model", 4.0, {"stack": model}),
            ("postprocess", 46.0, {"stack": loop}),
        ],
    )
    add_cpu(b, end, 1.0)
    return b.write(tmp_path / "cpu")


def test_io_bound_run_names_the_waiting_stage_and_recommends_concurrency(tmp_path):
    d = diagnose(load(io_bound_run(tmp_path)))
    assert (d.primary["kind"], d.primary["subkind"], d.primary["stage"]) == (
        "io",
        "network",
        "download",
    )
    assert d.primary["share"] == pytest.approx(0.9, abs=0.01)
    top = d.recommendations[0]
    assert top.id == "concurrent_io" and top.stage == "download"
    assert 2.0 < top.estimated_speedup <= top.ceiling
    assert top.p == pytest.approx(0.9, abs=0.01)
    assert d.run["requests"] == 40
    assert d.run["throughput_per_s"] == pytest.approx(20.0, rel=0.01)
    # bottleneck law: 0.1 cores over 2 s for 40 requests = 5 ms of CPU each, all of it
    # holding the GIL (no numeric kernels): at most 200 requests/s, bound by the GIL
    law = d.run["bottleneck"]
    assert law["cpu_s_per_request"] == pytest.approx(0.005, rel=0.02)
    assert (law["bound_by"], law["max_throughput_per_s"]) == ("gil", pytest.approx(200, rel=0.02))


def test_threads_the_interpreter_does_not_know_take_no_share_of_the_gil_s_demand(tmp_path):
    # the io-bound run's 5 ms of CPU a request, three quarters of it on a thread that is
    # neither Python's nor probe's (OpenBLAS's idle team spins so beside an event loop):
    # that CPU is the cores', never the GIL's
    b = RunBuilder(duration_s=2.0)
    add_cpu(b, network_requests(b, 40), 0.1)
    b.meta_extra["collector"] = {"own_tids": [7]}
    path = b.write(tmp_path / "native")
    python = int(load(path).tables["threads"]["thread_id"].iloc[0])
    per_thread = {python: 0.05, 9_999: 0.15, 7: 0.3}  # 7: probe's own, left out
    pd.DataFrame(
        {
            "ts_ns": [T0 + 2 * 10**9] * 3,
            "pid": [42] * 3,
            "tid": list(per_thread),
            "cpu_user_s": list(per_thread.values()),
            "cpu_system_s": [0.0] * 3,
        }
    ).to_parquet(path / "os_threads.parquet", index=False)
    law = diagnose(load(path)).run["bottleneck"]
    assert law["cpu_s_per_request"] == pytest.approx(0.005, rel=0.02)
    assert law["gil_s_per_request"] == pytest.approx(0.00125, rel=0.02)
    assert law["bound_by"] == "cpu"  # 5 ms on each of two cores: 400/s, the GIL's 800/s


def test_cpu_python_stage_gets_vectorisation_estimated_by_amdahl(tmp_path):
    d = diagnose(load(cpu_python_run(tmp_path)))
    assert (d.primary["kind"], d.primary["subkind"], d.primary["stage"]) == (
        "cpu",
        "python",
        "postprocess",
    )
    top = d.recommendations[0]
    assert top.id == "vectorize_python"
    p, s = top.p, top.s
    assert top.estimated_speedup == pytest.approx(1 / ((1 - p) + p / s))
    assert top.ceiling == pytest.approx(1 / (1 - p))
    assert "postprocess" in top.how and "np." in top.how


def test_vectorisation_is_said_to_be_a_conservative_figure_with_the_range_it_comes_with(
    tmp_path,
):
    # a loop's gain from numpy is not in its profile (4.9-103x over eight loops,
    # benchmarks/vectorize_gain.py): the verdict, its lines and the JSON carry the range
    d = diagnose(load(cpu_python_run(tmp_path)))
    top = d.recommendations[0]
    least, most = top.evidence["speedup_range"]
    p = top.p
    assert least < top.estimated_speedup < most < top.ceiling
    assert least == pytest.approx(1 / ((1 - p) + p / MODEL.vectorize_least), rel=0.05)
    text = Verdict.from_diagnosis(d).render()
    assert f"faster ({least:.1f}–{most:.1f}× as such fixes go" in text
    assert f"({least:.1f}–{most:.1f}× as such fixes go; p=" in text
    data = json.loads(DiagnosisJson.from_diagnosis(d).render())
    assert data["recommendations"][0]["evidence"]["speedup_range"] == [least, most]


def test_native_model_stage_is_cpu_native(tmp_path):
    b = RunBuilder(duration_s=1.0)
    gemm = b.stack("main", "generate", leaf_call="operator.matmul")
    end = sequential_requests(b, 20, [("generate", 40.0, {"stack": gemm})])
    add_cpu(b, end, 1.0)
    d = diagnose(load(b.write(tmp_path / "native")))
    assert (d.primary["kind"], d.primary["subkind"]) == ("cpu", "native")
    # one busy core of two: one instance per core, bounded by the cores, the two running
    # together each at 0.9 of one alone (shared caches and memory bandwidth): 1.8x, the
    # top of the 1.75-1.8x two such processes measured (Model.instance_efficiency)
    top = d.recommendations[0]
    assert top.id == "multi_instance"
    assert top.estimated_speedup == pytest.approx(1.8, rel=0.02)


def test_without_spans_the_breakdown_is_by_service_function(tmp_path):
    b = RunBuilder(duration_s=1.0)
    rank = b.stack("<module>", "main", "rank", leaf_call="np.dot")
    json_ = b.stack("<module>", "main", "parse", "loads", leaf_call="scan_once")
    json_ = b.stack("<module>", "main", "parse", "loads", leaf_call="scan_once")
    for k in range(100):
        stack = rank if k % 4 else json_
        b.sample(1, k * 10 + 10, stack)
    b.frame("loads", "/usr/lib/python3.11/json/__init__.py")
    d = diagnose(load(b.write(tmp_path / "nospans")))
    stages = d.breakdown.stages
    assert d.breakdown.source == "samples"
    assert stages.index[0] == "rank (app.py)"
    assert stages.loc["rank (app.py)", "path_share"] == pytest.approx(0.75)
    assert d.run["requests"] == 0 and d.run["throughput_per_s"] is None
    assert any("no spans recorded" in n for n in d.notes)


def test_a_loop_caught_on_its_nanosecond_builtins_is_python_and_real_c_work_native(tmp_path):
    # the sampler pauses a Python loop at the eval-breaker check after each call, so a
    # loop calling ord() lands on that call; str.split of a page or np.dot is native
    b = RunBuilder(duration_s=1.0)
    on_ord = b.stack("main", "checksum", leaf_call="ord")
    on_append = b.stack("main", "checksum", leaf_call="tokens.append")
    on_split = b.stack("main", "parse", leaf_call="page.split")
    on_np = b.stack("main", "parse", leaf_call="np.append")
    for k in range(100):
        b.sample(1, k * 10 + 10, [on_ord, on_append, on_split, on_np][k % 4])
    d = diagnose(load(b.write(tmp_path / "builtins")))
    stages = d.breakdown.stages
    assert stages.loc["checksum (app.py)", "python_share"] == pytest.approx(1.0)
    assert stages.loc["parse (app.py)", "native_share"] == pytest.approx(1.0)


def test_sixty_four_threads_serving_at_once(tmp_path):
    b = RunBuilder(duration_s=1.0)
    wait = b.stack("worker", "fetch", leaf_call="sock.recv_into")
    for thread in range(1, 65):
        sequential_requests(
            b, 5, [("fetch", 20.0, {"stack": wait, "reason": "network", "cpu": 0.0})], thread=thread
        )
    add_cpu(b, 100, 0.2)
    d = diagnose(load(b.write(tmp_path / "64")))
    assert d.run["requests"] == 320
    assert d.run["concurrency"] == pytest.approx(64, rel=0.01)
    assert d.breakdown.stages.loc["fetch", "threads"] == 64
    assert d.primary["subkind"] == "network"
    # already concurrent: making it "concurrent" is no recommendation
    assert "concurrent_io" not in [r.id for r in d.recommendations]


def test_overlapping_children_count_once_on_the_request_path(tmp_path):
    b = RunBuilder(duration_s=0.2)
    req = b.span("request", 0, 100, category="request", request="r")
    b.span("fetch", 0, 60, thread=2, parent=req, request="r")
    b.span("fetch", 20, 80, thread=3, parent=req, request="r")
    inner = b.span("encode", 80, 95, parent=req, request="r")
    b.span("resize", 82, 90, parent=inner, request="r")
    stages = diagnose(load(b.write(tmp_path / "nested"))).breakdown.stages
    assert stages.loc["fetch", "total_s"] == pytest.approx(0.120)
    assert stages.loc["fetch", "path_share"] == pytest.approx(0.80)
    assert stages.loc["fetch", "concurrency"] == pytest.approx(1.5)
    assert stages.loc["request", "self_s"] == pytest.approx(0.005)  # 100 - (80 + 15)
    assert stages.loc["encode", "self_s"] == pytest.approx(0.007)  # 15 - 8


def test_interleaved_asyncio_tasks_on_one_thread(tmp_path):
    b = RunBuilder(duration_s=0.2)
    wait = b.stack("run", "_run_once", "select", leaf_call="selector.select")
    for i in range(10):  # ten tasks, each awaiting 30 ms, started 5 ms apart
        req = b.span("handle", i * 5, i * 5 + 30, category="request", request=f"t{i}")
        b.span("fetch", i * 5 + 1, i * 5 + 29, parent=req, request=f"t{i}")
    for k in range(0, 80, 2):
        b.sample(1, k + 1, wait, wall_ms=2, cpu_ms=0.0, reason="network")
    d = diagnose(load(b.write(tmp_path / "async")))
    stages = d.breakdown.stages
    assert d.run["requests"] == 10
    assert d.run["concurrency"] > 3
    assert 0.9 < stages.loc["fetch", "path_share"] <= 1.0
    assert d.primary["stage"] == "fetch"


def test_empty_run_says_there_is_nothing_to_judge(tmp_path):
    d = diagnose(load(RunBuilder(duration_s=0.0).write(tmp_path / "empty")))
    assert d.primary["kind"] == "none"
    assert "Nothing to judge" in d.primary["summary"]
    assert d.recommendations == [] and not d.leak.detected
    data = json.loads(DiagnosisJson.from_diagnosis(d).render())
    assert data["schema"] == "probe.diagnosis/1"
    assert "Nothing to judge" in Verdict.from_diagnosis(d).render()


def test_run_killed_after_200_ms_is_salvaged_and_diagnosed(tmp_path):
    run_dir = tmp_path / "killed"
    b = RunBuilder(duration_s=0.2)
    stack = b.stack("main", "work")
    b.write(run_dir, finished=False)
    rows = [[T0 + k * 10 * MS, 1, stack, 10 * MS, 10 * MS, "", 1] for k in range(1, 21)]
    journal = json.dumps([[], rows]) + "\n" + "[[], [[1, 2"  # torn last batch
    (run_dir / "samples.jsonl").write_text(journal)
    (run_dir / "stacks.jsonl").write_text(json.dumps([[], [[stack, "1;2", 3, ""]]]) + "\n")
    (run_dir / "frames.jsonl").write_text(
        json.dumps([[], [[1, "main", "/srv/app.py", 1], [2, "work", "/srv/app.py", 2]]]) + "\n"
    )
    d = diagnose(load(run_dir))
    assert any("did not finish cleanly" in n for n in d.notes)
    assert any("dropped 1 incomplete batch" in n for n in d.notes)
    assert d.primary["stage"] == "work (app.py)"
    assert d.breakdown.sampled_s == pytest.approx(0.2)


def test_gpu_waits_without_a_gpu_never_make_a_gpu_kind(tmp_path):
    b = RunBuilder(duration_s=1.0)
    sync = b.stack("main", "infer", leaf_call="torch.cuda.synchronize")
    sequential_requests(b, 20, [("infer", 40.0, {"stack": sync, "reason": "gpu_sync", "cpu": 0.0})])
    d = diagnose(load(b.write(tmp_path / "nogpu")))
    assert all(f.kind != "gpu" for f in d.findings)


def busy_gpu_run(tmp_path) -> Path:
    """20 requests that wait on a GPU at 95% the whole time (no window of its kernels)."""
    b = RunBuilder(duration_s=1.0, gpu=True)
    sync = b.stack("main", "infer", leaf_call="torch.cuda.synchronize")
    end = sequential_requests(
        b, 20, [("infer", 40.0, {"stack": sync, "reason": "gpu_sync", "cpu": 0.0})]
    )
    for k in range(0, int(end), 50):
        b.gpu_reading(k, 95.0)
    return b.write(tmp_path / "gpu")


def test_busy_gpu_is_gpu_compute_and_gets_fp16(tmp_path):
    d = diagnose(load(busy_gpu_run(tmp_path)))
    assert (d.primary["kind"], d.primary["subkind"]) == ("gpu", "gpu_compute")
    assert d.recommendations[0].id == "fp16"


def gemm_window(kernel_name: str) -> dict:
    """A torch.profiler window on a GPU kept busy by 20 GEMMs, 4.9 ms each in 5 ms."""
    events = []
    for i in range(20):
        ts, corr = 1000.0 + i * 5000, {"correlation": 100 + i, "External id": i + 1}
        events += [
            {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 11, "tid": 11, "ts": ts,
             "dur": 30.0, "args": {"External id": i + 1}},
            {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 11,
             "tid": 11, "ts": ts + 10, "dur": 5.0, "args": corr},
            {"ph": "X", "cat": "kernel", "name": kernel_name, "pid": 0, "tid": 7,
             "ts": ts + 20, "dur": 4900.0, "args": {"device": 0, "stream": 7, **corr}},
        ]  # fmt: skip
    props = [{"id": 0, "name": "NVIDIA H100", "computeMajor": 9, "computeMinor": 0}]
    return {"schemaVersion": 1, "deviceProperties": props, "traceEvents": events}


@pytest.mark.parametrize(
    ("kernel_name", "fp16"),
    [("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64", False),
     ("ampere_sgemm_128x64_nn", True)],
)  # fmt: skip
def test_a_busy_gpu_s_fp16_is_the_window_s_measured_one_when_a_window_saw_its_kernels(
    tmp_path, kernel_name, fp16
):
    # the run alone proposes FP16 on utilisation (the test above); a window whose GEMMs
    # already run in BF16 says there is none to make, and one in FP32 says how much, once
    path = busy_gpu_run(tmp_path)
    (path / "torch").mkdir()
    (path / "torch" / "window-1.json").write_text(json.dumps(gemm_window(kernel_name)))
    meta = json.loads((path / "meta.json").read_text())
    window = {"file": "torch/window-1.json", "start_s": 0.5, "end_s": 0.6, "probe_tid": 9}
    meta["collector"] = {**meta.get("collector", {}), "torch": {"windows": [window]}}
    (path / "meta.json").write_text(json.dumps(meta))
    d = diagnose(load(path))
    every = d.recommendations + d.minor_recommendations
    said = [r for r in every if r.id == "fp16"]
    if fp16:
        [r] = said
        assert r.evidence["torch_window"] == "torch/window-1.json"
    else:
        assert said == []


def test_slow_first_request_recommends_initialising_at_start_up(tmp_path):
    b = RunBuilder(duration_s=2.0)
    work = b.stack("main", "handle")
    init = b.stack("main", "init")
    req = b.span("request", 0, 1010, category="request", request="r0")
    b.span("init", 0, 1000, parent=req, request="r0")
    for k in range(0, 1000, 10):
        b.sample(1, k + 5, init)
    sequential_requests(
        b, 50, [("init", 0.01, {"stack": init}), ("handle", 10.0, {"stack": work})], start_ms=1010
    )
    d = diagnose(load(b.write(tmp_path / "cold")))
    rec = next(r for r in d.recommendations if r.id == "lazy_init")
    assert rec.stage == "init"
    assert rec.ceiling == pytest.approx(1 / (1 - rec.p)) and math.isinf(rec.s)
    assert any("slow first request" in n for n in d.notes)


def test_a_cold_start_s_cpu_not_its_wall_time_leaves_the_per_request_demand(tmp_path):
    # a 1-s model start that ran half of it (it waited for a core the rest: a 2.2-s start
    # under probe used ~1.6 s of CPU on multimodal_pipeline), then 60 requests of 45 ms on
    # the network and 5 ms of CPU: 5 ms of CPU a request, what a concurrency fix scales
    b = RunBuilder(duration_s=4.0)
    init = first_request_init(b, 1000.0)
    for k in range(100):
        b.sample(1, 5.0 + 10 * k, init, cpu_ms=5.0 if k % 2 else 0.0)
    end = network_requests(b, 60, start_ms=1000.0)
    for k in range(0, int(end) + 1, 100):  # /proc's readings: 0.5 cores, then 0.1
        b.resources(k, 0.5 * min(k, 1000) / 1000 + 0.1 * max(0, k - 1000) / 1000, 100 << 20)
        b.system(k, 100.0 * (0.5 if k < 1000 else 0.1) / b.cpu_count)
    d = diagnose(load(b.write(tmp_path / "cold")))
    demands = d.to_dict()["run"]["bottleneck"]
    assert demands["cpu_s_per_request"] == pytest.approx(0.005, rel=0.1)
    (lazy,) = [r for r in d.recommendations + d.minor_recommendations if r.id == "lazy_init"]
    assert lazy.evidence["cpu_s"] == pytest.approx(0.5, rel=0.05)  # said with its evidence


def test_growing_memory_is_a_leak_and_fix_leak_comes_first(tmp_path):
    b = RunBuilder(duration_s=60.0)
    work = b.stack("main", "score", leaf_call="np.dot")
    sequential_requests(b, 20, [("score", 40.0, {"stack": work})])
    for k in range(0, 60_000, 100):
        b.resources(k, k / 1000.0, (100 << 20) + 1_000_000 * k // 1000)
    b.rows["memory_sites"] += [
        (T0, 1, "app.py:12", "app.py:12", 1_000, 10),
        (T0 + 50_000 * MS, 2, "app.py:12", "app.py:12", 50_000_000, 5000),
    ]
    d = diagnose(load(b.write(tmp_path / "leak")))
    assert d.leak.detected
    assert d.leak.slope_bytes_per_s == pytest.approx(1e6, rel=0.05)
    assert d.recommendations[0].id == "fix_leak"
    assert d.leak.top_sites[0]["site"] == "app.py:12"
    assert "app.py:12" in d.recommendations[0].how


def test_diff_puts_the_prediction_beside_the_realized_speedup(tmp_path):
    a = diagnose(load(io_bound_run(tmp_path)))
    b_builder = RunBuilder(duration_s=0.4)
    wait = b_builder.stack("main", "handle", "download", leaf_call="sock.recv_into")
    for thread in range(1, 9):  # 8 workers: 5 requests each
        sequential_requests(
            b_builder,
            5,
            [
                ("download", 45.0, {"stack": wait, "reason": "network", "cpu": 0.0}),
                ("classify", 5.0, {"stack": wait}),
            ],
            thread=thread,
        )
    b = diagnose(load(b_builder.write(tmp_path / "after")))
    c = compare(a, b, ["concurrent_io"])
    assert c.throughput_speedup == pytest.approx(8.0, rel=0.01)
    assert c.predicted == pytest.approx(a.recommendations[0].estimated_speedup)
    assert c.error == pytest.approx(abs(c.predicted - 8.0) / 8.0)
    text = DiffText.from_comparison(c).render()
    assert "realized 8.00×" in text and "concurrent_io" in text
    assert compare(a, b).applied == ["concurrent_io"]  # the top one without --applied
    missing = compare(a, b, ["fp16"])
    assert missing.predicted is None and "no recommendation fp16" in missing.notes[0]


def batch_job(tmp_path, name: str, seconds: float, **meta_extra):
    """A job of no requests: the main thread in ``parse`` on a CPU for ``seconds``."""
    b = RunBuilder(duration_s=seconds)
    work = b.stack("main", "parse")
    for k in range(int(seconds * 100)):
        b.sample(0, k * 10.0, work)
    add_cpu(b, seconds * 1000, 1.0)
    b.meta_extra.update(meta_extra)
    return diagnose(load(b.write(tmp_path / name)))


def test_a_conservative_figure_is_held_from_above_and_to_its_range_a_plain_one_both_ways():
    assert held_error(2.0, 2.5, None) == pytest.approx(0.2)
    assert held_error(3.0, 2.5, None) == pytest.approx(0.2)
    # a figure that states a range: a realization beyond it within the range is no miss,
    # one short of it counts, one outside the range misses whatever the figure
    assert held_error(2.0, 2.5, (1.5, 4.0)) == 0.0
    assert held_error(3.0, 2.5, (1.5, 4.0)) == pytest.approx(0.2)
    assert held_error(2.0, 4.5, (1.5, 4.0)) == math.inf


def test_diff_of_two_batch_runs_reads_the_gain_from_the_job_s_wall_time(tmp_path):
    a, b = batch_job(tmp_path, "a", 3.0), batch_job(tmp_path, "b", 1.5)
    c = compare(a, b, [a.recommendations[0].id])
    assert c.basis == "job" and c.job_speedup == pytest.approx(2.0)
    assert c.throughput_speedup is None
    assert c.error == pytest.approx(abs(c.predicted - 2.0) / 2.0)
    (stage,) = c.stages
    assert stage.a_ms == pytest.approx(3000, rel=0.02) and stage.speedup == pytest.approx(2.0)
    text = DiffText.from_comparison(c).render()
    assert "job wall" in text and "realized 2.00×" in text and "per job, by stage" in text


def test_diff_holds_a_conservative_figure_to_its_stated_range_as_the_tests_do(tmp_path):
    # vectorize_python states 6.5x, a conservative figure, and the range such fixes
    # realised (4.9-100x): a 7.5x job is no miss, a 6x one falls short of it by 8%,
    # a 2x one is outside the range (probe diff said "off by 225%" either way)
    a = batch_job(tmp_path, "a", 3.0)
    rec = a.recommendations[0]
    assert rec.id == "vectorize_python" and rec.evidence["speedup_range"][0] > 2.0
    texts = {}
    for name, seconds in (("fast", 0.4), ("short", 0.5), ("slow", 1.5)):
        c = compare(a, batch_job(tmp_path, name, seconds), [rec.id])
        assert c.stated_range == tuple(rec.evidence["speedup_range"])
        assert c.held == held_error(c.predicted, c.job_speedup, c.stated_range)
        texts[name] = (c.to_dict(), DiffText.from_comparison(c).render())
    fast, short, slow = texts["fast"], texts["short"], texts["slow"]
    lo, hi = rec.evidence["speedup_range"]
    assert fast[0]["within_stated_range"] is True and fast[0]["held_error"] == 0.0
    assert f"within its stated range {lo:.1f}–{hi:.1f}× (a conservative figure" in fast[1]
    assert short[0]["held_error"] == pytest.approx((6.5 - 6.0) / 6.0, abs=0.01)
    assert "short of the figure by 8%" in short[1]
    assert slow[0]["within_stated_range"] is False and slow[0]["held_error"] is None
    assert f"outside its stated range {lo:.1f}–{hi:.1f}× (off by 225%)" in slow[1]
    # several fixes at once state no range: the plain error, as before
    both = compare(a, batch_job(tmp_path, "both", 1.5), [r.id for r in a.recommendations])
    assert both.stated_range is None and both.held is None
    assert "off by" in DiffText.from_comparison(both).render()


def test_diff_of_batch_runs_names_the_applied_fix_the_diagnosis_lacks(tmp_path):
    # probe diff's error: the batch job's basis note comes first among the notes, and
    # was printed as the error in its place (a CI run: "no requests in either run")
    a, b = batch_job(tmp_path, "a", 3.0), batch_job(tmp_path, "b", 1.5)
    c = compare(a, b, ["fp16"])
    assert not c.applied and "no recommendation fp16" in c.unmatched
    assert c.unmatched in c.notes and "no requests in either run" in c.notes[0]
    assert compare(a, b, [a.recommendations[0].id]).unmatched == ""


def test_diff_reads_no_gain_from_a_batch_run_that_did_not_finish_its_job(tmp_path):
    a = batch_job(tmp_path, "a", 3.0)
    stopped = batch_job(tmp_path, "b", 1.0, exit={"status": 0, "ended_by": "duration"})
    failed = batch_job(tmp_path, "c", 1.0, exit={"status": 1, "ended_by": "sys.exit"})
    for b in (stopped, failed):
        c = compare(a, b)
        assert c.basis == "" and c.job_speedup is None and c.error is None, c
        assert "RUN_B did not run its job to the end" in c.notes[0], c.notes
    assert "exit status 1" in compare(a, failed).notes[0]


def test_diff_does_not_compare_a_service_with_a_batch_job(tmp_path):
    c = compare(diagnose(load(io_bound_run(tmp_path))), batch_job(tmp_path, "b", 1.0))
    assert c.basis == "" and c.error is None and not c.stages
    assert "no requests in RUN_B" in c.notes[0], c.notes


def test_leak_is_judged_over_the_serving_window_not_shutdown(tmp_path):
    # grows 2 MB/s while serving for 10 s, then a flat 7 s of teardown
    b = RunBuilder(duration_s=17.0)
    work = b.stack("main", "score", leaf_call="np.dot")
    sequential_requests(b, 250, [("score", 40.0, {"stack": work, "cpu": 40.0})])
    for k in range(0, 17_000, 100):
        grown = 2_000_000 * min(k, 10_000) // 1000
        b.resources(k, k / 1000.0, (100 << 20) + grown + (k % 300) * 1000)
    d = diagnose(load(b.write(tmp_path / "shutdown")))
    assert d.leak.detected, d.leak.reason
    assert d.leak.slope_bytes_per_s == pytest.approx(2e6, rel=0.1)


def test_memory_let_go_by_the_full_collection_at_the_end_is_not_the_service_s(tmp_path):
    # a batch job growing 1 MB/s for 20 s; the session's full collection at its end (the
    # witness of garbage in cycles) freed 30 MB and glibc gave it back: the readings from
    # then on are probe's doing, and read as "fell near the end" they left a leak open
    b = RunBuilder(duration_s=23.0)
    for k in range(0, 23_000, 100):
        fell = 30_000_000 if k > 20_000 else 0
        b.resources(k, k / 1000.0, (100 << 20) + 1_000 * k + (k % 300) * 1000 - fell)
    b.meta_extra["collector"] = {"full_collection_at_end": {"at_ns": T0 + 20_000 * MS}}
    d = diagnose(load(b.write(tmp_path / "collected")))
    assert d.leak.state == "leak", d.leak.reason
    assert d.leak.slope_bytes_per_s == pytest.approx(1e6, rel=0.1)


def threads_in_a_native_call(tmp_path, *, runnable_reason: str, cores: float, **host):
    """Four request threads in one C call (``db.execute``) for 2 s, each on a CPU 40% of
    its samples, runnable 50% (waiting for ``runnable_reason``), 10% for the GIL.
    ``host``: meta.json's host fields besides its 2 CPUs (``cores_allowed``...)."""
    b = RunBuilder(duration_s=2.0)
    scan = b.stack("main", "handler", "count_matches", leaf_call="db.execute")
    for thread in range(1, 5):
        for k in range(200):
            ts = k * 10.0
            if k % 10 < 4:
                b.sample(thread, ts, scan)
            elif k % 10 < 9:
                b.sample(thread, ts, scan, cpu_ms=0.0, reason=runnable_reason)
            else:
                b.sample(thread, ts, scan, cpu_ms=0.0, reason="gil")
    add_cpu(b, 2000, cores)
    if host:
        b.meta_extra["host"] = {"cpu_count": 2, **host}
    return diagnose(load(b.write(tmp_path / runnable_reason)))


def test_threads_waiting_for_a_core_more_than_for_the_gil_are_cpu_native_not_gil(tmp_path):
    # search_flask: eight threads in SQLite's scan on 2 cores, runnable 69%, the GIL 10%
    d = threads_in_a_native_call(tmp_path, runnable_reason="unknown", cores=1.6)
    assert (d.primary["kind"], d.primary["subkind"]) == ("cpu", "native"), d.primary
    assert "multiprocess" not in {r.id for r in d.recommendations}


def test_runnable_threads_beside_an_idle_core_are_waiting_for_the_gil_not_a_core(tmp_path):
    # tokenize_pool in CI: four GIL-bound threads at one core of two, their wakes for the
    # GIL caught runnable more often than asleep in the futex: "cpu/python, 100%". With a
    # core idle their runnable 50% is the GIL's (rules.runnable_beside_idle_cores): they
    # wait for it 60% of their time and run 40%, contention for it
    d = threads_in_a_native_call(tmp_path, runnable_reason="unknown", cores=1.0)
    assert (d.primary["kind"], d.primary["subkind"]) == ("contention", "gil"), d.primary
    assert d.findings[0].evidence["gil"] == pytest.approx(0.6, abs=0.01)
    assert "multiprocess" in {r.id for r in d.recommendations}


def test_threads_held_back_by_the_gil_more_than_by_the_cores_are_gil_bound(tmp_path):
    d = threads_in_a_native_call(tmp_path, runnable_reason="gil", cores=1.0)
    assert d.primary["subkind"] == "gil", d.primary


def test_processes_are_never_promised_more_than_the_cores_the_process_leaves_free(tmp_path):
    # GIL-bound on paper, but the process already keeps 1.6 of 2 cores busy: processes
    # can add 2/1.6, not the threads' 2x
    d = threads_in_a_native_call(tmp_path, runnable_reason="gil", cores=1.6)
    rec = next(r for r in d.recommendations if r.id == "multiprocess")
    assert rec.s == pytest.approx(2.0 / 1.6, rel=0.05), rec


def four_threads_waiting_for_the_gil() -> RunBuilder:
    """tokenize_pool's shape, 2 s: four pure-Python threads, each running 25% of its
    samples and waiting for the GIL the rest."""
    b = RunBuilder(duration_s=2.0)
    work = b.stack("main", "handler", "split_tokens")
    for thread in range(1, 5):
        for k in range(200):
            b.sample(
                thread, k * 10.0, work, **({} if k % 4 == 0 else {"cpu_ms": 0.0, "reason": "gil"})
            )
    return b


def test_probe_s_own_helper_process_is_not_a_process_that_leaves_the_target_fewer_cores(
    tmp_path,
):
    # tokenize_pool: four GIL-bound threads at one core of two while probe's helper
    # imported its analysis stack on the other (0.45 core); the helper stops with the run,
    # so processes get both cores (realized 1.6-1.7x by wall clock), not 1.55 of them
    b = four_threads_waiting_for_the_gil()
    for k in range(0, 2001, 100):
        b.resources(k, 1.0 * k / 1000.0, 100 << 20)
        b.system(k, 100.0 * 1.45 / 2, probe_cpu_s=0.45 * k / 1000.0)
    d = diagnose(load(b.write(tmp_path / "helper")))
    assert d.primary["subkind"] == "gil", d.primary
    rec = next(r for r in d.recommendations if r.id == "multiprocess")
    assert rec.s == pytest.approx(2.0, rel=0.02), rec


def a_loop_and_two_handler_threads(tmp_path, *, handler_gil: float):
    """predict_api's shape, 6 s: one thread serving HTTP, on a CPU 38% of its ticks and
    runnable 62% (the GIL 22%, a core 40%); two handler threads in `score`, on a CPU 68%
    of theirs, waiting for the GIL ``handler_gil`` and for a core 5%."""
    b = RunBuilder(duration_s=6.0)
    serve = b.stack("main", "serve_http")
    score = b.stack("worker", "score")
    for k in range(600):
        phase = k % 50
        reason = "" if phase < 19 else "gil" if phase < 30 else "unknown"
        b.sample(1, k * 10.0, serve, cpu_ms=None if not reason else 0.0, reason=reason)
    gil_ticks = round(handler_gil * 100)
    for thread in (2, 3):
        for k in range(270):
            phase = k % 100
            reason = (
                ""
                if phase < 68
                else "gil"
                if phase < 68 + gil_ticks
                else "unknown"
                if phase < 73 + gil_ticks
                else "lock"
            )
            b.sample(thread, k * 20.0, score, cpu_ms=None if not reason else 0.0, reason=reason)
    add_cpu(b, 6000, 1.0)
    return diagnose(load(b.write(tmp_path / f"gil{handler_gil}")))


def test_threads_contending_for_the_gil_are_ranked_by_the_cpu_they_hold_not_their_waits(
    tmp_path,
):
    # summed over threads, the serving thread's 6 s lead the handlers' 5.4 s; on-CPU the
    # handlers hold 3.7 s of the interpreter's 6 s and the serving thread 2.3 s: theirs is
    # the fix that buys most
    d = a_loop_and_two_handler_threads(tmp_path, handler_gil=0.20)
    assert d.primary["stage"].startswith("score"), d.primary
    assert d.primary["subkind"] == "gil", d.primary
    shares = {f.stage.split(" ")[0]: f.share for f in d.findings}
    # 3.7 / 6.0 of the interpreter's time, and its own lock waits (7%) besides
    assert 0.6 < shares["score"] < 0.7, shares
    assert sum(shares.values()) == pytest.approx(1.0, abs=0.01)  # the path's total is kept


def test_where_the_gil_waits_are_charged_by_demand_a_note_gives_both_shares_of_each_stage(
    tmp_path,
):
    d = a_loop_and_two_handler_threads(tmp_path, handler_gil=0.20)
    table = d.breakdown.stages["path_share"]
    score = next(f for f in d.findings if f.stage.startswith("score"))
    assert abs(score.share - float(table[score.stage])) >= 0.05  # the two figures differ
    (note,) = [n for n in d.notes if n.startswith("the verdict's shares count")]
    assert f"`{score.stage}` {score.share:.0%} against {float(table[score.stage]):.0%}" in note


def test_where_no_waits_were_charged_no_note_compares_the_shares(tmp_path):
    b = RunBuilder(duration_s=2.0)
    work = b.stack("main", "score")
    for k in range(200):
        b.sample(0, k * 10.0, work)
    add_cpu(b, 2000, 1.0)
    d = diagnose(load(b.write(tmp_path / "one")))
    assert d.findings and not [n for n in d.notes if n.startswith("the verdict's shares")]


def test_without_gil_contention_the_threads_waits_stay_where_they_were_waited(tmp_path):
    from probe.analyzers.rules import interpreter_waits_by_demand

    table = pd.DataFrame(
        {
            "category": ["function", "function"],
            "path_s": [6.0, 5.4],
            "path_share": [6.0 / 11.4, 5.4 / 11.4],
            "cpu_share": [0.38, 0.68],
            "wait_gil": [0.0, 0.02],
            "wait_unknown": [0.62, 0.05],
        },
        index=["serve_http", "score"],
    )
    assert interpreter_waits_by_demand(table) is table  # 0.1 s of GIL waits in 11.4 s
    spans = table.assign(category=["stage", "stage"], wait_gil=[0.22, 0.2])
    assert interpreter_waits_by_demand(spans) is spans  # a request path is measured, not summed


def test_a_batch_job_s_followed_path_keeps_each_phase_s_gil_waits_where_they_were(tmp_path):
    # tokenize_pool: make the documents on the main thread, then tokenize them on a pool
    # of four GIL-bound threads; the path follows main's wait into the pool
    b = RunBuilder(duration_s=2.0)
    make = b.stack("main", "make_docs")
    wait = b.stack("main", "tokenize_all", leaf_call="waiter.acquire")
    work = b.stack("worker", "split_tokens")
    for k in range(20):  # 0.2 s making documents, on a CPU
        b.sample(0, k * 10.0, make)
    for k in range(20, 200):  # then 1.8 s waiting on the pool
        b.sample(0, k * 10.0, wait, cpu_ms=0.0, reason="lock")
        for thread in range(1, 5):  # each worker runs a quarter of the time
            running = (k + thread) % 4 == 0
            b.sample(
                thread, k * 10.0, work, **({} if running else {"cpu_ms": 0.0, "reason": "gil"})
            )
    add_cpu(b, 2000, 1.0)
    b.rows["threads"] = [
        (t, i, "MainThread" if t == 0 else n, ts) for t, i, n, ts in b.rows["threads"]
    ]
    d = diagnose(load(b.write(tmp_path / "pool")))
    assert d.breakdown.path_followed
    assert d.primary["stage"].startswith("split_tokens") and d.primary["subkind"] == "gil"
    assert d.primary["share"] == pytest.approx(0.9, abs=0.02), d.primary


def test_a_minor_stage_waiting_out_another_thread_s_gil_is_not_gil_contention(tmp_path):
    # ingest_pipeline in CI: one producer parsing on a CPU, four consumers woken by its
    # puts that wait out its switch interval for the GIL; their stage reached 5% of the
    # path, 58% of it GIL waits, holding ~3% of the on-CPU time
    b = RunBuilder(duration_s=2.0)
    parse = b.stack("main", "produce", "parse_line")
    consume = b.stack("main", "consume", "store_record")
    join = b.stack("main", "main", leaf_call="thread.join")
    for k in range(200):
        b.sample(0, k * 10.0, join, cpu_ms=0.0, reason="lock")  # the batch's path: followed
        b.sample(1, k * 10.0, parse)
    for thread in range(2, 6):
        for k in range(5):
            b.sample(thread, k * 350.0 + 5, consume)
            b.sample(thread, k * 350.0 + 15, consume, cpu_ms=0.0, reason="gil")
            b.sample(thread, k * 350.0 + 25, consume, cpu_ms=0.0, reason="gil")
    add_cpu(b, 2000, 1.0)
    b.rows["threads"] = [
        (t, i, "MainThread" if t == 0 else n, ts) for t, i, n, ts in b.rows["threads"]
    ]
    d = diagnose(load(b.write(tmp_path / "starved")))
    assert d.breakdown.path_followed
    assert d.primary["stage"].startswith("parse_line"), d.primary
    consumers = [f for f in d.findings if f.stage.startswith("store_record")]
    assert consumers and consumers[0].share >= 0.05, d.findings  # a finding, and minor
    assert consumers[0].evidence["gil"] > 0.6  # its waits are the GIL's, and said so
    assert (consumers[0].kind, consumers[0].subkind) == ("cpu", "python"), consumers[0]


def test_a_stage_waiting_for_a_contended_gil_is_gil_contention(tmp_path):
    # the same consumers, now four pure-Python threads that mostly wait for each other
    b = RunBuilder(duration_s=2.0)
    work = b.stack("main", "consume", "store_record")
    for thread in range(2, 6):
        for k in range(200):
            running = (k + thread) % 4 == 0
            b.sample(
                thread, k * 10.0, work, **({} if running else {"cpu_ms": 0.0, "reason": "gil"})
            )
    add_cpu(b, 2000, 1.0)
    d = diagnose(load(b.write(tmp_path / "contended")))
    assert d.primary["stage"].startswith("store_record") and d.primary["subkind"] == "gil"


def test_a_fix_under_the_bar_alone_is_kept_aside_and_diff_predicts_it_with_the_others(tmp_path):
    # an I/O-bound service whose first request also pays a 600-ms model start (12x the
    # median request): 17% of the request time, so the start-up fix alone buys 1.2x
    # (under the bar), and with the fetches made concurrent it buys as much again
    # (multimodal_pipeline on a fast host)
    b = RunBuilder(duration_s=4.0)
    init = first_request_init(b, 600.0)
    for k in range(300):
        b.sample(1, 1.0 + 2 * k, init, wall_ms=2)
    end = network_requests(b, 60, start_ms=600.0)
    add_cpu(b, end, 0.3)
    a = diagnose(load(b.write(tmp_path / "a")))
    assert "lazy_init" not in {r.id for r in a.recommendations}
    (aside,) = [r for r in a.minor_recommendations if r.id == "lazy_init"]
    assert 1.0 < aside.estimated_speedup < MODEL.min_speedup
    assert "lazy_init" in [r["id"] for r in a.to_dict()["minor_recommendations"]]
    assert "Also proposed, under 1.25× alone" in Verdict.from_diagnosis(a).render()
    top = a.recommendations[0]
    assert top.id == "concurrent_io"
    both = compare(a, a, ["concurrent_io", "lazy_init"])
    assert both.predicted == pytest.approx(top.estimated_speedup * aside.estimated_speedup)
    assert not both.notes


def stage_table(host_cpu_percent: float, **waits: float) -> pd.DataFrame:
    """One stage on a CPU 20% of its time, runnable 30%, and ``waits`` (shares)."""
    row = {f"wait_{r}": 0.0 for r in WAITS} | {f"wait_{r}": v for r, v in waits.items()}
    row |= {"cpu_share": 0.2, "wait_unknown": 0.3, "host_cpu_percent": host_cpu_percent}
    return pd.DataFrame([row], index=["read_block"])


def test_runnable_time_beside_an_idle_core_goes_to_the_stage_s_waits_in_proportion():
    # shard_scan.py: O_DIRECT reads caught on a CPU more often than they are, 0.2 of 2
    # cores busy; its runnable time read as CPU demand made the disk wait "CPU-bound"
    out = runnable_beside_idle_cores(stage_table(20.0, disk=0.4, gil=0.1), cpu_count=2)
    row = out.loc["read_block"]
    assert row["wait_unknown"] == 0.0
    assert row["wait_disk"] == pytest.approx(0.4 + 0.3 * 0.8)
    assert row["wait_gil"] == pytest.approx(0.1 + 0.3 * 0.2)
    assert row["cpu_share"] == 0.2  # the exact on-CPU time stays


def test_the_kernel_s_count_of_a_run_queue_wait_stays_a_wait_for_a_core_beside_an_idle_one():
    # render_queue's worker, woken from queue.get, on a run queue by its schedstat while
    # ~1 of 2 cores was busy on average: a measured wait for a core, not a sampled instant
    table = stage_table(45.0, lock=0.1).assign(run_queue_share=0.2)
    row = runnable_beside_idle_cores(table, cpu_count=2).loc["read_block"]
    assert row["wait_unknown"] == pytest.approx(0.2)  # the kernel's 0.2 of the 0.3 stays
    assert row["wait_lock"] == pytest.approx(0.1 + 0.1)  # the sampled 0.1 goes to the wait


def test_runnable_time_stays_cpu_demand_on_busy_cores_without_waits_or_host_figures():
    busy = stage_table(80.0, disk=0.5)  # 1.6 of 2 cores: a core is not free
    no_waits = stage_table(20.0)  # nothing else explains it
    unknown_host = stage_table(float("nan"), disk=0.5)
    for table in (busy, no_waits, unknown_host):
        out = runnable_beside_idle_cores(table, cpu_count=2)
        pd.testing.assert_frame_equal(out, table)
