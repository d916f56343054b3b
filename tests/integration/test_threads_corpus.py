"""Undecorated services nobody wrote the rules for, held to their truth measured from
outside the process (``tests/threads_corpus/measure.py``: per-thread CPU and kernel states
from /proc, py-spy's hottest on-CPU function; written beside each service)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import threading
import time

import pytest

from probe.rundir.reader import load
from probe.samplers.peek import peek_module
from tests.threads_corpus import measure
from tests.threads_corpus.drive import drive, free_port, wait_for_port
from tests.threads_corpus.served_variants import answered

from .conftest import REPO, probe_cmd

pytestmark = pytest.mark.integration

CORPUS = REPO / "tests" / "threads_corpus" / "services"


def truth_of(name: str) -> dict:
    return json.loads((CORPUS / f"{name}.truth.json").read_text())


def idle_threads(truth: dict) -> list[dict]:
    """Threads that used under 2% of the wall in CPU and slept at 9 readings in 10."""
    return [
        t
        for t in truth["threads"]
        if t["cpu_s"] < 0.02 * truth["wall_s"] and t["states"].get("S", 0) >= 0.9
    ]


def test_an_idle_thread_pool_is_headroom_and_the_main_thread_s_loop_the_bottleneck(run_probe):
    truth = truth_of("checksum_batch")
    result = run_probe(CORPUS / "checksum_batch.py")
    assert result.returncode == 0, result.stderr
    d = json.loads((result.run_dir / "diagnosis.json").read_text())
    busiest = max(truth["threads"], key=lambda t: t["cpu_s"])
    assert busiest["cpu_s"] > 0.8 * truth["wall_s"]  # one thread does the work
    # Python (py-spy), though the loop is caught on its ord() call half the time
    assert (d["primary"]["kind"], d["primary"]["subkind"]) == ("cpu", "python"), d["primary"]
    assert d["primary"]["stage"].startswith(truth["py_spy_top_on_cpu"] or "rolling_hash")
    assert all(f["kind"] != "contention" for f in d["findings"]), d["findings"]
    (pool,) = d["run"]["idle"]
    assert pool["role"] == "thread-pool worker"
    assert pool["threads"] == len(idle_threads(truth)), (pool, truth["threads"])
    assert pool["idle_share"] > 0.9
    assert "thread-pool workers idle" in result.stdout + result.stderr


def test_a_helper_server_in_the_process_is_not_the_work_the_client_waiting_on_it_is(run_probe):
    truth = truth_of("quote_client")
    result = run_probe(CORPUS / "quote_client.py")
    assert result.returncode == 0, result.stderr
    d = json.loads((result.run_dir / "diagnosis.json").read_text())
    assert truth["cores_used"] < 0.2  # nobody computes: the main thread waits on sockets
    primary = d["primary"]
    assert (primary["kind"], primary["subkind"]) == ("io", "network"), primary
    assert primary["stage"].startswith("fetch_quote")
    # the handler's sleeps serve the client's waits: on the main thread's path, not beside it
    stages = {s["name"]: s for s in d["stages"]}
    handler = [s for name, s in stages.items() if name.startswith("QuoteHandler.do_GET")]
    assert all(s["path_share"] < 0.05 for s in handler), handler
    assert primary["share"] > 0.75
    assert any(i["role"] == "server loop" for i in d["run"]["idle"])


def test_calls_serialised_by_a_lock_are_a_lock_convoy_not_a_network_bound_stage(run_probe):
    # six threads, one client holding `with self._lock:` across each HTTP call; the
    # lock's acquire has no Python frame (it read as CPU, then as plain network wait)
    truth = truth_of("serial_upstream")
    assert truth["cores_used"] < 0.2  # the process waits: on the network and on the lock
    result = run_probe(CORPUS / "serial_upstream.py")
    assert result.returncode == 0, result.stderr
    d = json.loads((result.run_dir / "diagnosis.json").read_text())
    primary = d["primary"]
    assert (primary["kind"], primary["subkind"]) == ("contention", "lock"), primary
    assert primary["stage"].startswith("SharedClient.call_upstream")
    finding = d["findings"][0]
    assert finding["evidence"]["waiting_threads"] >= 3  # of the five that could queue
    assert d["recommendations"][0]["id"] == "reduce_lock_scope"
    assert "held across" in d["recommendations"][0]["how"]


def test_direct_disk_reads_in_an_unnamed_native_call_are_disk_waits_not_cpu(run_probe, tmp_path):
    # `os.preadv` with O_DIRECT: no rule names the call, and the frame with its CPU clock
    # reads "native code, little CPU" (it was cpu/native before the kernel was asked)
    truth = truth_of("shard_scan")
    main = truth["threads"][0]
    assert main["states"].get("D", 0) > 0.5 and main["cpu_s"] < 0.5 * truth["wall_s"]
    # The truth of this very run, read from outside over its scan: how much of it the
    # reads wait on the device is the virtual disk's to say (a CI run's read_block was on
    # a CPU for 81% of its time by its own clock), so the verdict is held to this run's
    shards = tmp_path / "shards"
    shards.mkdir()
    proc = run_probe.spawn(CORPUS / "shard_scan.py", env={"TMPDIR": str(shards)})
    scan = scan_truth(proc, shards)
    stdout, stderr = proc.communicate(timeout=120)
    if proc.returncode != 0 and "direct I/O failed" in stderr:
        pytest.skip(stderr.strip().splitlines()[-1])  # e.g. a tmpfs temp dir
    assert proc.returncode == 0, stderr
    run_dir = tmp_path / "run"
    d = json.loads((run_dir / "diagnosis.json").read_text())
    kernel = json.loads((run_dir / "meta.json").read_text())["collector"]["kernel_states"]
    primary = d["primary"]
    assert primary["stage"].startswith(truth["py_spy_top_on_cpu"] or "read_block")
    if kernel["unavailable"]:  # a host that refuses /proc/self/task/*/syscall
        assert primary["confidence"] <= 0.5, primary
        assert "kernel states could not be read" in primary["summary"]
        return
    assert kernel["reads"] + kernel["at_tick"] > 0  # asked with the GIL, or at the tick
    # the main thread (the lowest tid) by its scheduler's statistics: time off a CPU and
    # off a run queue is blocked time. Not the stat file's state: readings of it every
    # 20 ms put the thread R 23-73% of the scan in 4 runs, its schedstat on a CPU or
    # queued 18-21% of it
    assert scan["threads"], "the scan was never seen from outside"
    sched = scan["threads"][0]["schedstat"]
    blocked = scan["wall_s"] - sched["on_cpu_s"] - sched["runqueue_s"]
    expected = ("io", "disk") if blocked > scan["wall_s"] / 2 else ("cpu", "native")
    got = (primary["kind"], primary["subkind"])
    assert got == expected, (scan, kernel, primary["summary"], primary["confidence"])


SHARD_BYTES = 16 << 20  # shard_scan.py's: its last shard at this size is written and synced


def scan_truth(proc: subprocess.Popen, shards) -> dict:
    """``shard_scan``'s threads read from /proc while it scans: from its last shard's
    full size (written and synced) to its folder's removal, not its writes before."""

    def scanning() -> bool:
        last = list(shards.glob("shard-scan-*/shard-3.bin"))
        try:
            return proc.poll() is None and bool(last) and last[0].stat().st_size == SHARD_BYTES
        except OSError:  # removed between the glob and the stat: done
            return False

    deadline = time.monotonic() + 60
    while not scanning() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.01)
    return measure.watch_pid(proc.pid, scanning, every_s=0.02)


def diagnosis_of(run_probe, name: str) -> dict:
    result = run_probe(CORPUS / f"{name}.py")
    assert result.returncode == 0, result.stderr
    return json.loads((result.run_dir / "diagnosis.json").read_text())


def served_diagnosis(run_probe, tmp_path, name: str, out: str = "run") -> dict:
    """``probe run`` of corpus app ``name:app`` under uvicorn, driven by 8 clients for 6 s
    and stopped as Ctrl-C would: its diagnosis (its run directory ``tmp_path / out``)."""
    port = free_port()
    server = run_probe.spawn(
        "-m", "uvicorn", f"{name}:app", "--app-dir", CORPUS, "--port", str(port),
        "--log-level", "warning", out=tmp_path / out,
    )  # fmt: skip
    wait_for_port(port)
    answered = drive(port, clients=8, seconds=6)
    server.send_signal(signal.SIGINT)
    _, stderr = server.communicate(timeout=120)
    assert server.returncode == 0 and answered > 0, stderr
    return json.loads((tmp_path / out / "diagnosis.json").read_text())


def instances_gain(name: str) -> float:
    """Served app ``name``'s requests answered with two uvicorn workers over one, the
    medians of its truth's alternated runs (``served_variants.py``)."""
    counts = truth_of(name)["variants"]["instances"]["requests"]
    return statistics.median(counts["--workers 2"]) / statistics.median(counts["--workers 1"])


