"""Requests answered in batches that wait out their window (``analyzers.batch_window``):
the pattern read off request spans, the loop's idle time given to the batcher, the fix."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from probe.analyzers.batch_window import held_batches
from probe.analyzers.diagnosis import diagnose
from probe.rundir import load
from tests.synthetic import MS, T0, RunBuilder
from tests.unit.test_diagnosis import add_cpu

FILL, HOLD, SPREAD, TURN = 2.1, 30.0, 2.4, 0.5  # ms: batch_window_api's shape, rounded
CYCLE = FILL + HOLD + SPREAD + TURN


def batched(bursts: int = 30, size: int = 8) -> list[tuple]:
    """(start_ms, end_ms) of ``bursts`` batches of ``size`` requests: each batch's requests
    start 0.3 ms apart, wait ``HOLD`` ms past the last and are answered 0.3 ms apart."""
    spans = []
    for k in range(bursts):
        c = k * CYCLE
        last = c + FILL
        spans += [
            (c + i * FILL / (size - 1), last + HOLD + i * SPREAD / (size - 1)) for i in range(size)
        ]
    return spans


def requests(spans: list[tuple]) -> pd.DataFrame:
    start, end = zip(*spans, strict=True)
    return pd.DataFrame(
        {"start_ns": (np.array(start) * MS).astype("int64"), "end_ns": (np.array(end) * MS)}
    ).astype("int64")


def test_answers_in_bursts_with_nothing_arriving_while_each_waits_are_held_batches():
    held = held_batches(requests(batched()))
    assert held is not None
    assert held.bursts == 30 and held.mean_batch == pytest.approx(8.0)
    assert held.hold_ms == pytest.approx(HOLD, abs=0.01)
    assert held.fill_ms == pytest.approx(FILL, abs=0.01)
    assert held.cycle_ms == pytest.approx(CYCLE, abs=0.01)
    assert held.closed_share == 1.0


def test_a_service_that_does_not_batch_has_no_held_batches():
    # eight clients, each request 20-40 ms on its own: answers come one at a time, and
    # other clients' requests start while any one waits
    rng = np.random.default_rng(3)
    spans = []
    for _client in range(8):
        t = float(rng.uniform(0, 5))
        for _ in range(40):
            took = float(rng.uniform(20, 40))
            spans.append((t, t + took))
            t += took + 0.5
    assert held_batches(requests(spans)) is None
    # one client, one request at a time: a "batch" of one
    assert held_batches(requests([(k * 10.0, k * 10.0 + 9.0) for k in range(200)])) is None


def test_batches_an_open_loop_fills_are_not_held_for_clients_already_in_them():
    # requests arriving on their own (Poisson, 6 a window on average) join each batch
    # while its window is open, which is what the window is for: the batches' sizes vary
    rng = np.random.default_rng(5)
    spans = []
    for k in range(30):
        c = k * CYCLE
        arrivals = np.sort(rng.uniform(0, HOLD, size=1 + rng.poisson(5)))
        spans += [(c + at, c + HOLD + SPREAD) for at in arrivals]
    assert held_batches(requests(spans)) is None


def test_too_few_bursts_are_no_pattern():
    assert held_batches(requests(batched(bursts=10))) is None


def _serving_loop(b: RunBuilder, bursts: int):
    """Writes the batches' request spans and the loop's readings (thread 1: idle in the
    selector through each hold but its last ms, the batch's work; busy the rest), and
    yields (cycle's start, hold, ms) for every ms of every cycle."""
    loop = b.stack(
        "BaseEventLoop.run_forever", "BaseEventLoop._run_once", "select",
        filename="/usr/lib/python3.11/asyncio/base_events.py", leaf_call="_selector.poll",
    )  # fmt: skip
    busy = b.stack("BaseEventLoop.run_forever", "h11_send", filename="/usr/lib/python3.11/h11.py")
    for n, (start, end) in enumerate(batched(bursts)):
        b.span("POST /predict", start, end, category="request", request=f"r{n}",
               attrs='{"served": true, "method": "POST", "route": "/predict"}')  # fmt: skip
    for k in range(bursts):
        c = k * CYCLE
        hold = (c + FILL, c + FILL + HOLD)
        for ms in np.arange(c + 1.0, c + CYCLE + 0.5, 1.0):  # every ms of the cycle
            idle = hold[0] < ms < hold[1] - 1.0
            b.sample(1, ms, loop if idle else busy, wall_ms=1.0,
                     cpu_ms=0.0 if idle else 1.0, reason="network" if idle else "")  # fmt: skip
            yield c, hold, ms


def _batched_app(path, *, bursts: int = 40):
    """An asyncio app's run: its loop idle in the selector through each batch's hold
    but its last millisecond (the batch's work), its batcher task waiting in
    ``wait_for`` meanwhile, the requests awaiting their answers in ``predict``."""
    b = RunBuilder(duration_s=bursts * CYCLE / 1000 + 0.05)
    frames = (b.frame("batcher"), b.frame("wait_for", "/usr/lib/python3.11/asyncio/tasks.py"))
    batcher = 900
    b.rows["stacks"].append((batcher, ";".join(map(str, frames)), 10, "<await>"))
    predict = b.stack("predict", leaf_call="<await>")
    tasks = []
    for _, hold, ms in _serving_loop(b, bursts):
        if hold[0] < ms < hold[1]:
            at = T0 + int(ms * MS)
            tasks.append((at, 1, batcher, "tasks", 1.0, MS, False))
            tasks.append((at, 1, predict, "unknown", 8.0, MS, False))
    add_cpu(b, bursts * CYCLE, 0.15)
    b.write(path)
    columns = ["ts_ns", "thread_id", "stack_id", "wait_reason", "tasks", "wall_ns", "main_task"]
    frame = pd.DataFrame(tasks, columns=columns)
    pq.write_table(pa.Table.from_pandas(frame, preserve_index=False), path / "task_samples.parquet")
    return path


def test_the_loop_s_idle_time_in_the_holds_is_the_batcher_s_and_closing_the_batches_is_the_fix(
    tmp_path,
):
    d = diagnose(load(_batched_app(tmp_path / "run")))
    primary = d.primary
    assert (primary["kind"], primary["subkind"]) == ("io", "sleep"), primary
    assert primary["stage"].startswith("batcher"), primary
    rec = d.recommendations[0]
    assert rec.id == "close_held_batches" and rec.stage == primary["stage"]
    # bounded by the holds gone and by the loop busy all the time: its CPU is the
    # ~6 ms of each 35-ms cycle outside the hold's idle 29 ms (1 ms readings)
    cycles = 40 * CYCLE - TURN  # the first request's start to the last answer
    without_holds = cycles / (cycles - 40 * HOLD)
    loop_bound = CYCLE / (CYCLE - (HOLD - 1.0))
    assert loop_bound < without_holds
    assert rec.estimated_speedup == pytest.approx(loop_bound, rel=0.03)
    assert rec.evidence["loop_cpu_share"] == pytest.approx(1 / loop_bound, rel=0.03)
    assert "MAX_BATCH = 8" in rec.how and "held 8.0 requests each" in rec.how
    assert all(r.id != "multi_instance" for r in d.recommendations)


def test_without_the_batcher_s_task_seen_the_idle_loop_stays_spare_capacity(tmp_path):
    run = _batched_app(tmp_path / "run")
    (run / "task_samples.parquet").unlink()
    d = diagnose(load(run))
    assert all(r.id != "close_held_batches" for r in d.recommendations)
    assert not any(f.stage.startswith("batcher") for f in d.findings)


def _waits_in(b: RunBuilder, stack: int, caller: str, waiter: str, filename: str) -> int:
    """A stack of the service's ``caller`` waiting in the library's ``waiter``."""
    frames = (b.frame(caller), b.frame(waiter, filename))
    b.rows["stacks"].append((stack, ";".join(map(str, frames)), 10, "waiter.acquire"))
    return stack


def _threaded_app(path, *, bursts: int = 40, batcher_thread: bool = True):
    """The same batches served by sync handlers on eight threads of a pool (2-9), each
    waiting on its answer's future in ``predict`` the whole cycle but its last ms, and a
    batcher thread (10) waiting on its queue in ``next_batch`` through each hold but its
    last ms, when it scores the batch; the loop (1) idle through the holds."""
    b = RunBuilder(duration_s=bursts * CYCLE / 1000 + 0.05)
    waiting = _waits_in(
        b, 901, "predict", "Future.result", "/usr/lib/python3.11/concurrent/futures/_base.py"
    )
    handling = b.stack("predict", "featurize")
    queued = _waits_in(b, 902, "next_batch", "Queue.get", "/usr/lib/python3.11/queue.py")
    scoring = b.stack("batcher", "score_batch", leaf_call="np.dot")
    for c, hold, ms in _serving_loop(b, bursts):
        for thread in range(2, 10):
            work = ms > c + CYCLE - 0.5
            b.sample(thread, ms, handling if work else waiting, wall_ms=1.0,
                     cpu_ms=1.0 if work else 0.0, reason="" if work else "lock")  # fmt: skip
        if batcher_thread:
            on = hold[1] - 1.0 <= ms <= hold[1]  # scoring the batch
            b.sample(10, ms, scoring if on else queued, wall_ms=1.0,
                     cpu_ms=1.0 if on else 0.0, reason="" if on else "lock")  # fmt: skip
    add_cpu(b, bursts * CYCLE, 0.2)
    return b.write(path)


def test_a_batcher_thread_s_wait_and_the_handlers_waits_in_the_holds_are_the_window_s(tmp_path):
    # batch_thread_api read "contention-bound in predict, waiting on locks" (confidence
    # 100%) with "shorten what holds the lock": no lock is held, the handlers wait for
    # their answers (eight threads at once) and the batcher for its window (one)
    d = diagnose(load(_threaded_app(tmp_path / "run")))
    primary = d.primary
    assert (primary["kind"], primary["subkind"]) == ("io", "sleep"), primary
    assert primary["stage"].startswith("next_batch"), primary
    rec = d.recommendations[0]
    assert rec.id == "close_held_batches" and rec.stage == primary["stage"]
    assert all(
        r.id != "reduce_lock_scope" or r.stage != primary["stage"] for r in d.recommendations
    )
    # one interpreter for every thread once the holds are gone: of each 35-ms cycle
    # (1-ms readings), the loop's 6 ms outside the hold, the batcher's 1 and the
    # handlers' 8 x 1
    assert rec.evidence["loop_cpu_share"] == pytest.approx(15 / CYCLE, rel=0.03)
    assert rec.estimated_speedup == pytest.approx(1 / rec.evidence["loop_cpu_share"], rel=0.01)


def test_handlers_waiting_in_the_holds_with_no_batcher_thread_seen_are_not_given_to_one(tmp_path):
    d = diagnose(load(_threaded_app(tmp_path / "run", batcher_thread=False)))
    assert all(r.id != "close_held_batches" for r in d.recommendations)
    assert not any(f.stage.startswith("next_batch") for f in d.findings)
