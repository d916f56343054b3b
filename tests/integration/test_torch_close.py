"""Closing a torch.profiler window without the GIL (``probe._torchclose``), on real
PyTorch (CPU), each case in a process of its own: a mistake at the C++ boundary ends the
process (SIGSEGV, or std::terminate on an exception let through), and a test must see
that as its failure, not be ended by it. Skipped where torch is not installed or the
module was not built (no C++ compiler: torch's Python binding closes the windows then)."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys

import pytest

from .conftest import REPO, write_script

pytest.importorskip("torch")
if importlib.util.find_spec("probe._torchclose") is None:
    pytest.skip("probe._torchclose is not built here", allow_module_level=True)

# A window of the main thread's ops, closed while a Python thread beside it notes the
# time in a loop; printed: how it closed, how long closing took, the longest the thread
# went without a turn while it did, and the trace's ops by thread
BESIDE_A_CLOSING = """
    import json, sys, threading, time
    from pathlib import Path
    import torch
    from probe.samplers.torch_windows import start_kineto_window

    out = Path(sys.argv[1])
    stop, turns = threading.Event(), []

    def beside():
        while not stop.is_set():
            turns.append(time.perf_counter())

    window = start_kineto_window()
    x = torch.ones(64)
    ends = time.perf_counter() + 0.05
    while time.perf_counter() < ends:  # ~40,000 ops here: a closing of ~0.4 s
        x = (x * 1.0001).relu()
    thread = threading.Thread(target=beside)
    thread.start()
    time.sleep(0.05)
    closing = time.perf_counter()
    window.save(out)
    closed = time.perf_counter()
    stop.set()
    thread.join()
    inside = [t for t in turns if closing <= t <= closed]
    edges = [closing, *inside, closed]
    events = json.loads(out.read_text())["traceEvents"]
    print(json.dumps({
        "off_the_gil": window.closed_off_the_gil,
        "close_s": closed - closing,
        "longest_gap_s": max(b - a for a, b in zip(edges, edges[1:])),
        "ops": sum(e.get("cat") == "cpu_op" for e in events),
    }))
"""


# The longest the thread beside a closing waited for a turn, as a share of the closing:
# off the GIL 0.001-0.003, through torch's binding 0.62-0.65 (its stop ~0.3 s, then its
# save, each holding the GIL; 3 runs each way, 2026-12-06): a bar far from both
WENT_WITHOUT = 0.25


def run_script(script, arg, **env: str) -> subprocess.CompletedProcess:
    """``script`` with ``arg`` in a Python of its own, probe from this checkout: ended
    by a signal or an uncaught error, the test fails with its stderr."""
    r = subprocess.run(
        [sys.executable, str(script), str(arg)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO), **env},
    )
    assert r.returncode == 0, (r.returncode, r.stderr[-3000:])
    return r


def closing_beside_a_thread(tmp_path, **env: str) -> dict:
    script = write_script(tmp_path, BESIDE_A_CLOSING)
    r = run_script(script, tmp_path / "window.json", **env)
    return json.loads(r.stdout.strip().splitlines()[-1])


def test_closing_a_window_lets_the_target_s_python_threads_run_and_writes_its_trace(tmp_path):
    closed = closing_beside_a_thread(tmp_path)
    assert closed["off_the_gil"] and closed["ops"] > 1000, closed
    # the thread beside it took turns all through the closing: no gap near its length
    assert closed["longest_gap_s"] < WENT_WITHOUT * closed["close_s"], closed


def test_through_torch_s_binding_the_closing_holds_the_gil_and_the_switch_asks_for_it(tmp_path):
    # what the module is for, shown by its absence: the same closing through torch's
    # Python binding (PROBE_TORCH_CLOSE_WITH_GIL=1) stops the thread beside it throughout
    closed = closing_beside_a_thread(tmp_path, PROBE_TORCH_CLOSE_WITH_GIL="1")
    assert not closed["off_the_gil"] and closed["ops"] > 1000, closed
    assert closed["longest_gap_s"] >= WENT_WITHOUT * closed["close_s"], closed


def test_a_window_closed_twice_says_so_and_the_target_goes_on(tmp_path):
    # torch 2.13 answers a second stop with a result whose save dereferences a null
    # trace: the target would die of SIGSEGV, through either path
    script = write_script(
        tmp_path,
        """
        import sys
        from pathlib import Path
        import torch
        from probe.samplers.torch_windows import start_kineto_window

        window = start_kineto_window()
        torch.ones(8).relu()
        window.save(Path(sys.argv[1]) / "first.json")
        try:
            window.save(Path(sys.argv[1]) / "second.json")
        except RuntimeError as e:
            print("second:", e)
        torch.ones(8).relu()
        print("went on")
        """,
    )
    r = run_script(script, tmp_path)
    assert "second: this window is closed already" in r.stdout and "went on" in r.stdout
    assert (tmp_path / "first.json").stat().st_size > 0
    assert not (tmp_path / "second.json").exists()


def test_a_fork_during_a_closing_waits_for_it_and_the_child_takes_windows_of_its_own(tmp_path):
    # a fork meanwhile would leave the child torch's profiler mid-stop, its locks held by
    # a thread the child does not have: the fork waits for the closing to end
    script = write_script(
        tmp_path,
        """
        import json, os, sys, threading, time
        from pathlib import Path
        import torch
        from probe.samplers.torch_windows import start_kineto_window

        out = Path(sys.argv[1])
        window = start_kineto_window()
        x = torch.ones(64)
        ends = time.perf_counter() + 0.05
        while time.perf_counter() < ends:
            x = (x * 1.0001).relu()
        times = {}

        def close():
            times["closing"] = time.perf_counter()
            window.save(out / "parent.json")
            times["closed"] = time.perf_counter()

        closer = threading.Thread(target=close)
        closer.start()
        time.sleep(0.05)  # into the closing (~0.4 s)
        times["forking"] = time.perf_counter()
        pid = os.fork()
        if pid == 0:
            child = start_kineto_window()
            torch.ones(8).relu()
            child.save(out / "child.json")
            os._exit(0)
        times["forked"] = time.perf_counter()
        closer.join()
        for _ in range(600):
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                break
            time.sleep(0.1)
        else:
            os.kill(pid, 9)
            os.waitpid(pid, 0)
            status = -1
        print(json.dumps({**times, "child_status": status}))
        """,
    )
    r = run_script(script, tmp_path)
    t = json.loads(r.stdout.strip().splitlines()[-1])
    assert t["closing"] < t["forking"] < t["closed"], t  # the fork was asked mid-closing
    # and went ahead only once it had ended (its last steps after the lock are ~1 ms)
    assert t["forked"] - t["closing"] >= 0.9 * (t["closed"] - t["closing"]), t
    assert t["child_status"] == 0, t
    assert (tmp_path / "parent.json").stat().st_size > 0
    assert (tmp_path / "child.json").stat().st_size > 0