def busiest_thread(truth: dict) -> dict:
    return max(truth["threads"], key=lambda t: t["cpu_s"])


def test_consumers_starved_by_a_slow_producer_point_at_the_producer_s_parsing(run_probe):
    truth = truth_of("ingest_pipeline")
    producer = busiest_thread(truth)
    assert producer["cpu_s"] > 0.6 * truth["wall_s"]  # the producer computes
    assert sum(t["cpu_s"] for t in truth["threads"]) < 1.5 * producer["cpu_s"]
    d = diagnosis_of(run_probe, "ingest_pipeline")
    primary = d["primary"]
    assert (primary["kind"], primary["subkind"]) == ("cpu", "python"), primary
    assert primary["stage"].startswith(truth["py_spy_top_on_cpu"] or "parse_line")
    # the consumers' waits on the empty queue are not the bottleneck (their own CPU,
    # ~14% of the wall by /proc, may surface as a minor cpu finding)
    consume = [f for f in d["findings"] if f["stage"].startswith("consume")]
    assert all(f["kind"] == "cpu" and f["share"] < 0.2 for f in consume), consume


def test_a_producer_held_back_by_a_slow_consumer_points_at_the_consumer(run_probe):
    truth = truth_of("render_queue")
    main, worker = truth["threads"]
    assert worker["cpu_s"] > 0.7 * truth["wall_s"] > 3 * main["cpu_s"]
    d = diagnosis_of(run_probe, "render_queue")
    primary = d["primary"]
    assert (primary["kind"], primary["subkind"]) == ("cpu", "python"), primary
    assert primary["stage"].startswith("render_page")  # py-spy: its generator expression
    assert all(f["kind"] != "contention" for f in d["findings"]), d["findings"]


def test_a_process_pool_s_work_is_its_workers_function_on_both_cores_with_no_pool_advised(
    run_probe,
):
    # the parent waits in Pool.map (0.12 cores by /proc); the tree runs 1.84 cores of two
    truth = truth_of("pool_score")
    assert truth["cores_used"] < 0.2
    d = diagnosis_of(run_probe, "pool_score")
    primary = d["primary"]
    assert (primary["kind"], primary["subkind"]) == ("cpu", "python"), primary
    assert primary["stage"].startswith("score_document"), primary
    assert d["run"]["process_cores"] > 1.4, d["run"]
    # both cores are already in use: more processes or instances would buy nothing
    advised = {r["id"] for r in d["recommendations"]}
    assert not advised & {"multiprocess", "multi_instance"}, advised
    assert all(f["kind"] != "contention" for f in d["findings"]), d["findings"]


def test_frames_copied_to_a_process_pool_are_said_to_be_the_job_and_no_pool_advised(run_probe):
    # the feeder thread pickles and writes 24-MB frames into the workers' pipes: on a CPU
    # 59% of the run, asleep on the pipe 35% (/proc); threads instead served them 20x
    # faster. Written and measured before probe ran on it: "No dominant bottleneck" at 7%
    feeder = busiest_thread(truth_of("frame_stats"))
    assert feeder["states"]["R"] > 0.4 and feeder["wchans"].get("anon_pipe_write", 0) > 0.2
    d = diagnosis_of(run_probe, "frame_stats")
    copying = [n for n in d["notes"] if n.startswith("moving data between processes by copy")]
    assert copying and "shared_memory" in copying[0], d["notes"]
    # never a confident verdict on a stage that is not the copy, never more processes
    assert d["primary"]["confidence"] < 0.5, d["primary"]
    advised = {r["id"] for r in d["recommendations"]}
    assert not advised & {"multiprocess", "multi_instance"}, advised


def test_a_pool_of_small_tasks_is_not_said_to_be_paced_by_its_copies(run_probe):
    d = diagnosis_of(run_probe, "pool_score")
    assert not [n for n in d["notes"] if n.startswith("moving data between")], d["notes"]


def test_a_pure_python_thread_pool_is_limited_by_the_gil_and_told_to_use_processes(run_probe):
    # four threads of pure Python: the process runs at one core of two, each thread
    # runnable but sleeping on the GIL most of the time (py-spy's top on-CPU function is
    # a Condition's __enter__: it counts threads waiting for the GIL as active)
    truth = truth_of("tokenize_pool")
    workers = [t for t in truth["threads"][1:]]
    assert truth["cores_used"] < 1.2 and all(t["states"]["S"] > 0.5 for t in workers)
    d = diagnosis_of(run_probe, "tokenize_pool")
    primary = d["primary"]
    # contention/gil when the threads waited more than they ran, cpu/gil otherwise
    assert primary["subkind"] == "gil" and primary["kind"] in ("cpu", "contention"), primary
    assert primary["stage"].startswith("split_tokens")
    # processes instead of threads, either way: the stage on a process pool, or the job
    # once per core (both estimated ~1.6x here; which comes first is a coin toss)
    recs = {r["id"]: r for r in d["recommendations"]}
    assert d["recommendations"][0]["id"] in ("multiprocess", "multi_instance"), recs
    assert "pool.submit(split_tokens, payload)" in recs["multiprocess"]["how"]


def test_waiting_for_child_processes_is_a_subprocess_wait_not_the_network(run_probe):
    # subprocess.run(capture_output=True) waits in communicate's poll on the child's
    # pipes: its leaf (selectors) alone reads as a network wait
    truth = truth_of("convert_batch")
    assert truth["cores_used"] < 0.1
    d, pairs = diagnosed_between_pairs(run_probe, "convert_batch")
    primary = d["primary"]
    assert (primary["kind"], primary["subkind"]) == ("io", "subprocess"), primary
    assert primary["stage"].startswith("convert_file")
    # its children compute 0.1 s each, one at a time: side by side on the two cores, the
    # fix probe proposes since 2026-12-07 (until then none; --fixed realised 1.88-1.96x)
    overlap = d["recommendations"][0]
    assert overlap["id"] == "concurrent_io" and "create_subprocess_exec" in overlap["how"]
    realised = statistics.median(pairs)
    assert abs(overlap["estimated_speedup"] / realised - 1) <= 0.25, (overlap, pairs)


def test_two_threads_hashing_outside_the_gil_are_native_cpu_not_gil_waits(run_probe):
    truth = truth_of("digest_workers")
    hashing = [t for t in truth["threads"] if t["cpu_s"] > 0.8 * truth["wall_s"]]
    assert len(hashing) == 2 and truth["cores_used"] > 1.6
    d = diagnosis_of(run_probe, "digest_workers")
    primary = d["primary"]
    assert (primary["kind"], primary["subkind"]) == ("cpu", "native"), primary
    assert primary["stage"].startswith("fingerprint")


def test_a_loop_of_fetch_then_score_is_cpu_in_the_scoring_with_the_fetch_runner_up(run_probe):
    truth = truth_of("score_feed")
    (main,) = truth["threads"]
    assert 0.5 < main["cpu_s"] / truth["wall_s"] < 0.8  # the scoring, the rest the fetch
    d = diagnosis_of(run_probe, "score_feed")
    primary = d["primary"]
    assert (primary["kind"], primary["subkind"]) == ("cpu", "python"), primary
    assert primary["stage"].startswith(truth["py_spy_top_on_cpu"] or "score_items")
    runner = d["findings"][1]
    assert (runner["kind"], runner["subkind"]) == ("io", "network"), runner
    assert runner["stage"].startswith("fetch_page")


def test_an_httpx_call_in_flight_is_the_network_s_wait_and_its_calls_overlap(run_probe):
    # httpx reads through anyio, whose socket stream awaits an asyncio.Event: the task
    # sampler read every call in flight as waiting on other tasks, and the loop's idle
    # time stayed idle: "No dominant bottleneck: `run` 34% (cpu/native), confidence 2%",
    # fetch_features "100% on a CPU". Plain pairs (the docstring): 2.45-2.52 s one record
    # at a time, 0.45-0.49 s with 16 in flight (5.3x)
    pytest.importorskip("httpx")
    truth = truth_of("enrich_httpx")
    (loop,) = truth["threads"]
    assert loop["cpu_s"] < 0.3 * truth["wall_s"] and loop["wchans"]["do_epoll_wait"] > 0.5
    d = diagnosis_of(run_probe, "enrich_httpx")
    primary = d["primary"]
    assert (primary["kind"], primary["subkind"]) == ("io", "network"), primary
    assert primary["stage"].startswith("fetch_features"), primary
    first = d["recommendations"][0]
    assert first["id"] == "concurrent_io", d["recommendations"]
    # how many in flight is Goetz's rule on the call's CPU against its wait, which a
    # host moves (16 here, 9 in a clean-clone CI run); the estimate is not held here:
    # 5.8-6.9x in six runs against 5.3x, the stage's share (0.88-0.92, 0.86 by the
    # plain pairs) amplified by Amdahl at 16 in flight
    assert first["evidence"]["workers"] > 1, first["evidence"]


