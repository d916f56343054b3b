"""Worker processes recorded into shards of one run (probe.workers) and merged on load:
a Flask app under gunicorn -w 2 and a FastAPI app under uvicorn --workers 2, driven by
probe run --load, count every answered request once, in the worker that served it; a
process pool's workers, forked or spawned, record their own samples and spans; a worker
killed outright keeps what it flushed, and the run says which worker that was."""

from __future__ import annotations

import json
import subprocess
import sys

import pandas as pd
import pytest

from probe.rundir import load
from tests.threads_corpus.drive import free_port

from .conftest import REPO, write_script

pytestmark = pytest.mark.integration

CORPUS = REPO / "tests" / "serving_corpus"


def spec(tmp_path, port: int) -> str:
    path = tmp_path / "spec.toml"
    path.write_text(
        f'url = "http://127.0.0.1:{port}"\nconcurrency = 4\nduration = 3\nwarmup = 0.5\n'
        '[[request]]\nmethod = "POST"\npath = "/predict"\njson = { n = 20000 }\n'
        '[[request]]\npath = "/items/7"\n'
    )
    return str(path)


def answered(run_dir) -> pd.DataFrame:
    requests = pd.read_parquet(run_dir / "load" / "requests.parquet")
    return requests[requests["status"] > 0]


