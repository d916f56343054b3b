"""torch's intra-op threads beside threads calling torch at once (analyzers.intra_op)."""

from __future__ import annotations

import pandas as pd

from probe.analyzers.intra_op import intra_op_note, intra_op_oversubscription

PID = 100
TORCH = "/site-packages/torch/nn/modules/linear.py"
SERVICE = "/srv/app.py"


def samples(callers: int, ticks: int = 20, reason: str = "unknown", **row) -> pd.DataFrame:
    """``callers`` pool threads (tids 101...) caught in a torch op at each tick."""
    rows = [
        {
            "ts_ns": tick * 10_000_000,
            "thread_id": 101 + k,
            "tensor": True,
            "native": True,
            "filename": TORCH,
            "user_function": "classify (app.py)",
            "reason": reason,
            "cpu_ns": 4_000_000,
            "wait_ns": 6_000_000,
            "woken": False,
            "on_run_queue": False,
            **row,
        }
        for tick in range(ticks)
        for k in range(callers)
    ]
    return pd.DataFrame(rows)


def python_threads(callers: int) -> pd.DataFrame:
    return pd.DataFrame({"thread_id": [PID] + [101 + k for k in range(callers)]})


def os_threads(python_cpu: dict[int, float], native_cpu: dict[int, float]) -> pd.DataFrame:
    cpu = {**python_cpu, **native_cpu}
    return pd.DataFrame(
        {
            "ts_ns": [1] * len(cpu),
            "pid": [PID] * len(cpu),
            "tid": list(cpu),
            "cpu_user_s": list(cpu.values()),
            "cpu_system_s": [0.0] * len(cpu),
        }
    )


def pool(callers: int = 8, native_s: float = 0.3, own: tuple[int, ...] = (90,)) -> dict:
    """A pool of ``callers`` threads, each with a native team-mate (tids 201...) that
    used ``native_s`` of CPU, and probe's own thread 90 at 0.2 s."""
    python_cpu = {PID: 1.0, 90: 0.2, **{101 + k: 0.3 for k in range(callers)}}
    native = {201 + k: native_s for k in range(callers)}
    return {
        "threads": python_threads(callers),
        "os_threads": os_threads(python_cpu, native),
        "pid": PID,
        "own_tids": own,
        "cores": 2.0,
    }


def test_a_pool_filling_the_cores_in_torch_beside_native_threads_is_oversubscribed():
    found = intra_op_oversubscription(samples(8), **pool())
    assert found is not None
    assert found.caller_threads == 8 and found.callers == 8.0
    assert found.native_threads == 8 and found.team == 2
    # 2.4 of the service's 5.8 s: probe's own 0.2 s is not the service's
    assert abs(found.native_cpu_share - 2.4 / 5.8) < 1e-9
    [note] = intra_op_note(found)
    assert "about 16 threads at work for 2 cores" in note and "torch.set_num_threads(1)" in note


def test_callers_queued_for_the_gil_do_not_fill_the_cores():
    # the route's Python under the GIL is the limit: the threads wait to get back into it
    assert intra_op_oversubscription(samples(8, reason="gil"), **pool()) is None


def test_one_thread_calling_torch_is_what_intra_op_threads_are_for():
    assert intra_op_oversubscription(samples(1), **pool(callers=1)) is None


def test_callers_that_leave_a_core_idle_are_not_told_to_give_up_intra_op_threads():
    # two callers but one at a time on average: the second core is the team-mates'
    one_at_a_time = pd.concat([samples(1, ticks=10), samples(1, ticks=10, thread_id=102, ts_ns=0)])
    one_at_a_time["ts_ns"] = range(len(one_at_a_time))
    assert intra_op_oversubscription(one_at_a_time, **pool(callers=2)) is None


def test_without_native_threads_at_work_nothing_oversubscribes():
    # torch.set_num_threads(1): the team-mates never run
    assert intra_op_oversubscription(samples(8), **pool(native_s=0.0)) is None


def test_probe_s_own_threads_are_not_torch_s():
    setup = pool(native_s=0.0)
    setup["os_threads"] = os_threads({PID: 1.0, 90: 3.0}, {})
    setup["threads"] = python_threads(8)
    assert intra_op_oversubscription(samples(8), **setup) is None
    # a run that does not say which threads are probe's: no reading at all
    assert intra_op_oversubscription(samples(8), **{**pool(), "own_tids": None}) is None


def test_run_queue_rows_split_off_a_tick_are_not_ticks_of_their_own():
    rows = samples(8)
    split = samples(1, ticks=200, on_run_queue=True)
    split["ts_ns"] = split["ts_ns"] + 1  # instants of their own
    found = intra_op_oversubscription(pd.concat([rows, split]), **pool())
    assert found is not None and found.callers == 8.0


def test_start_up_imports_of_torch_are_not_calls():
    importing = samples(8, user_function="<imports>")
    assert intra_op_oversubscription(importing, **pool()) is None
