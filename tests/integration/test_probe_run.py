"""`probe run` on real scripts in subprocesses: exits, signals, targets, attribution."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from probe.rundir import load

from .conftest import probe_cmd, wait_for_line, wait_until, write_script

pytestmark = pytest.mark.integration

SPANNED_LOOP = """
    import sys, time
    import probe

    @probe.stage("work")
    def work():
        x = 0
        for i in range(20000):
            x += i
        return x

    print("ready", flush=True)
    while True:
        with probe.request():
            work()
        time.sleep(0.001)
"""


def start_spanned_loop(tmp_path, run_probe) -> subprocess.Popen[str]:
    """`probe run` on an endless spanned loop, once spans and samples reach the disk."""
    proc = run_probe.spawn(write_script(tmp_path, SPANNED_LOOP))
    wait_for_line(proc.stdout, "ready")
    journals = [tmp_path / "run" / f"{t}.jsonl" for t in ("spans", "samples")]
    wait_until(lambda: all(j.exists() and j.stat().st_size > 0 for j in journals))
    return proc


def test_exit_status_of_target_is_probes_exit_status(tmp_path, run_probe):
    script = write_script(tmp_path, "import sys\nprint('hello')\nsys.exit(3)\n")
    r = run_probe(script)
    assert r.returncode == 3
    assert "hello" in r.stdout
    run = load(r.run_dir)
    assert run.meta["exit"] == {"status": 3, "ended_by": "sys.exit"}
    assert (r.run_dir / "resources.parquet").is_file()


def test_sys_exit_with_message_prints_it_and_exits_1(tmp_path, run_probe):
    script = write_script(tmp_path, "import sys\nsys.exit('fatal: no model')\n")
    r = run_probe(script)
    assert r.returncode == 1
    assert "fatal: no model" in r.stderr


def test_uncaught_exception_shows_pythons_traceback_and_exits_1(tmp_path, run_probe):
    script = write_script(
        tmp_path,
        """
        def load_model():
            raise ValueError("weights missing")

        load_model()
    """,
    )
    r = run_probe(script)
    assert r.returncode == 1
    assert "Traceback (most recent call last):" in r.stderr
    assert f'File "{script}", line 5, in <module>' in r.stderr
    assert "in load_model" in r.stderr and "ValueError: weights missing" in r.stderr
    assert "launcher.py" not in r.stderr and "runpy.py" not in r.stderr
    run = load(r.run_dir)
    assert run.meta["exit"]["ended_by"] == "exception"
    assert "ValueError: weights missing" in run.meta["exception"]
    assert "Run directory:" in r.stdout


def test_missing_script_is_one_line_error_exit_2_and_nothing_written(tmp_path):
    r = subprocess.run(
        probe_cmd("run", "no_such_service.py"), cwd=tmp_path, capture_output=True, text=True
    )
    assert r.returncode == 2
    assert r.stderr.strip().count("\n") == 0 and "no_such_service.py" in r.stderr
    assert not (tmp_path / ".probe").exists()


def test_missing_module_is_one_line_error_exit_2(tmp_path):
    r = subprocess.run(
        probe_cmd("run", "-m", "no_such_module_xyz"), cwd=tmp_path, capture_output=True, text=True
    )
    assert r.returncode == 2
    assert "No module named 'no_such_module_xyz'" in r.stderr
    assert r.stderr.strip().count("\n") == 0


def test_out_that_is_a_file_fails_before_the_target_starts(tmp_path):
    marker = tmp_path / "ran"
    script = write_script(tmp_path, f"open({str(marker)!r}, 'w').write('x')\n")
    out = tmp_path / "taken"
    out.write_text("not a directory")
    r = subprocess.run(probe_cmd("run", "--out", out, script), capture_output=True, text=True)
    assert r.returncode == 2
    assert "not a directory" in r.stderr
    assert not marker.exists()


def test_script_gets_its_own_argv_main_and_path0(tmp_path, run_probe):
    script = write_script(
        tmp_path,
        """
        import json, sys
        print(json.dumps({"argv": sys.argv, "name": __name__, "path0": sys.path[0],
                          "file": __file__}))
    """,
        name="svc.py",
    )
    r = run_probe(script, "--port", "8000", "-v")
    seen = json.loads(r.stdout.splitlines()[0])
    assert seen["argv"] == [str(script), "--port", "8000", "-v"]
    assert seen["name"] == "__main__"
    assert seen["path0"] == str(tmp_path)
    assert seen["file"] == str(script)


def test_dash_m_runs_a_module_as_main_with_cwd_on_path(tmp_path, run_probe):
    pkg = tmp_path / "svcpkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "serve.py").write_text(
        "import json, os, sys\n"
        "print(json.dumps({'argv': sys.argv[1:], 'name': __name__, 'path0': sys.path[0]}))\n"
    )
    r = run_probe("-m", "svcpkg.serve", "--workers", "2", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    seen = json.loads(r.stdout.splitlines()[0])
    assert seen == {"argv": ["--workers", "2"], "name": "__main__", "path0": str(tmp_path)}
    assert load(r.run_dir).meta["target"]["kind"] == "module"


def test_argv_secrets_reach_no_output_of_the_run(tmp_path, run_probe):
    # meta.json, diagnosis.json, report.html, every table, the terminal
    script = write_script(tmp_path, "pass\n")
    r = run_probe(
        script, "--token=s3cr3t", "--password", "hunter2", "https://user:pw@example.com/v1"
    )
    meta_text = (r.run_dir / "meta.json").read_text()
    argv = json.loads(meta_text)["target"]["argv"]
    assert argv[1:] == ["--token=***", "--password", "***", "https://user:***@example.com/v1"]
    # and what the other verbs print or write from that directory
    for fmt in ("html", "json", "text"):
        done = subprocess.run(
            probe_cmd("report", "--format", fmt, "-o", tmp_path / f"again.{fmt}", r.run_dir),
            capture_output=True, timeout=120,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
    outputs = {p.name: p.read_bytes() for p in r.run_dir.iterdir() if p.is_file()}
    assert {"meta.json", "diagnosis.json", "report.html"} <= set(outputs)
    outputs |= {p.name: p.read_bytes() for p in tmp_path.glob("again.*")}
    outputs["terminal"] = (r.stdout + r.stderr).encode()
    for verb in (["analyze", "--json"], ["analyze"], ["report", "--format", "text"]):
        done = subprocess.run(probe_cmd(*verb, r.run_dir), capture_output=True, timeout=120)
        outputs[" ".join(verb)] = done.stdout + done.stderr
    for secret in (b"s3cr3t", b"hunter2", b":pw@"):
        assert not [name for name, data in outputs.items() if secret in data], secret


def test_no_gpu_is_recorded_once_as_absent(tmp_path, run_probe):
    script = write_script(tmp_path, "pass\n")
    r = run_probe(script)
    assert r.returncode == 0
    gpus = load(r.run_dir).meta["gpus"]
    assert gpus["available"] is False and gpus["reason"]
    assert load(r.run_dir).gpu.empty


def test_duration_stops_an_endless_target_cleanly(tmp_path, run_probe):
    script = write_script(tmp_path, SPANNED_LOOP)
    r = run_probe("--duration", "1.5", script)
    assert r.returncode == 0, r.stderr
    run = load(r.run_dir)
    assert run.meta["exit"] == {"status": 0, "ended_by": "duration"}
    assert run.meta["duration_s"] >= 1.5
    assert len(run.spans) > 10
    assert not any(n.startswith("the run did not finish") for n in run.notes)


def test_sigterm_mid_run_exits_143_with_a_complete_run_dir(tmp_path, run_probe):
    proc = start_spanned_loop(tmp_path, run_probe)
    proc.send_signal(signal.SIGTERM)
    proc.communicate(timeout=60)
    assert proc.returncode == 143
    run = load(tmp_path / "run")
    assert run.meta["exit"] == {"status": 143, "ended_by": "SIGTERM"}
    assert len(run.spans) > 0 and len(run.samples) > 0
    assert not list((tmp_path / "run").glob("*.jsonl")), "not compacted"


# The main thread blocks SIGTERM and waits on a lock nobody releases: the signal reaches
# the process through the thread that sleeps, as it can when the main thread took it just
# before blocking in a call that does not return (probe.sigterm). Plain Python dies of
# it at once; probe's handler, which raises in the main thread, never runs.
MAIN_THREAD_DEAF_TO_SIGTERM = """
import signal, threading, time