def test_calls_in_line_for_httpx_s_connection_pool_are_told_to_raise_its_limit(run_probe):
    # 16 records in flight through a client whose pool lends 2 connections: it read
    # "make the fetch_features calls concurrent" with asyncio.gather's sketch, where the
    # job already gathers 16. Plain pairs (the docstring): a pool of 16, 4.6x
    pytest.importorskip("httpx")
    result = run_probe(CORPUS / "enrich_httpx.py", "--concurrent", "16", "--pool", "2",
                       "--records", "200")  # fmt: skip
    assert result.returncode == 0, result.stderr
    d = json.loads((result.run_dir / "diagnosis.json").read_text())
    primary = d["primary"]
    assert (primary["kind"], primary["subkind"]) == ("contention", "lock"), primary
    assert d["findings"][0]["evidence"]["queued_in"] == "httpx.AsyncClient pool"
    first = d["recommendations"][0]
    assert first["id"] == "concurrent_io" and "Raise the limit to" in first["how"], first
    assert "httpx.Limits(max_connections=" in first["how"], first["how"]
    # the estimate is not held here: 3.0-3.7x in five runs against 4.6x (see the notes)


def test_grpc_s_blocking_calls_one_after_another_are_the_network_and_overlapping_them_the_fix(
    run_probe,
):
    # grpcio's blocking unary call polls its completion queue in the C core, in the
    # calling thread (no Python frame below _channel.py): the kernel's epoll_wait says
    # what it waits on. Plain pairs (the docstring): 16 in flight 5.8x
    pytest.importorskip("grpc")
    truth = truth_of("embed_grpc")
    main = truth["threads"][0]
    assert main["states"]["S"] > 0.8 and main["wchans"]["do_epoll_wait"] > 0.5
    d = diagnosis_of(run_probe, "embed_grpc")
    primary = d["primary"]
    assert (primary["kind"], primary["subkind"]) == ("io", "network"), primary
    assert primary["stage"].startswith("embed"), primary
    first = d["recommendations"][0]
    assert first["id"] == "concurrent_io" and first["evidence"]["workers"] > 1, first
    # the estimate is not held here: 7.0x in the first run against 5.8x (the stage's
    # share of sampled time, 0.91, over its share of the plain wall, ~0.88)


def test_a_grpc_server_s_handlers_are_its_work_not_its_poller_or_its_parked_main_thread(
    run_probe,
):
    # grpcio's server: handlers on a pool's threads, a poller thread of its own in the
    # completion queue, the main thread parked in wait_for_termination. Before the two
    # were known idle, the main thread's start-up and shutdown were the "batch path":
    # "I/O-bound in main, waiting on another process, confidence 100%" (the handlers'
    # stage 11%). Truth (the docstring): one core of Python under one GIL; threads buy
    # nothing, 2 processes 1.5-1.6x
    pytest.importorskip("grpc")
    truth = truth_of("rank_grpc")
    assert truth["cores_used"] < 1.1
    handlers = [t for t in truth["threads"] if t["cpu_s"] > 0.25]
    assert len(handlers) == 8, truth["threads"]
    d = diagnosis_of(run_probe, "rank_grpc")
    primary = d["primary"]
    assert primary["subkind"] == "gil", primary
    assert primary["stage"].startswith(("score", "rank")), primary
    assert primary["share"] > 0.6, primary
    assert all(not f["stage"].startswith(("main", "<library>")) for f in d["findings"][:2])
    roles = {r["role"] for r in d["run"]["idle"]}
    assert {"server loop", "server main thread"} <= roles, d["run"]["idle"]
    assert not any("server main thread" in n for n in d["notes"]), d["notes"]
    ids = [r["id"] for r in d["recommendations"]]
    assert ids[0] in ("multiprocess", "multi_instance"), d["recommendations"]
    # processes, measured: 1.5-1.6x; the estimate within a quarter of it
    assert 1.2 <= d["recommendations"][0]["estimated_speedup"] <= 2.0, d["recommendations"][0]


def test_a_job_that_is_mostly_its_imports_is_told_so_not_to_vectorise_or_fix_a_leak(run_probe):
    # a one-shot job importing torch and pandas for a tenth of a second of work. It read
    # "CPU-bound in `<module> (embed_once.py)`, vectorise the Python loops in it" and, from
    # its memory rising while the modules loaded, "Leak: memory grows 126 MiB/s,
    # confidence 99%", fix_leak ranked first
    pytest.importorskip("torch")
    pytest.importorskip("pandas")
    truth = truth_of("embed_once")
    rss = truth["rss_mb"]
    peak_at = next(t for t, mb in rss if mb >= 0.95 * max(mb for _, mb in rss))
    assert peak_at < 0.9 * truth["wall_s"]  # memory is done climbing before the end
    assert truth["py_spy_inclusive"]["_find_and_load"] > 0.6
    d = diagnosis_of(run_probe, "embed_once")
    primary = d["primary"]
    assert primary["stage"] == "<imports>" and primary["share"] > 0.6, primary
    assert primary["summary"].startswith("Start-up-bound: importing modules"), primary
    # what the imports load, by their share (importtime: torch 75%, pandas 25%)
    assert "torch" in primary["summary"] and "pandas" in primary["summary"], primary
    ids = [r["id"] for r in d["recommendations"]]
    assert not {"vectorize_python", "multi_instance", "fix_leak"} & set(ids), ids
    assert d["leak"]["state"] != "leak" and not d["leak"]["detected"], d["leak"]


def test_an_asyncio_client_s_time_is_its_coroutine_awaiting_the_network_not_an_idle_loop(
    run_probe,
):
    # the loop's thread sleeps in its selector (S 89% of /proc's readings, 0.11 cores):
    # the time is in `lookup`, suspended on its stream while no thread's stack shows it
    # (before the tasks were sampled: "no dominant bottleneck", `main` 35%, confidence 5%)
    truth = truth_of("enrich_async")
    (loop,) = truth["threads"]
    assert truth["cores_used"] < 0.3 and loop["states"].get("S", 0) > 0.8
    d = diagnosis_of(run_probe, "enrich_async")
    primary = d["primary"]
    assert (primary["kind"], primary["subkind"]) == ("io", "network"), primary
    assert primary["stage"].startswith("lookup")
    assert primary["share"] > 0.6
    assert all(f["kind"] != "contention" for f in d["findings"]), d["findings"]
    assert d["recommendations"][0]["id"] == "concurrent_io"
    # awaited in coroutines, not blocked in threads: the sketch gathers them (it led with
    # a thread pool, which a coroutine's awaits do not need)
    how = d["recommendations"][0]["how"]
    assert "asyncio.gather" in how and "await lookup(item)" in how, how
    assert "ThreadPoolExecutor" not in how, how
    # its loop sleeps in the selector: nothing waits for it
    assert all(loop["lagged_share"] < 0.5 for loop in d["run"]["event_loops"]), d["run"]
    assert not any("loop lag" in n for n in d["notes"]), d["notes"]


def test_a_fastapi_app_under_uvicorn_is_gil_bound_in_its_handler_and_its_pool_is_headroom(
    run_probe, tmp_path
):
    # undecorated, served, 8 clients: one core of two, the handlers' pure Python (58% of
    # the CPU by /proc) ahead of the event loop's HTTP handling (42%); the pool's workers
    # parked in their queue's get. It read "contention/lock in <library>, confidence
    # 100%" (the idle workers), and later "io/network in <library>" (the loop's sends,
    # caught runnable).
    pytest.importorskip("fastapi")
    pytest.importorskip("uvicorn")
    truth = truth_of("predict_api")
    assert truth["cores_used"] < 1.2
    d = served_diagnosis(run_probe, tmp_path, "predict_api")
    primary = d["primary"]
    assert primary["subkind"] == "gil" and primary["kind"] in ("cpu", "contention"), primary
    assert primary["stage"].startswith(("score_tokens", "normalise", "predict")), primary
    if primary["share"] >= 0.5:
        # the handlers lead the loop narrowly (58% to 42% of the CPU): not a certainty
        assert primary["confidence"] < 0.9, primary
    else:  # no stage at half (the edge: 0.50-0.59 in 32 runs): all on a CPU, together
        assert primary["summary"].startswith("CPU-bound in one interpreter: "), primary
    assert not any(f["subkind"] in ("lock", "network") for f in d["findings"]), d["findings"]
    assert "thread-pool worker" in {r["role"] for r in d["run"]["idle"]}
    assert not d["leak"]["detected"], d["leak"]
    # the loop's own CPU is uvicorn's HTTP handling, not a coroutine of the app's: its
    # lag (if read) is not blamed on the app's coroutines
    assert not any("run_in_executor" in n for n in d["notes"]), d["notes"]
    # uvicorn --workers 2: 1.47-1.64x the requests (the truth's variants)
    instances = next(r for r in d["recommendations"] if r["id"] == "multi_instance")
    assert abs(instances["estimated_speedup"] / instances_gain("predict_api") - 1) <= 0.25


