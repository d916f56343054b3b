"""What holds a leak, said by ``probe run`` at its defaults (no ``--memory``, no gc
counts), with a fix that fits: native memory and large buffers (not a cache to bound),
threads that never end, asyncio tasks never awaited.

The services are the memory corpus's (``tests/memory_corpus/services/``), each one's
truth by construction and checked from outside (``record.py --verify``): 16 KiB of
ctypes-malloc'd memory a request; a thread a request waiting forever; a pending task a
request holding its payload; a descriptor a request never closed (its memory flat); and
a served app's session store, its requests known only from probe's middleware.
"""

from __future__ import annotations

import json
import resource
import socket

import pytest

from .conftest import REPO

pytestmark = pytest.mark.integration

SERVICES = REPO / "tests" / "memory_corpus" / "services"
NATIVE_LEAK = SERVICES / "native_leak.py"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_a_native_leak_is_called_a_leak_outside_python_s_small_objects_with_a_fix_to_match(
    run_probe,
):
    r = run_probe(NATIVE_LEAK, "--requests", "700", timeout=180)
    assert r.returncode == 0, r.stderr
    leak = json.loads((r.run_dir / "diagnosis.json").read_text())["leak"]
    assert leak["state"] == "leak", leak["reason"]
    # 16 KiB a request by construction; the floor's per-request slope within a quarter
    assert 12_000 < leak["bytes_per_request"] < 20_500, leak
    low, high = leak["small_objects_share"]
    assert high <= 0.25, leak["small_objects_share"]
    assert "the rest large or native" in r.stdout
    recs = json.loads((r.run_dir / "diagnosis.json").read_text())["recommendations"]
    (fix,) = [rec for rec in recs if rec["id"] == "fix_leak"]
    assert fix["stage"] == "large buffers or native memory"
    assert "deque(maxlen" in fix["how"] and "lru_cache" not in fix["how"]


@pytest.mark.parametrize(
    ("service", "what", "stage", "sketch"),
    [
        ("thread_leak.py", "threads", "threads that never end", "ThreadPoolExecutor"),
        ("task_leak.py", "asyncio tasks", "asyncio tasks never awaited", "TaskGroup"),
    ],
    ids=["threads", "asyncio-tasks"],
)
def test_a_leak_whose_threads_or_tasks_pile_up_is_put_down_to_them(
    run_probe, service, what, stage, sketch
):
    r = run_probe(SERVICES / service, "--requests", "600", timeout=180)
    assert r.returncode == 0, r.stderr
    diagnosis = json.loads((r.run_dir / "diagnosis.json").read_text())
    leak = diagnosis["leak"]
    assert leak["state"] == "leak", leak["reason"]
    (pile,) = [p for p in leak["piling_up"] if p["what"] == what]
    assert 0.8 <= pile["per_request"] <= 1.2, pile  # one a request, by construction
    assert f"{what} pile up" in r.stdout
    (fix,) = [rec for rec in diagnosis["recommendations"] if rec["id"] == "fix_leak"]
    assert fix["stage"] == stage and sketch in fix["how"]


def test_descriptors_that_pile_up_without_memory_growth_get_a_note_with_the_time_to_the_limit(
    run_probe,
):
    r = run_probe(SERVICES / "fd_leak.py", "--requests", "600", timeout=180)
    assert r.returncode == 0, r.stderr
    diagnosis = json.loads((r.run_dir / "diagnosis.json").read_text())
    assert diagnosis["leak"]["state"] != "leak"  # its RSS is flat: no memory leak
    (pile,) = diagnosis["leak"]["piling_up"]
    assert pile["what"] == "file descriptors" and 0.8 <= pile["per_request"] <= 1.2, pile
    (note,) = [n for n in diagnosis["notes"] if "file descriptors pile up" in n]
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)  # the target's, inherited
    assert f"its limit of {soft:,} open files in " in note and "Too many open files" in note
    assert note in r.stdout


def _login_load(tmp_path, port: int, seconds: float) -> str:
    spec = tmp_path / "load.toml"
    spec.write_text(
        f'url = "http://127.0.0.1:{port}"\nconcurrency = 4\nduration = {seconds}\nwarmup = 0\n'
        '[[request]]\nmethod = "POST"\npath = "/login"\njson = { user = "ada" }\n'
    )
    return str(spec)


@pytest.mark.parametrize(
    ("app", "leaks"),
    [("session_api:app", True), ("session_api:app_ttl", False)],
    ids=["sessions-kept-forever", "sessions-expired"],
)
def test_a_served_app_s_leak_is_judged_per_request_counted_by_the_middleware(
    run_probe, tmp_path, app, leaks
):
    """An undecorated FastAPI app under uvicorn (session_api.py; its truth measured from
    outside, without probe, in its docstring): one 9-KB session kept a login is a leak
    per request, the requests counted by probe's own middleware; the same store expiring
    sessions after 2 s fills for 2 s, then churns: never a leak."""
    port = free_port()
    r = run_probe(
        "--load", _login_load(tmp_path, port, 10), "-m", "uvicorn", app,
        "--app-dir", str(SERVICES), "--port", str(port), "--log-level", "critical",
        timeout=180,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    diagnosis = json.loads((r.run_dir / "diagnosis.json").read_text())
    leak = diagnosis["leak"]
    assert diagnosis["run"]["requests"] > 500  # the middleware's spans: the work axis
    if leaks:
        assert leak["state"] == "leak", leak["reason"]
        assert leak["basis"] == "requests", leak
        # 9.0 KB of Python objects a session (tracemalloc, the service's docstring): the
        # floor's per-request slope within a quarter of it
        assert 6_800 < leak["bytes_per_request"] < 11_300, leak
        assert any(rec["id"] == "fix_leak" for rec in diagnosis["recommendations"])
    else:
        assert leak["state"] != "leak", leak["reason"]
        assert all(rec["id"] != "fix_leak" for rec in diagnosis["recommendations"])