def sleeper():
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM})
    time.sleep(120)

signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})
threading.Thread(target=sleeper, daemon=True).start()
never = threading.Lock()
never.acquire()
print("ready", flush=True)
never.acquire()
"""


def test_sigterm_the_main_thread_cannot_take_still_ends_the_run_143_with_its_run_dir(
    tmp_path, run_probe
):
    script = write_script(tmp_path, MAIN_THREAD_DEAF_TO_SIGTERM)
    plain = subprocess.Popen(
        [sys.executable, str(script)], stdout=subprocess.PIPE, text=True, start_new_session=True
    )
    wait_for_line(plain.stdout, "ready")
    plain.send_signal(signal.SIGTERM)
    plain.communicate(timeout=30)
    assert plain.returncode == -signal.SIGTERM
    proc = run_probe.spawn(script)
    wait_for_line(proc.stdout, "ready")
    time.sleep(0.5)  # a sample or two on disk
    proc.send_signal(signal.SIGTERM)
    proc.communicate(timeout=60)  # the code before: waited for ever
    assert proc.returncode == 143
    run = load(tmp_path / "run")
    assert run.meta["exit"] == {"status": 143, "ended_by": "SIGTERM"}
    assert len(run.samples) > 0 and (tmp_path / "run" / "diagnosis.json").exists()


def test_the_target_finds_no_wakeup_descriptor_of_probe_s(tmp_path, run_probe):
    # probe's SIGTERM watcher listens on a wakeup descriptor; the target taking one over
    # is told it replaced none (-1), as without probe
    script = write_script(
        tmp_path,
        """
        import os, signal, time
        r, w = os.pipe()
        os.set_blocking(w, False)
        print("replaced", signal.set_wakeup_fd(w), flush=True)
        print("restored", signal.set_wakeup_fd(-1) == w, flush=True)
        time.sleep(0.3)
        """,
    )
    r = run_probe("--no-report", script, timeout=60)
    assert r.returncode == 0, r.stderr
    assert "replaced -1" in r.stdout and "restored True" in r.stdout


def test_trio_runs_under_probe_without_its_wakeup_collision_warning(tmp_path, run_probe):
    # trio.run warns when the wakeup descriptor it replaces is not -1 (probe's watcher's)
    pytest.importorskip("trio")
    app = write_script(
        tmp_path,
        """
        import warnings
        warnings.simplefilter("error")  # trio's collision warning would end the run
        import trio

        async def main():
            await trio.sleep(0.2)
            print("trio done", flush=True)

        trio.run(main)
        """,
        name="trio_app.py",
    )
    r = run_probe("--no-report", app, timeout=60, out=tmp_path / "trio-run")
    assert r.returncode == 0, r.stderr
    assert "trio done" in r.stdout and "Warning" not in r.stderr


CHILD_WITH_ITS_OWN_SIGTERM_HANDLER = """
import os, signal, time