def test_a_served_app_the_gil_holds_back_in_every_stage_is_gil_bound_and_told_to_run_instances(
    run_probe, tmp_path
):
    # embed_api: 8 pool threads hash words in Python and run a small torch model, every
    # stage waiting for the GIL (embed ~49%, the server's library code ~21%, word_ids
    # ~18%), no one of them most. It read "No dominant bottleneck" and a process pool in
    # embed (1.25x); uvicorn --workers 2 answered 1.66x the requests (medians of ten
    # alternated pairs, the truth's variants)
    pytest.importorskip("torch")
    pytest.importorskip("fastapi")
    pytest.importorskip("uvicorn")
    d = served_diagnosis(run_probe, tmp_path, "embed_api")
    primary = d["primary"]
    assert primary["subkind"] == "gil", primary
    gil = [f for f in d["findings"] if f["subkind"] == "gil" and f["stage"] != "<imports>"]
    assert "No dominant bottleneck" not in primary["summary"], primary
    if primary["share"] < 0.5:  # else the stage's own verdict
        assert primary["summary"].startswith("GIL-bound: the stages whose threads"), primary
    assert sum(f["share"] for f in gil) >= 0.5, d["findings"]
    first = d["recommendations"][0]
    assert first["id"] == "multi_instance", d["recommendations"]
    assert "uvicorn --workers 2" in first["how"], first
    assert abs(first["estimated_speedup"] / instances_gain("embed_api") - 1) <= 0.25, first


def test_a_served_app_on_a_cpu_in_every_stage_none_at_half_is_told_to_run_instances(
    run_probe, tmp_path
):
    # triage_api: an async route's three pure-Python steps, sized alike, on the event
    # loop's one thread (/proc: R 98%, 0.96 cores); uvicorn --workers 2 answered 1.64-1.83x
    # the requests (the truth's variants). No one stage holds half the path; written and
    # measured before probe ran on it
    pytest.importorskip("fastapi")
    pytest.importorskip("uvicorn")
    truth = truth_of("triage_api")
    assert truth["cores_used"] > 0.9 and busiest_thread(truth)["states"]["R"] > 0.9
    d = served_diagnosis(run_probe, tmp_path, "triage_api")
    primary = d["primary"]
    own = [f for f in d["findings"] if f["stage"] != "<imports>"]
    assert all(f["kind"] == "cpu" for f in own), d["findings"]
    if primary["share"] < 0.5:  # else the stage's own verdict
        assert primary["summary"].startswith("CPU-bound in one interpreter: "), primary
        # the stages are read together: which of them leads is no doubt of the verdict's
        assert primary["confidence"] >= 0.8, primary
    first = d["recommendations"][0]
    assert first["id"] == "multi_instance", d["recommendations"]
    assert "uvicorn --workers 2" in first["how"], first
    assert abs(first["estimated_speedup"] / instances_gain("triage_api") - 1) <= 0.25, first


def test_an_async_route_that_blocks_the_loop_on_a_sync_client_is_told_to_move_the_call_off_it(
    run_probe, tmp_path
):
    # undecorated, 8 clients: an async route calls a blocking HTTP client (~20 ms), so the
    # loop serves one request at a time (/proc: its one thread asleep reading the socket
    # 86% of the run, 0.1 cores). Awaited on the thread pool instead (LOOKUP_API_FIXED=1)
    # the same clients got 7.6x the answers (232-238 against 1,780-1,788 in 5 s, two
    # pairs, 2026-12-04). It read concurrent_io at 12.1x with a batch job's
    # ThreadPoolExecutor.map, and its loop-lag note blamed "CPU work in a coroutine".
    pytest.importorskip("fastapi")
    pytest.importorskip("uvicorn")
    loop = truth_of("lookup_api")["threads"][0]
    assert loop["cpu_s"] < 1.0 and loop["wchans"].get("wait_woken", 0) > 0.5
    d = served_diagnosis(run_probe, tmp_path, "lookup_api")
    primary = d["primary"]
    assert (primary["kind"], primary["subkind"]) == ("io", "network"), primary
    assert primary["stage"].startswith("FeatureStore.fetch"), primary
    first = d["recommendations"][0]
    assert first["id"] == "concurrent_io", d["recommendations"]
    # no more in flight than the 8 clients keep in the server; the realised 7.6x within 25%
    assert first["evidence"]["workers"] <= 9, first["evidence"]
    assert abs(first["estimated_speedup"] / 7.6 - 1) <= 0.25, first
    assert "run_in_threadpool" in first["how"] and "pool.map" not in first["how"], first["how"]
    [lag] = [n for n in d["notes"] if "loop lag" in n]
    assert "blocked in a call" in lag and "FeatureStore.fetch" in lag, lag
    assert "CPU work in a coroutine" not in lag, lag


# Requests in line for a limit, in two shapes: pooled_lookup's route borrows one of two
# store connections from an asyncio.Queue inside ConnectionPool.lookup, which also
# makes the call (it read "I/O-bound, waiting on the network, confidence 100%", no fix
# over 1.25x, a capacity ceiling of 1,135/s against 76/s measured); limited_api's route
# holds an asyncio.Semaphore of three around a call another function makes;
# pooled_sync_api's sync route, on Starlette's threads, borrows from a queue.Queue of two
# (it read "shorten what holds the lock": hold it around the shared state). Realised,
# plain (the docstrings' pairs): eight connections 3.84x; eight permits 2.0-2.3x; eight
# connections 3.64x
LIMITED = [
    ("pooled_lookup", "ConnectionPool.lookup", "asyncio.Queue", 3.84),
    ("limited_api", "fetch_profile", "asyncio.Semaphore", 2.17),
    ("pooled_sync_api", "ConnectionPool.lookup", "queue.Queue", 3.64),
]


@pytest.mark.parametrize(("name", "stage", "limit", "realised"), LIMITED)
def test_requests_in_line_for_a_pool_s_or_a_semaphore_s_permits_are_told_to_raise_it(
    run_probe, tmp_path, name, stage, limit, realised
):
    pytest.importorskip("fastapi")
    pytest.importorskip("uvicorn")
    loop = truth_of(name)["threads"][0]
    assert loop["cpu_s"] < 1.5 and loop["wchans"].get("do_epoll_wait", 0) > 0.5  # waits
    d = served_diagnosis(run_probe, tmp_path, name)
    primary = d["primary"]
    assert (primary["kind"], primary["subkind"]) == ("contention", "lock"), primary
    assert primary["stage"].startswith(stage), primary
    evidence = d["findings"][0]["evidence"]
    assert evidence["queued_in"] == limit and evidence["in_line_per_call"] >= 1, evidence
    first = d["recommendations"][0]
    assert first["id"] == "concurrent_io", d["recommendations"]
    assert "Raise the limit to 8" in first["how"], first["how"]
    assert abs(first["estimated_speedup"] / realised - 1) <= 0.25, first
    capacity = d["capacity"]
    assert capacity["bound_by"] == f"{limit} permits", capacity
    assert capacity["ceiling_per_s"] < 1.5 * capacity["measured_per_s"], capacity


def test_a_job_s_threads_in_line_for_a_pool_are_told_to_raise_it_with_the_job_s_gain(run_probe):
    # eight threads, a queue.Queue of two connections; it read "No fix estimated" (and,
    # before the limit was read, "hold the lock only around the shared state")
    truth = truth_of("pooled_batch")
    futex = [t for t in truth["threads"] if t["wchans"].get("futex_do_wait", 0) > 0.9]
    assert len(futex) >= 6, truth["threads"]  # the main thread and those in line
    d = diagnosis_of(run_probe, "pooled_batch")
    primary = d["primary"]
    assert (primary["kind"], primary["subkind"]) == ("contention", "lock"), primary
    assert primary["stage"].startswith("ProfilePool.lookup"), primary
    first = d["recommendations"][0]
    assert first["id"] == "concurrent_io" and "Raise the limit to 8" in first["how"], first
    # 3.74x realised with eight connections (the docstring's plain pairs), within 25%
    assert abs(first["estimated_speedup"] / 3.74 - 1) <= 0.25, first