def test_flask_under_gunicorn_with_two_workers_counts_every_request_in_its_worker(
    run_probe, tmp_path
):
    pytest.importorskip("gunicorn")
    pytest.importorskip("flask")
    port = free_port()
    r = run_probe(
        "--load", spec(tmp_path, port), "-m", "gunicorn", "-w", "2",
        "-b", f"127.0.0.1:{port}", "--chdir", str(CORPUS), "shop_flask:app",
        timeout=180,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    client = answered(r.run_dir)
    d = json.loads((r.run_dir / "diagnosis.json").read_text())
    # every answered request, warm-up included, is one request span, whichever worker
    assert d["run"]["requests"] == len(client) > 100
    routes = {e["name"]: e["requests"] for e in d["endpoints"]["routes"]}
    assert routes["POST /predict"] == int((client["label"] == "POST /predict").sum())
    workers = d["endpoints"]["workers"]
    assert len(workers) == 2 and all(w["requests"] > 0 for w in workers)
    assert sum(w["requests"] for w in workers) == len(client)
    run = load(r.run_dir)
    assert sorted(w["pid"] for w in workers) == sorted(w["pid"] for w in run.workers)
    assert all(w["closed"] for w in run.workers)  # gunicorn's stop closes each shard
    assert "Workers (requests" in r.stdout
    # the arbiter waiting on its workers is not the service's limit
    assert d["primary"]["stage"] != "<library>" or d["primary"]["kind"] != "io"


def test_fastapi_under_uvicorn_with_two_spawned_workers_counts_every_request(run_probe, tmp_path):
    pytest.importorskip("fastapi")
    pytest.importorskip("uvicorn")
    port = free_port()
    r = run_probe(
        "--load", spec(tmp_path, port), "-m", "uvicorn", "shop_api:app",
        "--app-dir", str(CORPUS), "--port", str(port), "--workers", "2",
        "--log-level", "warning",
        timeout=180,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    client = answered(r.run_dir)
    d = json.loads((r.run_dir / "diagnosis.json").read_text())
    assert d["run"]["requests"] == len(client) > 100
    workers = d["endpoints"]["workers"]
    assert len(workers) == 2 and sum(w["requests"] for w in workers) == len(client)
    run = load(r.run_dir)
    assert {w["started_by"] for w in run.workers} == {"spawn"}
    assert all(w["closed"] for w in run.workers)  # SIGTERM closed them (probe.sigterm)
    # the parent waiting on its workers' health is idle capacity, not the limit
    assert d["primary"]["subkind"] != "subprocess"


def test_pool_workers_forked_or_spawned_record_their_own_work(run_probe, tmp_path):
    script = write_script(
        tmp_path,
        """
        import multiprocessing as mp, time
        import probe

        def burn(seconds):
            with probe.span("burn"):
                end = time.process_time() + seconds
                while time.process_time() < end:
                    pass

        if __name__ == "__main__":
            for method in ("fork", "spawn"):
                with mp.get_context(method).Pool(2) as pool:
                    pool.map(burn, [0.4] * 4)
        """,
    )
    r = run_probe(script, timeout=120)
    assert r.returncode == 0, r.stderr
    run = load(r.run_dir)
    assert sorted(w["started_by"] for w in run.workers) == ["fork", "fork", "spawn", "spawn"]
    assert all(w["closed"] for w in run.workers)  # terminate()'s SIGTERM closed them
    spans = run.spans.merge(run.threads[["thread_id", "pid"]], on="thread_id")
    assert (spans["name"] == "burn").sum() == 8
    assert set(spans["pid"]) <= {w["pid"] for w in run.workers}
    # the workers' own samples: CPU in burn, outside the root process
    names = dict(zip(run.frames["frame_id"], run.frames["function"], strict=True))
    leaf = {
        int(s): names[int(ids.split(";")[-1])]
        for s, ids in zip(run.stacks["stack_id"], run.stacks["frame_ids"], strict=True)
        if ids
    }
    samples = run.samples.merge(run.threads[["thread_id", "pid"]], on="thread_id")
    in_burn = samples[samples["stack_id"].map(leaf).eq("burn")]
    assert in_burn["cpu_ns"].sum() / 1e9 > 1.0  # of 3.2 s burnt in the four workers
    assert not (in_burn["pid"] == run.meta["pid"]).any()


def test_a_worker_killed_outright_keeps_what_it_flushed_and_is_named(run_probe, tmp_path):
    script = write_script(
        tmp_path,
        """
        import os, signal, time
        import probe

        pid = os.fork()
        if pid == 0:
            for _ in range(30):
                with probe.span("before the kill"):
                    time.sleep(0.05)
            os.kill(os.getpid(), signal.SIGKILL)
        os.waitpid(pid, 0)
        print("worker", pid)
        """,
    )
    r = run_probe(script, timeout=60)
    assert r.returncode == 0, r.stderr
    killed = int(r.stdout.split("worker ", 1)[1].split()[0])
    run = load(r.run_dir)
    assert [w["pid"] for w in run.workers] == [killed] and not run.workers[0]["closed"]
    # it flushed at least once a second: what it recorded until 1 s before the kill stays
    assert (run.spans["name"] == "before the kill").sum() >= 10
    note = f"1 of 1 worker process(es) ended without closing their shard (killed, or ended by os._exit: pid {killed})"  # noqa: E501
    assert note in r.stdout


def test_a_worker_whose_main_thread_cannot_run_the_handler_still_closes_and_dies_of_sigterm(
    run_probe, tmp_path
):
    # Pool.terminate()'s hang: a SIGTERM that the main thread takes just before a
    # semaphore's sem_wait leaves the Python handler unrun. Here the main thread blocks
    # SIGTERM and waits on a semaphore nobody releases, so the signal reaches the
    # process through another of its threads, as it can with any thread running
    # (probe.sigterm). Without probe the default action ends the process.
    script = write_script(
        tmp_path,
        """
        import multiprocessing as mp, signal, threading, time

        def unblocked_sleeper():
            signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM})
            time.sleep(60)

        def worker(ready, never):
            signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})
            threading.Thread(target=unblocked_sleeper, daemon=True).start()
            ready.set()
            never.acquire()

        if __name__ == "__main__":
            ctx = mp.get_context("fork")
            ready, never = ctx.Event(), ctx.Semaphore(0)
            p = ctx.Process(target=worker, args=(ready, never))
            p.start()
            ready.wait(30)
            time.sleep(0.3)  # the worker in sem_wait
            p.terminate()
            p.join(30)
            print("exitcode:", p.exitcode)
        """,
    )
    plain = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=60
    )
    assert "exitcode: -15" in plain.stdout, plain.stderr
    r = run_probe(script, timeout=90)
    assert r.returncode == 0, r.stderr
    assert "exitcode: -15" in r.stdout, r.stderr
    [worker] = load(r.run_dir).workers
    assert worker["closed"] and worker["exit_status"] == 128 + 15  # closed on SIGTERM