pid = os.fork()
if pid == 0:
    signal.signal(signal.SIGTERM, lambda *_: os._exit(7))
    time.sleep(60)
    os._exit(1)
time.sleep(0.5)  # the child's handler in place
os.kill(pid, signal.SIGTERM)
print("child", os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]), flush=True)
time.sleep(2 * 1.0)  # past the watcher's wait for a SIGTERM of the parent's own
print("parent done", flush=True)
"""


@pytest.mark.parametrize("workers", [True, False], ids=["followed", "not-followed"])
def test_a_forked_child_s_sigterm_does_not_end_the_parent_s_run(tmp_path, run_probe, workers):
    # the child inherits the parent's SIGTERM wakeup descriptor (probe.sigterm); a handler
    # of its own makes CPython write the signal there, where the parent's watcher would
    # read it as the parent's and close the run as SIGTERM
    script = write_script(tmp_path, CHILD_WITH_ITS_OWN_SIGTERM_HANDLER)
    r = run_probe(*([] if workers else ["--no-workers"]), script, timeout=60)
    assert r.returncode == 0, r.stderr
    assert "child 7" in r.stdout and "parent done" in r.stdout
    assert load(r.run_dir).meta["exit"] == {"status": 0, "ended_by": "completed"}


def test_ctrl_c_mid_run_exits_130_with_the_traceback_and_a_complete_run_dir(tmp_path, run_probe):
    proc = start_spanned_loop(tmp_path, run_probe)
    os.killpg(proc.pid, signal.SIGINT)  # what the terminal sends: the whole process group
    _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 130
    assert "KeyboardInterrupt" in stderr and "launcher.py" not in stderr
    run = load(tmp_path / "run")
    assert run.meta["exit"] == {"status": 130, "ended_by": "SIGINT"}
    assert not list((tmp_path / "run").glob("*.jsonl")), "the sidecar did not finish"


def test_sigkill_mid_run_leaves_a_loadable_run_dir(tmp_path, run_probe):
    proc = start_spanned_loop(tmp_path, run_probe)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    run = load(tmp_path / "run")  # straight away: salvage of the live files (or Parquet)
    assert len(run.spans) > 0 and len(run.samples) > 0
    # The sidecar notices and completes the directory on its own.
    wait_until(lambda: load(tmp_path / "run").meta.get("exit", {}).get("ended_by") == "killed")
    wait_until(lambda: not list((tmp_path / "run").glob("*.jsonl")))
    done = load(tmp_path / "run")
    assert len(done.spans) >= len(run.spans)


def test_a_kill_in_the_first_second_still_leaves_samples(tmp_path, run_probe):
    # journals are flushed every 0.2 s in the first second, not first at 1 s: a process
    # killed in its first second (the OOM killer at start-up) kept nothing before
    proc = run_probe.spawn(write_script(tmp_path, SPANNED_LOOP))
    wait_for_line(proc.stdout, "ready")
    time.sleep(0.4)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    wait_until(lambda: not list((tmp_path / "run").glob("*.jsonl")))
    run = load(tmp_path / "run")
    assert run.meta["exit"]["ended_by"] == "killed"
    assert len(run.samples) > 0


def test_threads_and_asyncio_tasks_record_their_own_spans(tmp_path, run_probe):
    script = write_script(
        tmp_path,
        """
        import asyncio, threading
        import probe

        @probe.stage("thread_work")
        def thread_work():
            with probe.span("inner"):
                sum(range(10000))

        @probe.stage("fetch")
        async def fetch(i):
            await asyncio.sleep(0.01)

        async def main():
            async def handle(i):
                with probe.request(id=f"req-{i}"):
                    await fetch(i)
            await asyncio.gather(*(handle(i) for i in range(5)))

        threads = [threading.Thread(target=lambda: [thread_work() for _ in range(20)],
                                    name=f"worker-{k}") for k in range(3)]
        for t in threads: t.start()
        asyncio.run(main())
        for t in threads: t.join()
    """,
    )
    r = run_probe(script)
    assert r.returncode == 0, r.stderr
    run = load(r.run_dir)
    spans = run.spans
    work = spans[spans["name"] == "thread_work"]
    assert len(work) == 60 and work["thread_id"].nunique() == 3
    names = set(run.threads["name"])
    assert {"worker-0", "worker-1", "worker-2"} <= names
    inner = spans[spans["name"] == "inner"]
    assert set(inner["parent_id"]) <= set(work["span_id"])
    fetches = spans[spans["name"] == "fetch"]
    assert sorted(fetches["request_id"]) == [f"req-{i}" for i in range(5)]
    reqs = spans[spans["category"] == "request"].set_index("span_id")
    assert all(
        reqs.loc[p, "request_id"] == rid
        for p, rid in zip(fetches["parent_id"], fetches["request_id"], strict=True)
    )


def test_spinning_thread_is_on_cpu_and_socket_waiter_waits_on_network(tmp_path, run_probe):
    script = write_script(
        tmp_path,
        """
        import socket, threading, time

        server = socket.socket()
        server.bind(("127.0.0.1", 0))
        server.listen()

        def slow_upstream():
            conn, _ = server.accept()
            time.sleep(1.5)
            conn.sendall(b"done")
            conn.close()

        def spin():
            end = time.perf_counter() + 1.5
            while time.perf_counter() < end:
                pass

        def download():
            c = socket.create_connection(server.getsockname())
            c.recv(16)
            c.close()

        threading.Thread(target=slow_upstream, name="upstream").start()
        workers = [threading.Thread(target=spin, name="spinner"),
                   threading.Thread(target=download, name="downloader")]
        for t in workers: t.start()
        for t in workers: t.join()
        server.close()
    """,
    )
    r = run_probe(script)
    assert r.returncode == 0, r.stderr
    run = load(r.run_dir)
    threads = run.threads.drop_duplicates("thread_id").set_index("name")["thread_id"]
    s = run.samples

    def share(name, reason=None):
        rows = s[s["thread_id"] == threads[name]]
        wall = rows["wall_ns"].sum()
        if reason is None:
            return rows["cpu_ns"].sum() / wall
        waiting = rows[rows["wait_reason"] == reason]
        return (waiting["wall_ns"] - waiting["cpu_ns"]).sum() / wall

    assert share("spinner") > 0.6  # on-CPU (it shares one core with the GIL and the sampler)
    assert share("downloader", "network") > 0.8
    assert share("upstream", "sleep") > 0.5


def test_child_processes_are_sampled_as_part_of_the_tree(tmp_path, run_probe):
    script = write_script(
        tmp_path,
        """
        import subprocess, sys
        child = subprocess.Popen([sys.executable, "-c",
            "import time\\nend = time.time() + 1.5\\nwhile time.time() < end: pass"])
        print(child.pid, flush=True)
        child.wait()
    """,
    )
    r = run_probe(script)
    assert r.returncode == 0, r.stderr
    child_pid = int(r.stdout.splitlines()[0])
    res = load(r.run_dir).resources
    child = res[res["pid"] == child_pid]
    assert len(child) > 3
    assert not child["is_root"].any()
    cpu = child["cpu_user_s"] + child["cpu_system_s"]  # cumulative, from the child's start
    assert cpu.max() > 0.5  # it spun 1.5 s; sampled up to its end


def test_memory_flag_records_allocation_sites_and_gc_types(tmp_path, run_probe):
    script = write_script(
        tmp_path,
        """
        import time
        class Entry:
            def __init__(self): self.blob = bytearray(200_000)
        cache = []
        for i in range(30):
            cache.append(Entry())
            time.sleep(0.05)
    """,
    )
    r = run_probe("--memory", "--memory-interval", "0.5", script)
    assert r.returncode == 0, r.stderr
    run = load(r.run_dir)
    sites = run.memory_sites
    per_snapshot = sites[sites["site"] == f"{script}:4"].groupby("snapshot")["size_bytes"].sum()
    assert len(per_snapshot) >= 3
    # grows while the target runs (the last snapshot, after the module ended, may not)
    assert per_snapshot.max() > per_snapshot.iloc[0] + 1_000_000
    entries = run.gc_types[run.gc_types["type"] == "__main__.Entry"]
    counts = entries.sort_values("snapshot")["count"]
    assert counts.max() - counts.iloc[0] >= 15  # gc sees tracked objects, not the blobs


def test_trace_flag_writes_a_perfetto_trace(tmp_path, run_probe):
    script = write_script(
        tmp_path,
        """
        def f(i):
            return i * 2
        for i in range(1000):
            f(i)
    """,
    )
    r = run_probe("--trace", "2", script)
    assert r.returncode == 0, r.stderr
    trace = json.loads((r.run_dir / "trace.json").read_text())
    assert any(e.get("name", "").startswith("f ") for e in trace["traceEvents"])


def test_log_spans_emits_one_json_line_per_span(tmp_path, run_probe):
    script = write_script(
        tmp_path,
        """
        import probe
        with probe.span("download", n=2):
            pass
    """,
    )
    r = run_probe("--log-spans", script)
    lines = [json.loads(x) for x in r.stderr.splitlines() if x.startswith("{")]
    assert [(x["name"], x["attrs"]) for x in lines] == [("download", {"n": 2})]


def test_forked_child_records_into_its_own_shard_not_the_parents_tables(tmp_path, run_probe):
    script = write_script(
        tmp_path,
        """
        import os, time
        import probe
        for i in range(5):
            with probe.span("parent"):
                time.sleep(0.01)
        pid = os.fork()
        if pid == 0:
            for i in range(5):
                with probe.span("child"):
                    time.sleep(0.01)
            os._exit(0)
        os.waitpid(pid, 0)
        time.sleep(1.2)
    """,
    )
    r = run_probe(script)
    assert r.returncode == 0, r.stderr
    parent_only = pd.read_parquet(r.run_dir / "spans.parquet")
    assert list(parent_only["name"]) == ["parent"] * 5
    run = load(r.run_dir)  # the child's shard merged in, ids unique across both
    assert sorted(run.spans["name"]) == ["child"] * 5 + ["parent"] * 5
    assert run.spans["span_id"].is_unique
    child = run.workers[0]["pid"]
    threads = run.spans.merge(run.threads[["thread_id", "pid"]], on="thread_id")
    assert set(threads.loc[threads["name"] == "child", "pid"]) == {child}


def test_forked_child_ending_with_sys_exit_leaves_the_parents_run_alone(tmp_path, run_probe):
    script = write_script(
        tmp_path,
        """
        import os, sys, time
        import probe
        if os.fork() == 0:
            sys.exit(7)  # unwinds through probe's own frames in the child
        os.wait()
        for i in range(20):
            with probe.span("parent"):
                time.sleep(0.05)
    """,
    )
    r = run_probe("--trace", "5", script)
    assert r.returncode == 0, r.stderr
    run = load(r.run_dir)
    assert run.meta["exit"] == {"status": 0, "ended_by": "completed"}
    assert list(run.spans["name"]) == ["parent"] * 20
    # the child closed its own shard on its way out, through the launcher
    (shard,) = (r.run_dir / "workers").iterdir()
    assert json.loads((shard / "meta.json").read_text())["exit"] == {
        "status": 7,
        "ended_by": "sys.exit",
    }
    assert r.stdout.count("Run directory:") == 1
    assert json.loads((r.run_dir / "trace.json").read_text())["traceEvents"]


def test_forked_children_die_of_sigterm_as_without_probe(tmp_path, run_probe):
    # multiprocessing's Pool.terminate() relies on SIGTERM killing its workers outright
    # (a recorded worker closes its shard first: probe.sigterm)
    script = write_script(
        tmp_path,
        """
        import multiprocessing as mp, os, signal, time
        def work(x):
            return x * x
        if __name__ == "__main__":
            child = os.fork()
            if child == 0:
                while True:
                    time.sleep(0.01)
            time.sleep(0.3)
            os.kill(child, signal.SIGTERM)
            _, status = os.waitpid(child, 0)
            by_sigterm = os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGTERM
            print("child default:", by_sigterm)
            print("parent handled:", signal.getsignal(signal.SIGTERM) != signal.SIG_DFL)
            with mp.get_context("fork").Pool(2) as pool:
                print("pool:", sum(pool.map(work, range(100))))
    """,
    )
    r = run_probe(script, timeout=60)
    assert r.returncode == 0, r.stderr
    assert "child default: True" in r.stdout
    assert "parent handled: True" in r.stdout
    assert "pool: 328350" in r.stdout


def test_target_that_changes_directory_still_fills_its_run_dir(tmp_path, run_probe):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    script = write_script(
        tmp_path,
        """
        import os, threading, time
        import probe
        os.chdir("elsewhere")
        for _ in range(15):
            sum(range(100000)); time.sleep(0.1)
        def late():
            with probe.span("late"): time.sleep(0.1)
        threading.Thread(target=late).start()
    """,
    )
    r = run_probe(script, out=Path("rel-run"))  # a relative --out, as users type it
    assert r.returncode == 0, r.stderr
    run = load(tmp_path / "rel-run")
    assert list(run.spans["name"]) == ["late"] and len(run.samples) > 0
    assert not list(elsewhere.rglob("*.jsonl")) and not list(elsewhere.rglob("*.parquet"))
    assert "Run directory: rel-run" in r.stdout


def test_verdict_names_the_limit_and_diagnosis_json_is_written(tmp_path, run_probe):
    script = write_script(
        tmp_path,
        """
        import json, sys, time
        import probe
        @probe.stage("busy")
        def busy():
            total = 0
            for i in range(3_000_000):  # pure Python: no C call to be caught in
                total += i * i % 7
            return total
        truth = {"busy_s": 0.0, "requests_s": 0.0}
        for _ in range(3):
            with probe.request():
                began = time.perf_counter()
                busy()
                truth["busy_s"] += time.perf_counter() - began
                time.sleep(0.1)
                truth["requests_s"] += time.perf_counter() - began
        with open(sys.argv[1], "w") as f:
            json.dump(truth, f)
    """,
    )
    # The truth by the script's own clock: busy's share of the requests' time (0.55-0.7
    # by the machine's speed: 3 M iterations take 0.12-0.25 s against the 0.1-s sleep)
    truth_file = tmp_path / "truth.json"
    r = run_probe(script, truth_file)
    assert r.returncode == 0
    out = r.stdout
    assert "CPU-bound in `busy`" in out and "limit: cpu/python in busy" in out
    assert "vectorize_python" in out  # the top recommendation, with its estimate
    assert "Run directory: run  (diagnosis.json, report.html)" in out  # relative to cwd
    assert (r.run_dir / "report.html").is_file()
    diagnosis = json.loads((r.run_dir / "diagnosis.json").read_text())
    assert diagnosis["schema"] == "probe.diagnosis/1"
    assert diagnosis["run"]["requests"] == 3
    assert diagnosis["primary"]["stage"] == "busy"
    truth = json.loads(truth_file.read_text())
    # within 0.1: the spans' share is exact, the stack samples' (100 Hz, ~70 of them)
    # carry a few points of sampling error
    assert abs(diagnosis["primary"]["share"] - truth["busy_s"] / truth["requests_s"]) < 0.1
    # the launcher's frames (probe's CLI, click, runpy) are cut above the target's module
    run = load(r.run_dir)
    stacks = run.stacks[run.stacks["frame_ids"] != ""]  # "" is the overflow stack
    roots = stacks["frame_ids"].str.split(";").str[0].astype(int)
    first = run.frames.set_index("frame_id").loc[roots.unique()]
    assert set(first["function"]) <= {"<module>", "_bootstrap"}
    assert str(script) in set(first["filename"])


def test_no_report_writes_no_diagnosis(tmp_path, run_probe):
    script = write_script(tmp_path, "print('hi')\n")
    r = run_probe("--no-report", script)
    assert r.returncode == 0 and r.stdout == "hi\n"
    assert not (r.run_dir / "diagnosis.json").exists()
    assert not (r.run_dir / "report.html").exists()


def test_help_describes_the_verb():
    r = subprocess.run(probe_cmd("run", "--help"), capture_output=True, text=True)
    assert r.returncode == 0
    for option in ("--out", "--duration", "--hz", "--memory", "--trace", "--no-report", "-m"):
        assert option in r.stdout
    v = subprocess.run(
        [sys.executable, "-m", "probe.cli", "--version"], capture_output=True, text=True
    )
    assert "probe" in v.stdout


def test_spans_flushed_across_the_run_reach_its_tables_each_exactly_once(tmp_path, run_probe):
    # the finisher parses the journals as they grow (once a second, after its imports)
    # and the end of the run only the rest: a span lost or counted twice at a seam
    # between the two would show here
    script = write_script(
        tmp_path,
        """
        import sys, time
        import probe
        made = 0
        deadline = time.monotonic() + 4.0
        while time.monotonic() < deadline:
            with probe.request():
                with probe.span("step"):
                    time.sleep(0.0005)
            made += 2
        print(made)
    """,
    )
    r = run_probe(script)
    assert r.returncode == 0
    made = int(r.stdout.split()[0])
    spans = pd.read_parquet(r.run_dir / "spans.parquet")
    assert len(spans) == made and spans["span_id"].is_unique
    assert not list(r.run_dir.glob("*.jsonl"))