def test_a_thread_per_request_flask_server_survives_sampling_and_is_native_cpu_bound(
    run_probe, tmp_path
):
    # werkzeug's threaded server starts a thread per request, each scanning SQLite in C
    # with the GIL released: 1.7 of 2 cores. Under probe it died of SIGSEGV in most runs
    # (the frames read while threads came and went, with a collection under way); then
    # it read "cpu/gil" (the kernel reader turned off by a thread caught exiting, so the
    # threads' waits for a core were taken for the GIL) and told to use processes, on
    # cores already busy. Its memory is held to no verdict here: see the note below.
    pytest.importorskip("flask")
    truth = truth_of("search_flask")
    assert truth["cores_used"] > 1.5 and truth["py_spy_top_on_cpu"] == "count_matches"
    port = free_port()
    server = run_probe.spawn(CORPUS / "search_flask.py", "--port", str(port))
    # werkzeug logs a line per request to stderr: read it while the clients drive, or
    # the pipe fills (~900 requests), the logging thread blocks on it, and every request
    # thread after it on the handler's lock (seen in CI: 93% "lock" in logging)
    output: list[str] = []
    drains = [
        threading.Thread(target=output.extend, args=(stream,), daemon=True)
        for stream in (server.stdout, server.stderr)
    ]
    for drain in drains:
        drain.start()
    wait_for_port(port)
    answered = drive(port, clients=8, seconds=6)
    server.send_signal(signal.SIGINT)
    server.wait(timeout=120)
    for drain in drains:
        drain.join(30)
    stderr = "".join(output)
    assert server.returncode == 0 and answered > 0, stderr[-3000:]
    d = json.loads((tmp_path / "run" / "diagnosis.json").read_text())
    primary = d["primary"]
    assert (primary["kind"], primary["subkind"]) == ("cpu", "native"), primary
    assert primary["stage"].startswith("count_matches"), primary
    assert not any(r["id"] == "multiprocess" for r in d["recommendations"])
    # No leak: RSS climbs for tens of seconds (connections in reference cycles, freed at
    # full collections; glibc's arenas; search_flask.py's docstring has the truth), and
    # one 6-s run in eight once read "leak" at 100% on it; since the full collection at
    # the run's end witnesses it (analyzers.leaks.recorded), 82 runs of this test read
    # no leak or undetermined, never leak (58 then, 24 on 2026-12-06)
    assert d["leak"]["state"] in ("no_leak", "undetermined"), d["leak"]


def test_a_job_whose_log_pipe_is_full_waits_on_the_process_reading_it_not_on_the_disk(run_probe):
    # the logging handler's write sits on a full pipe (anon_pipe_write 9 readings in 10):
    # frames alone name a file's write, and it read "io/disk", with "make the calls
    # concurrent" as the fix
    truth = truth_of("ship_logs")
    (main,) = truth["threads"]
    assert main["wchans"].get("anon_pipe_write", 0) > 0.8 and truth["cores_used"] < 0.1
    d = diagnosis_of(run_probe, "ship_logs")
    primary = d["primary"]
    assert (primary["kind"], primary["subkind"]) == ("io", "subprocess"), primary
    assert primary["stage"].startswith("main")
    assert not any(f["subkind"] == "disk" for f in d["findings"]), d["findings"]
    assert "concurrent_io" not in {r["id"] for r in d["recommendations"]}


# corpus case -> the recommendation its ``--fixed`` applies
FIXED_BY = {
    "serial_upstream": "reduce_lock_scope",  # the lock held only around the shared count
    "tokenize_pool": "multiprocess",  # the tokenizer on a process pool, one per core
    "score_feed": "concurrent_io",  # the pages fetched ahead on four threads
    "rerank_catalog": "gc_freeze",  # gc.freeze() once the catalog is loaded
}


def wall_clock_of(*args: str | os.PathLike[str]) -> float:
    """Seconds a plain ``python ARGS`` takes, no probe in it: the truth of a fix's gain.
    Not retaken on a busy host (tests/integration/host.py): with it, a clean-clone CI run
    realized tokenize_pool's pool at 2.45x and score_feed's at 1.56x against 1.81x and
    1.17x predicted, where pairs had read 1.40-1.94x and 1.21-1.71x before (session 89,
    cause not found)."""
    started = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, *map(str, args)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    try:
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
    assert proc.returncode == 0, err
    return time.perf_counter() - started


def fix_realized(script: os.PathLike[str]) -> float:
    """One plain pair's speedup: ``script``'s wall clock over its ``--fixed`` variant's."""
    return wall_clock_of(script) / wall_clock_of(script, "--fixed")


def diagnosed_between_pairs(run_probe, name: str) -> tuple[dict, list[float]]:
    """``name``'s diagnosis, and four plain pairs' speedups of its ``--fixed`` variant,
    two taken before the probe run and two after: the host and minute it was made on."""
    script = CORPUS / f"{name}.py"
    pairs = [fix_realized(script), fix_realized(script)]
    d = diagnosis_of(run_probe, name)
    return d, [*pairs, fix_realized(script), fix_realized(script)]


def test_estimates_land_near_the_speedups_their_fixes_realize_by_the_wall_clock(
    run_probe, tmp_path
):
    # Each case's estimate, from its undecorated run, for the fix its --fixed variant
    # applies; the realized speedup is the plain scripts' wall clocks, before over after,
    # measured here. The bar (issue 12): median error within 15%, none over 25%.
    errors, seen = {}, {}
    for name, fix in FIXED_BY.items():
        script = CORPUS / f"{name}.py"
        a, b = tmp_path / f"{name}-before", tmp_path / f"{name}-after"
        # paired, the median of five ratios, taken around the two probe runs so that the
        # truth and the estimate see the machine of the same minute: its speed drifts by
        # a third within minutes (score_feed's plain run took 2.2 s, then 2.8-3.1 s), and
        # one pair's ratio spreads by a fifth either way (12 pairs each, 2026-11-26:
        # score_feed 1.21-1.71, tokenize_pool 1.40-1.94). With three pairs taken before
        # both probe runs, a run of the CI command read 1.55 and 2.34 where probe said 1.28
        # and 1.86
        pairs = [fix_realized(script), fix_realized(script)]
        assert run_probe(script, out=a).returncode == 0
        pairs.append(fix_realized(script))
        assert run_probe(script, "--fixed", out=b).returncode == 0
        pairs += [fix_realized(script), fix_realized(script)]
        realized = statistics.median(pairs)
        diff = subprocess.run(
            probe_cmd("diff", a, b, "--applied", fix, "--json"),
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert diff.returncode == 0, diff.stderr
        c = json.loads(diff.stdout)
        # the fix's id, with "@STAGE" where the diagnosis gave it to more than one stage
        # (a CI run's tokenize_pool had multiprocess on two: analyzers.diff._named)
        assert c["basis"] == "job" and [a.partition("@")[0] for a in c["applied"]] == [fix], c
        # probe diff reads the gain from the two runs' own wall times (probe's overhead in
        # each: on tokenize_pool's GIL-bound threads it varies by up to a third from run
        # to run, issue 17's, so its reading is held to the direction, not to the truth)
        assert c["job_wall_s"]["speedup"] > 1.0 and c["relative_error"] is not None, c
        errors[name] = abs(c["predicted_speedup"] - realized) / realized
        seen[name] = (
            round(c["predicted_speedup"], 2),
            round(realized, 2),
            [round(p, 2) for p in pairs],
        )
    assert statistics.median(errors.values()) <= 0.15, seen
    assert max(errors.values()) <= 0.25, seen


def test_a_coroutine_ranking_on_the_event_loop_is_cpu_python_in_it_not_its_awaits(run_probe):
    # sixteen queries in flight: their store calls overlap, their ranking (pure Python,
    # inline in the coroutine) runs on the loop's one thread, on a CPU 79% of /proc's
    # readings; the awaits are a minor share. At start the main thread waits for the
    # store's port on its stdout pipe (anon_pipe_read, 7% of the readings): a minor
    # subprocess wait, truly there
    truth = truth_of("rank_async")
    (loop,) = truth["threads"]
    assert loop["cpu_s"] > 0.6 * truth["wall_s"] and loop["states"]["R"] > 0.6
    d = diagnosis_of(run_probe, "rank_async")
    primary = d["primary"]
    assert (primary["kind"], primary["subkind"]) == ("cpu", "python"), primary
    assert primary["stage"].startswith(truth["py_spy_top_on_cpu"] or "rank_query")
    assert primary["share"] > 0.6 and primary["confidence"] > 0.5, primary
    for f in d["findings"][1:]:
        assert f["kind"] == "cpu" or (f["subkind"], f["stage"][:4]) == ("subprocess", "main")
        assert f["share"] < 0.25, f
    assert d["recommendations"][0]["id"] == "vectorize_python", d["recommendations"]
    # and the others' wait for it: callbacks queued behind the ranking (loop lag)
    (loop,) = d["run"]["event_loops"]
    assert loop["lagged_share"] >= 0.5 and loop["busiest"].startswith("rank_query"), loop
    assert any("loop lag" in n and "rank_query" in n for n in d["notes"]), d["notes"]


def collector_finding(d: dict) -> dict:
    return next(f for f in d["findings"] if f["rule"] == "collector_pauses")


def test_full_collections_walking_a_catalog_kept_for_the_run_are_the_limit_and_freezing_it_the_fix(
    run_probe,
):
    # 58 full collections of ~60 ms, each walking the 800,000 objects of a catalog loaded
    # at start-up; py-spy's Python stacks put that time in gather_candidates (74% of its
    # samples), where the allocation sets each off. It read cpu/python there, "run one
    # instance per core", the collector nowhere
    truth = truth_of("rerank_catalog")
    assert truth["py_spy_native_collector"] >= 0.4, truth  # half its samples, from outside
    # the fix's gain: plain pairs taken beside the probe run, on this host, this minute
    # (the docstring's five pairs read 1.62-1.78 one day, 1.65-1.83 the next), their
    # median: one pair of a CI run read 1.29 beside 1.62, and the mean of the two put a
    # 1.85x estimate 27% over it (2026-12-07)
    d, pairs = diagnosed_between_pairs(run_probe, "rerank_catalog")
    primary = d["primary"]
    assert (primary["kind"], primary["subkind"]) == ("cpu", "gc"), primary
    assert primary["stage"].startswith("gather_candidates"), primary
    assert d["findings"][0]["evidence"]["full_collections"] >= 20, d["findings"][0]
    freeze = next(r for r in d["recommendations"] if r["id"] == "gc_freeze")
    assert "gc.freeze()" in freeze["how"], freeze
    realised = statistics.median(pairs)
    assert abs(freeze["estimated_speedup"] / realised - 1) <= 0.25, (freeze, pairs)


def test_collections_walking_a_cache_the_requests_fill_are_the_limit_but_no_freeze_is_promised(
    run_probe,
):
    # written after the rule, to catch it out: 65% of the run in collections (py-spy
    # --native), the full ones walking a per-user cache filled by the requests themselves;
    # gc.freeze() at start realised 1.09x (the docstring's five pairs), where the rule as
    # first written promised 1.87x
    truth = truth_of("session_scores")
    assert truth["py_spy_native_collector"] >= 0.5, truth
    d = diagnosis_of(run_probe, "session_scores")
    primary = d["primary"]
    assert (primary["kind"], primary["subkind"]) == ("cpu", "gc"), primary
    assert primary["stage"].startswith("build_features"), primary
    assert d["findings"][0]["evidence"]["start_up_heap"] < 0.5, d["findings"][0]
    assert all(r["id"] != "gc_freeze" for r in d["recommendations"]), d["recommendations"]
    freeze = next(r for r in d["minor_recommendations"] if r["id"] == "gc_freeze")
    assert abs(freeze["estimated_speedup"] / 1.09 - 1) <= 0.25, freeze


def plain_answers(name: str, env: dict[str, str]) -> int:
    """Answers ``drive.py``'s 8 clients got in 4 s (after 1 s of warm-up) from ``name:app``
    under plain uvicorn, no probe: a fix's realised gain, on this host, this minute."""
    return answered(name, env=env, seconds=4.0, warm_up=1.0)


def held_batches_diagnosed(run_probe, tmp_path, name: str, batcher: str) -> dict:
    """Served app ``name``'s diagnosis, asserted to say its batches wait out their window
    in ``batcher`` and to propose closing them at the eight requests in flight first."""
    d = served_diagnosis(run_probe, tmp_path, name)
    primary = d["primary"]
    assert (primary["kind"], primary["subkind"]) == ("io", "sleep"), primary
    assert primary["stage"].startswith(batcher), primary
    close = d["recommendations"][0]
    assert close["id"] == "close_held_batches", d["recommendations"]
    assert "MAX_BATCH = 8" in close["how"], close
    return d


def realised_within(d: dict, name: str) -> None:
    """The diagnosis's first fix, closing ``name``'s batches at the eight requests in
    flight, against four plain pairs' gains (``BATCH_MAX=8`` over its 32) taken here, this
    host, this minute: never more than 1.1 times their median, never under half of it."""
    close = d["recommendations"][0]
    pairs = [
        plain_answers(name, {"BATCH_MAX": "8"}) / plain_answers(name, {"BATCH_MAX": "32"})
        for _ in range(4)
    ]
    realised = statistics.median(pairs)
    assert 0.5 * realised <= close["estimated_speedup"] <= 1.1 * realised, (close, pairs)


def test_a_served_app_s_collections_of_its_start_up_trie_are_told_to_freeze_it(run_probe, tmp_path):
    # 150,000 words in a trie of dicts built at start-up; each request's candidates
    # outlive two young collections, so the full ones keep walking the trie: 34% of the
    # server's samples in the collector by py-spy --native, start-up's included
    pytest.importorskip("fastapi")
    pytest.importorskip("uvicorn")
    truth = truth_of("suggest_api")
    assert truth["py_spy_native_collector"] >= 0.25, truth
    d = served_diagnosis(run_probe, tmp_path, "suggest_api")
    paused = collector_finding(d)
    assert paused["evidence"]["over"] == "serving", paused  # start-up's are not the service's
    assert paused["stage"].startswith("complete"), paused
    freeze = next(r for r in d["recommendations"] if r["id"] == "gc_freeze")
    # realised with SUGGEST_FREEZE=1 in plain pairs taken here, beside the probe run: the
    # docstring's five read 1.50x, where a clean-clone CI run's estimate was 2.44x (its
    # collections held 59% of the serving time, 34% in every run here): the truth of the
    # host and minute the estimate was made on, the median of four pairs (two pairs read
    # 1.35x and 1.59x here, and their mean put a 1.85x estimate 26% over, 2026-12-07)
    pairs = [
        plain_answers("suggest_api", {"SUGGEST_FREEZE": "1"})
        / plain_answers("suggest_api", {"SUGGEST_FREEZE": "0"})
        for _ in range(4)
    ]
    realised = statistics.median(pairs)
    assert abs(freeze["estimated_speedup"] / realised - 1) <= 0.25, (freeze, pairs)
    # its own Python and the collector's walks are about as large: never a confident
    # verdict that leaves the collector out
    primary = d["primary"]
    if primary["subkind"] != "gc":
        assert primary["confidence"] < 0.5, primary
        assert any("garbage collector" in doubt for doubt in d["findings"][0]["evidence"]["doubts"])


def test_batches_held_past_their_last_request_are_told_to_close_at_the_requests_in_flight(
    run_probe, tmp_path
):
    # written before the rule: eight clients, a batcher taking up to 32 requests or 30 ms,
    # so each batch holds the eight and waits out its window. It read "CPU-bound in
    # <library>" (the loop's busy third, asyncio's sends) and "run one instance per core:
    # 1.80x", where two workers realised 1.06-1.15x (its truth's variants)
    truth = truth_of("batch_window_api")
    (loop,) = truth["threads"]
    assert loop["wchans"]["do_epoll_wait"] > 0.5 and truth["cores_used"] < 0.5
    d = held_batches_diagnosed(run_probe, tmp_path, "batch_window_api", "batcher")
    assert not any(r["id"] == "multi_instance" for r in d["recommendations"]), d
    # realised in plain pairs beside the probe run, on this host, this minute: batches
    # closed at eight (the truth's five pairs read 3.7-5.4x, four runs of this test
    # 3.8x, 5.5x, 5.5x and 5.9x at the median). The estimate is a lower bound and runs
    # low: the loop's work a request costs 0.6-0.7 of itself once it no longer idles
    # between batches (analyzers.batch_window), which a run of the windowed service
    # cannot see. Never more than realised, and never under half of it
    realised_within(d, "batch_window_api")


def test_a_batcher_thread_s_held_batches_are_its_window_s_not_a_lock_s(run_probe, tmp_path):
    # written before the rule read batcher threads: the same batches as
    # batch_window_api's, served by sync handlers on FastAPI's thread pool and a batcher
    # thread on a queue.Queue. It read "contention-bound in predict, waiting on locks"
    # at 100% with "shorten what holds the lock" (3.7x): no lock is held, every thread
    # but the loop's is asleep on a futex nearly all the time (its truth)
    truth = truth_of("batch_thread_api")
    loop, *others = sorted(truth["threads"], key=lambda t: -t["cpu_s"])
    assert loop["wchans"]["do_epoll_wait"] > 0.5 and truth["cores_used"] < 0.5
    assert len(others) >= 9 and all(t["wchans"].get("futex_do_wait", 0) > 0.8 for t in others)
    d = held_batches_diagnosed(run_probe, tmp_path, "batch_thread_api", "next_batch")
    # realised beside the probe run, as batch_window_api's (its truth's five pairs:
    # 2.2-3.2x). The bound is every thread's CPU over the cycles, the interpreter they
    # share busy all the time once the holds are gone: a lower bound
    realised_within(d, "batch_thread_api")


def test_a_blas_team_spinning_beside_the_loop_holds_no_share_of_the_gil(run_probe, tmp_path):
    # the same batching app with numpy's BLAS left at one thread per core: OpenBLAS's team
    # spins between batches. Its CPU was counted as the GIL's: the capacity block read
    # "bound by the GIL" at 163 requests/s with 191/s served in the same run
    truth = truth_of("batch_window_blas_api")
    loop, team = sorted(truth["threads"], key=lambda t: t["cpu_s"])
    assert loop["wchans"]["do_epoll_wait"] > 0.5 and team["cpu_s"] > 0.5 * truth["wall_s"]
    loop_cores = loop["cpu_s"] / truth["wall_s"]  # the most the GIL can be held
    d = served_diagnosis(run_probe, tmp_path, "batch_window_blas_api")
    assert d["recommendations"][0]["id"] == "close_held_batches", d["recommendations"]
    c = d["capacity"]
    gil = next(s for s in c["stations"] if s["name"] == "gil")
    held = gil["demand_ms"] / 1e3 * c["measured_per_s"]  # the GIL's utilisation, modelled
    # within what the loop's thread used outside probe, and half again for probe's own
    # work in it (a run here read 0.31 against the truth's 0.32; the native threads'
    # CPU counted as the GIL's read 1.19)
    assert held <= 1.5 * loop_cores, (held, loop_cores, c["stations"])
    assert c["bound_by"] == "cpu" and c["ceiling_per_s"] >= c["measured_per_s"], c


def test_consumers_working_beside_a_paced_feed_are_off_the_path_the_feed_is_on_it(run_probe):
    # asyncio.run's task reads a feed that sends an item every 8 ms; eight consumer tasks
    # look each up (20 ms) and wait for the next most of the time. Plain runs (the
    # docstring): consumers' upstream instant, 4.21-4.22 s against 4.23-4.25 s; the feed 4x
    # faster, 1.45-1.55 s. Shared among the tasks on I/O by count, the consumers' calls
    # read 66% of the run with a 2.6x concurrent_io fix
    truth = truth_of("consume_feed")
    (loop,) = truth["threads"]
    assert loop["cpu_s"] < 0.2 * truth["wall_s"] and loop["wchans"]["do_epoll_wait"] > 0.5
    d = diagnosis_of(run_probe, "consume_feed")
    primary = d["primary"]
    assert (primary["kind"], primary["subkind"]) == ("io", "network"), primary
    assert primary["stage"].startswith("produce"), primary
    consume = [f for f in d["findings"] if f["stage"].startswith("consume")]
    assert all(f["share"] < 0.1 for f in consume), consume
    assert not any(r["stage"].startswith("consume") for r in d["recommendations"]), d
    # the feed is one connection its far end paces (the kernel's counts on it: data
    # received, nothing sent): no fix overlaps its reads (it read "make the produce calls
    # concurrent, 8.4x"), and a note says what would make it faster
    assert not any(r["id"] == "concurrent_io" for r in d["recommendations"]), d
    paced = [n for n in d["notes"] if n.startswith("`produce") and "far end paces" in n]
    assert paced and "the source sending faster" in paced[0], d["notes"]


def _hogs(n: int):
    """``n`` CPU-bound processes beside the test's (on this machine kind's 2 cores), each
    in a session of its own: the kernel shares the cores among sessions first where it
    groups them (``/proc/sys/kernel/sched_autogroup_enabled``, on here), and probe's run
    has its own (``run_probe``). Three hogs in pytest's one session took a single share:
    in a CI run the worker waited 0.15 s for a core against 1.30 s on one, under the
    test's condition."""
    hogs = [
        subprocess.Popen([sys.executable, "-c", "while True: pass"], start_new_session=True)
        for _ in range(n)
    ]
    yield
    for hog in hogs:
        hog.kill()
        hog.wait()


@pytest.fixture
def cpu_hogs():
    yield from _hogs(3)


@pytest.fixture
def cpu_hog():
    yield from _hogs(1)


def _schedstat(pid: int) -> dict[int, tuple[int, int]]:
    """Each thread's (ns on a CPU, ns on a run queue) now, from /proc (truth)."""
    out = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                run_ns, queued_ns, _ = map(int, f.read().split())
        except (OSError, ValueError):
            continue
        out[int(tid)] = (run_ns, queued_ns)
    return out


def run_with_schedstat(run_probe, name: str, run_dir) -> dict[int, tuple[float, float]]:
    """``probe run`` of corpus service ``name`` into ``run_dir``, with each of its threads'
    (s on a CPU, s on a run queue) read from /proc every 50 ms meanwhile (truth, from
    outside)."""
    proc = run_probe.spawn(CORPUS / f"{name}.py", out=run_dir)
    ran = _queued_and_ran_while(proc)
    stdout, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 0, stderr
    return ran


def _queued_and_ran_while(proc: subprocess.Popen) -> dict[int, tuple[float, float]]:
    first: dict[int, tuple[int, int]] = {}
    last: dict[int, tuple[int, int]] = {}
    while proc.poll() is None:
        try:
            now = _schedstat(proc.pid)
        except OSError:
            break
        for tid, figures in now.items():
            first.setdefault(tid, figures)
        last.update(now)
        time.sleep(0.05)
    return {
        tid: ((last[tid][0] - first[tid][0]) / 1e9, (last[tid][1] - first[tid][1]) / 1e9)
        for tid in last
    }


def test_a_gil_bound_pool_beside_a_busy_process_is_never_a_confident_non_gil_verdict(
    run_probe, cpu_hog, tmp_path
):
    # tokenize_pool beside one CPU-bound process: its threads wait on a run queue longer
    # than they run, and whether that wait or the GIL holds them back depends on the
    # other load, not on the service. Before: cpu/python at 100% in 1 run of 5 (its
    # run-queue time counted as CPU demand), contention/gil at 97-100% in 2 (counted as
    # the GIL's), by what the sampler happened to catch.
    run_dir = tmp_path / "run"
    ran = run_with_schedstat(run_probe, "tokenize_pool", run_dir)
    on_cpu, queued = (sum(figures[i] for figures in ran.values()) for i in (0, 1))
    # the condition: 62-71% of the threads' ready time on a run queue here (2026-11-27)
    assert queued > 0.3 * (queued + on_cpu), ran
    primary = json.loads((run_dir / "diagnosis.json").read_text())["primary"]
    if primary["subkind"] != "gil":
        # the verdict it reads without the other load is the GIL's, and says so
        assert primary["confidence"] <= 0.5, primary
        assert "other processes held" in primary["summary"], primary["summary"]
        assert "waiting for the GIL" in primary["summary"], primary["summary"]


def test_a_worker_waiting_for_a_core_beside_cpu_hogs_is_not_read_as_waiting_on_its_queue(
    run_probe, cpu_hogs, tmp_path
):
    # render_queue with three CPU-bound processes beside it: its worker spends as long on
    # a run queue as on a CPU, and is often caught in `queue.get` having just left it.
    # Truth from outside, in the same run: each thread's schedstat, read every 50 ms.
    run_dir = tmp_path / "run"
    ran = run_with_schedstat(run_probe, "render_queue", run_dir)
    worker = max(ran, key=lambda tid: ran[tid][0])  # the thread that renders
    truth_run_s, truth_queued_s = ran[worker]
    # the condition the test is about: under probe here, 1.09-2.01 s queued for 0.75-1.30 s
    # run (4 runs, each hog in a session of its own; 2026-11-27)
    assert truth_queued_s > 0.15 * truth_run_s, ran[worker]
    samples = load(run_dir).tables["samples"]
    mine = samples[samples["thread_id"] == worker]
    queued_s = float(mine["queued_ns"].sum()) / 1e9
    # each interval's delay, held to its time off the CPU: most of the kernel's figure.
    # Above it by what the outside readings, every 50 ms, miss before the first and after
    # the last (probe read 1.06-1.11x of it in 2 runs of 4)
    assert 0.5 * truth_queued_s <= queued_s <= 1.25 * truth_queued_s, (queued_s, ran[worker])
    # so the verdict is the worker's rendering, and its waits for a core are no lock's
    d = json.loads((run_dir / "diagnosis.json").read_text())
    primary = d["primary"]
    assert (primary["kind"], primary["subkind"]) == ("cpu", "python"), primary
    assert primary["stage"].startswith("render_page")
    assert all(f["kind"] != "contention" for f in d["findings"]), d["findings"]
    # and the reader is told the figures were taken on cores other processes held
    (note,) = [n for n in d["notes"] if n.startswith("waited for a CPU")]
    assert "other processes kept" in note, note


# Each step's share, within this of the truth: the largest error in 5 runs here (0.071,
# fingerprint read 0.323 against the same run's timers' 0.394; 2026-11-29) and 3 standard
# errors of a share near 0.4 from 600 samples (0.06), rounded down. A sampler that reads
# stacks once it has the GIL read fingerprint 1.00 and the other two 0.
WITHIN_STEP_SHARE = 0.12


@pytest.mark.skipif(peek_module() is None, reason="probe._tickpeek not built or refused here")
def test_steps_shorter_than_the_switch_interval_are_charged_where_they_run_not_to_the_gil_s_release(
    run_probe,
):
    # feature_digest: per record, pure Python (tokenize), hashlib with the GIL released
    # (fingerprint), json.dumps keeping it (encode), each 13-40 us. Their split moves with
    # the host (47/32/18% of the loop by py-spy one hour, 38/40/22% by py-spy and by the
    # timers three hours later, same day: its truth.json and docstring), so the truth is
    # the run's own: --timed times each step around its call, ~0.3 us a record.
    result = run_probe(CORPUS / "feature_digest.py", "--seconds", "6", "--timed")
    assert result.returncode == 0, result.stderr
    [timed] = [line for line in result.stdout.splitlines() if line.startswith('{"loop_s"')]
    truth = json.loads(timed)["spent_s"]
    d = json.loads((result.run_dir / "diagnosis.json").read_text())
    steps = ("tokenize", "fingerprint", "encode")
    read = {s["name"].split(" (")[0]: s["path_share"] for s in d["stages"]}
    assert all(step in read for step in steps), read
    loop_read, loop_truth = sum(read[s] for s in steps), sum(truth[s] for s in steps)
    errors = {s: read[s] / loop_read - truth[s] / loop_truth for s in steps}
    assert all(abs(e) <= WITHIN_STEP_SHARE for e in errors.values()), (errors, read, truth)
    meta = json.loads((result.run_dir / "meta.json").read_text())
    at_tick = meta["collector"]["stacks_at_tick"]
    assert at_tick["read"] > 10 * at_tick["refused"], at_tick


def stream_prompts(run_probe, tmp_path, *args: str) -> dict:
    result = run_probe(CORPUS / "stream_prompts.py", *args, out=tmp_path / "-".join(("run", *args)))
    assert result.returncode == 0, result.stderr
    return json.loads((result.run_dir / "diagnosis.json").read_text())


def test_streamed_answers_asked_one_after_another_are_calls_to_overlap(run_probe, tmp_path):
    # written after the stream rule (consume_feed) to catch it out: each prompt's answer
    # is a stream of tokens paced by the server, but the prompts are calls that overlap.
    # Plain pairs (the docstring): 4.06-4.10 s one at a time, 0.43-0.47 s with 16 in
    # flight (9.1x; 8 in flight 6.4x). A connection a prompt, each read to its end
    # sending nothing: more connections than tasks, so not one stream, and its 24 calls
    # counted: 16 in flight take two rounds (read as 16-fold it said 8.9-12.4x)
    truth = truth_of("stream_prompts")
    (loop,) = truth["threads"]
    assert loop["cpu_s"] < 0.2 * truth["wall_s"] and loop["wchans"]["do_epoll_wait"] > 0.5
    d = stream_prompts(run_probe, tmp_path)
    primary = d["primary"]
    assert (primary["kind"], primary["subkind"]) == ("io", "network"), primary
    first = d["recommendations"][0]
    assert first["id"] == "concurrent_io", d["recommendations"]
    assert first["evidence"]["workers"] == 16, first["evidence"]
    assert abs(first["estimated_speedup"] / 9.1 - 1) <= 0.25, first
    assert not any("far end paces" in n for n in d["notes"]), d["notes"]
    # over one kept-alive connection a request goes before each answer: calls again, and
    # in flight at once each needs a connection of its own (the sketch's gather over the
    # one connection's reader would interleave the answers)
    kept = stream_prompts(run_probe, tmp_path, "--keep-alive")
    first = kept["recommendations"][0]
    assert first["id"] == "concurrent_io", kept["recommendations"]
    assert "Its calls went over one connection kept open" in first["how"], first
    assert "kept open" not in d["recommendations"][0]["how"]


def test_one_answer_streamed_for_the_whole_run_gets_no_fix_that_overlaps_its_reads(
    run_probe, tmp_path
):
    # one prompt of 300 tokens: 3.21 s, and 3.17-3.24 s with --concurrent 8 (the docstring)
    d = stream_prompts(run_probe, tmp_path, "--prompts", "1", "--tokens", "300")
    primary = d["primary"]
    assert (primary["kind"], primary["subkind"]) == ("io", "network"), primary
    assert not any(r["id"] == "concurrent_io" for r in d["recommendations"]), d
    paced = [n for n in d["notes"] if "reads one connection its far end paces" in n]
    assert paced and paced[0].startswith(f"`{primary['stage']}`"), d["notes"]


def intra_op_notes(d: dict) -> list[str]:
    return [n for n in d["notes"] if "intra-op threads oversubscribe" in n]


def test_a_thread_pool_running_torch_on_full_cores_is_told_its_intra_op_threads_cost(
    run_probe, tmp_path
):
    # 8 pool threads each running a torch MLP, torch's 2 intra-op threads each, 2 cores:
    # torch.set_num_threads(1) 1.17x faster on the whole run, ~1 s less CPU (the truth's
    # variants). It read "CPU-bound in classify, native code; no fix" and said nothing of
    # the 16 threads on 2 cores
    pytest.importorskip("torch")
    truth = truth_of("classify_threads")
    wall = truth["variants"]["wall_s"]
    default = wall["default (8 workers, torch's 2 intra-op threads)"]
    assert max(wall["--torch-threads 1"]) < min(default)
    d = diagnosis_of(run_probe, "classify_threads")
    primary = d["primary"]
    assert (primary["kind"], primary["subkind"]) == ("cpu", "native"), primary
    assert primary["stage"].startswith("classify"), primary
    [note] = intra_op_notes(d)
    assert "torch.set_num_threads(1)" in note and "Not estimated" in note, note
    # one thread calling torch: intra-op threads are what uses the second core (1.25x)
    alone = run_probe(
        CORPUS / "classify_threads.py", "--workers", "1", "--requests", "1200",
        out=tmp_path / "alone",
    )  # fmt: skip
    assert alone.returncode == 0, alone.stderr
    d = json.loads((alone.run_dir / "diagnosis.json").read_text())
    assert not intra_op_notes(d), d["notes"]


def test_a_served_torch_route_gets_the_intra_op_note_where_torch_fills_the_cores_only(
    run_probe, tmp_path
):
    # two FastAPI apps whose sync routes run torch on the thread pool, 8 clients. In
    # score_api the model is the work: one intra-op thread answered 1.07-1.13x the
    # requests. In embed_api the route's pure-Python hashing under the GIL is: no change
    # (the truths' variants). A frozen TorchScript graph bought score_api ~1.02x: once
    # recommended first at "∞" (a request span on 8 pool threads summed over one
    # thread's window, p = 1.16); the spans probe makes around a served route are no
    # model stage
    pytest.importorskip("torch")
    pytest.importorskip("fastapi")
    pytest.importorskip("uvicorn")
    scored = served_diagnosis(run_probe, tmp_path, "score_api")
    assert len(intra_op_notes(scored)) == 1, scored["notes"]
    every = scored["recommendations"] + scored["minor_recommendations"]
    assert all(r["p"] is not None and 0 < r["p"] <= 1 for r in every), every
    graph = [r for r in scored["recommendations"] if r["id"] == "inference_runtime"]
    assert not graph or graph[0]["estimated_speedup"] < 1.5, graph
    embedded = served_diagnosis(run_probe, tmp_path, "embed_api", "embed")
    assert not intra_op_notes(embedded), embedded["notes"]
    # its head as a frozen graph: no faster (the truth's second sitting). The handler's
    # span holds the route's hashing too; read as the model's glue it proposed 1.6x
    ids = [r["id"] for r in embedded["recommendations"]]
    assert "inference_runtime" not in ids, embedded["recommendations"]


def test_a_job_waiting_on_its_children_one_at_a_time_is_told_to_run_them_side_by_side(
    run_probe,
):
    # written before the rule, to find it missing: 86% of the job waiting on xz children
    # one after another (their CPU, not the job's), "No fix estimated to buy 1.25x or
    # more"; a pool of two realised 1.8-2.0x (the docstring)
    if shutil.which("xz") is None:
        pytest.skip("needs the xz command")
    truth = truth_of("compress_jobs")
    (main,) = truth["threads"]
    assert main["cpu_s"] < 0.3 * truth["wall_s"], main  # the job's own thread mostly waits
    d, pairs = diagnosed_between_pairs(run_probe, "compress_jobs")
    primary = d["primary"]
    assert (primary["kind"], primary["subkind"]) == ("io", "subprocess"), primary
    assert primary["stage"].startswith("compress"), primary
    overlap = d["recommendations"][0]
    assert overlap["id"] == "concurrent_io" and overlap["stage"].startswith("compress")
    assert "create_subprocess_exec" in overlap["how"], overlap
    # the children's CPU, counted by the kernel as they were waited for: most of the waits
    evidence = overlap["evidence"]
    assert evidence["children_cpu_s"] > 0.5 * evidence["waited_s"], evidence
    realised = statistics.median(pairs)
    assert abs(overlap["estimated_speedup"] / realised - 1) <= 0.25, (overlap, pairs)
