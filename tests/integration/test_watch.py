"""`probe watch` on real processes: the leaky sample flagged with its cache named, the healthy
one quiet, a real webhook receiver and the real metrics endpoint, exit statuses, bad input."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import psutil
import pytest

from .conftest import REPO, probe_cmd, write_script

pytestmark = pytest.mark.integration

# Short settings for processes that live seconds, not hours (the defaults are for staging:
# 1 s, 30 min, 10 min of warm-up). Warm-up, a window and its confirmation must fit in the
# leaky sample's life (~20 s for 6,000 requests here) with room to spare: the warm-up
# covers its start-up (the model loads ~50 MB at 3.5-4 s under probe watch on this machine
# kind), readings every 0.05 s make the shortest window 6 s (12 bins of 10 readings), and
# 8 s of window + 0.8 s of confirmation flag it by ~14 s. (With a 2-s warm-up and a 12-s
# window the flag raced the process's exit: CI's red watch tests.)
QUICK = ["--interval", "0.05", "--warmup", "5s", "--window", "8s", "-q"]
LEAKY = [sys.executable, str(REPO / "sample_services" / "leaky_cache.py")]


def watch(*args, timeout=240, **kwargs) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        probe_cmd("watch", *args), capture_output=True, text=True, timeout=timeout, **kwargs
    )


@pytest.fixture
def receiver():
    got: list[dict] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            got.append(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
            self.send_response(200)
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_port}/alerts", got
    server.shutdown()
    server.server_close()
    thread.join()


def line_of(path: str, text: str) -> int:
    """The number of the first line of ``path`` that holds ``text``."""
    lines = Path(path).read_text().splitlines()
    return next(n for n, line in enumerate(lines, 1) if text in line)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def scrape_until_exit(
    proc: subprocess.Popen[str], port: int, *, until: str | None = None, timeout: float = 200
) -> tuple[list[str], str, str]:
    """The metrics endpoint's pages while ``proc`` runs (up to the first that matches the
    regex ``until``), then its stdout and stderr; it never outlives the call."""
    pages: list[str] = []
    try:
        deadline = time.monotonic() + timeout
        while proc.poll() is None and time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2) as r:
                    pages.append(r.read().decode())
                if until is not None and re.search(until, pages[-1], re.M):
                    break
            except OSError:
                pass
            time.sleep(0.5)
        stdout, stderr = proc.communicate(timeout=timeout)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return pages, stdout, stderr


def test_the_leaky_sample_is_flagged_with_its_cache_named(tmp_path, receiver):
    url, posted = receiver
    port = free_port()
    out = tmp_path / "report"
    proc = subprocess.Popen(
        probe_cmd("watch", *QUICK, "--alert-webhook", url, "--metrics-port", port,
                  "--out", out, "--", *LEAKY, "--seconds", "20"),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    # served for a time, not a count: the live verdict comes after warm-up plus a window
    # and the half before it (14 s here: 12 bins of 0.5 s), and 6,000 requests took 17 s
    # on one host of this kind, 9 s on another
    leak_flagged = r"^probe_watch_leak\{pid=\"\d+\"\} 1\.0$"
    pages, _, stderr = scrape_until_exit(proc, port, until=leak_flagged)
    scraped = pages[-1] if pages and re.search(leak_flagged, pages[-1], re.M) else ""
    assert proc.returncode == 0, stderr  # the command's own status: it ran to the end
    assert scraped, f"the metrics endpoint never showed the leak\n{stderr}"
    assert "probe_watch_memory_slope_bytes_per_second{" in scraped
    assert "LEAK: memory grows" in stderr
    # the alert went to the webhook with the rate and the confidence; what grows followed
    assert [p["event"] for p in posted] == ["probe.leak", "probe.leak.attribution"]
    assert posted[0]["detected"] and posted[0]["confidence"] > 0.99
    assert posted[0]["rate_bytes_per_s"] > 0.5e6
    assert posted[1]["growing_containers"][0]["name"] == "__main__._CACHE"
    assert "tracing stopped once they were sent" in posted[1]["attribution_note"]
    report = json.loads((out / "leak.json").read_text())
    v = report["verdict"]
    assert v["detected"] and v["test"] in ("slow", "fast")
    # the cache is named by what holds it, and its entries' allocation line is top
    assert v["growing_containers"][0]["name"] == "__main__._CACHE"
    sites = [s["site"] for s in v["top_sites"]]
    built, kept = line_of(LEAKY[1], "return {"), line_of(LEAKY[1], "remember(cache,")
    assert sites[0].endswith(f"leaky_cache.py:{built}"), sites  # the cached result's lists
    assert f"leaky_cache.py:{kept}" in v["top_sites"][0]["traceback"]  # ...kept by main's loop
    assert "leaky_cache.py" in (out / "leak.html").read_text()


def test_at_defaults_the_leaky_sample_is_named_and_the_healthy_one_is_not():
    # the bar at staging defaults, on processes that live seconds: judged at their exit on
    # their series; what grew is named by the agent's gc census at start and at exit (no
    # tracemalloc at start: see probe.watchdog.config.WatchConfig.traced_start_s)
    leaky = watch("--", "python", str(REPO / "sample_services" / "leaky_cache.py"))
    assert leaky.returncode == 0, leaky.stderr
    assert "LEAK: memory grows" in leaky.stderr
    assert re.search(r"grows: __main__\._CACHE \(dict, [0-9,]+ items", leaky.stderr), leaky.stderr
    healthy = watch("--", "python", str(REPO / "sample_services" / "healthy_service.py"))
    assert healthy.returncode == 0, healthy.stderr
    assert "no leak in pid" in healthy.stderr and "LEAK" not in healthy.stderr


def test_a_command_traced_for_all_its_life_is_never_called_leaking():
    # tracemalloc slows the service: a start-up stretched over the whole series climbs as
    # steadily as a leak (torch's import and a memo filling did), so growth seen only
    # under tracing is undetermined, with what would settle it
    short = watch("--attribution", "always", "--", *LEAKY)
    assert short.returncode == 0, short.stderr
    assert "LEAK" not in short.stderr and "leak undetermined in pid" in short.stderr
    assert "--attribution off" in short.stderr


def test_at_defaults_fail_on_leak_exits_3_on_a_leak_and_0_on_a_warm_up():
    # the leak bar at staging defaults: judged at exit on the readings up to it. The
    # warm-up is a memo over a bounded catalogue whose growth slows as products repeat
    # (its truth: tests/memory_corpus/services/zipf_memo.py). The leak is judged per
    # request (the agent counts its probe.request spans): judged against time, this host's
    # drift in speed made its 4-s life seem to slow down (1 run in ~30 undetermined)
    leaky = watch("--fail-on-leak", "--", *LEAKY)
    assert leaky.returncode == 3, leaky.stderr
    assert "KB a request" in leaky.stderr  # ~8 KB cached a request (its docstring)
    warm = REPO / "tests" / "memory_corpus" / "services" / "zipf_memo.py"
    warming = watch("--fail-on-leak", "--", sys.executable, str(warm), "--requests", "20000")
    assert warming.returncode == 0, warming.stderr
    assert "LEAK" not in warming.stderr
    assert re.search(r"probe watch: (no leak|leak undetermined) in pid", warming.stderr)


def test_probe_run_and_probe_watch_agree_that_garbage_awaiting_a_full_pass_is_no_leak(
    run_probe,
):
    # the same process under both tools: sessions in reference cycles climb RSS, blocks
    # and malloc's bytes for ~15 s until the collector's first full pass (its truth and
    # how it was measured: tests/memory_corpus/services/cycle_garbage.py); each tool's
    # full collection as the run ends brings them back: an open question, never a leak
    cycles = REPO / "tests" / "memory_corpus" / "services" / "cycle_garbage.py"
    run = run_probe(cycles, "--seconds", "10", timeout=180)
    assert run.returncode == 0, run.stderr
    leak = json.loads((run.run_dir / "diagnosis.json").read_text())["leak"]
    assert leak["state"] != "leak", leak["reason"]
    collector = json.loads((run.run_dir / "meta.json").read_text())["collector"]
    freed = collector["full_collection_at_end"]
    assert freed["blocks_after"] < freed["blocks_before"]  # the garbage was there
    watched = watch("--fail-on-leak", "--", sys.executable, str(cycles), "--seconds", "10")
    assert watched.returncode == 0, watched.stderr
    assert "LEAK" not in watched.stderr
    assert re.search(r"probe watch: (no leak|leak undetermined) in pid", watched.stderr)


# The healthy sample's heap settles for longer than QUICK's 5 s on a slow host: its RSS
# floor, read from /proc every 50 ms on a host of this kind where it served ~440
# requests/s (2026-11-28), rose 72.2 -> 79.0 MB until 19 s and then held at 76-78 MB
# (a second run: 71.8 -> 74.7 MB by 8 s, then flat), under a 40-MB saw-tooth; judged
# from 5 s, one run in five (and a clean-clone CI run) read that settling as a leak.
# 20 s of warm-up, and requests enough that a host twice as fast still serves past it
# by more than the window. What the detector should say about such a rise with a
# shorter warm-up (undetermined, not leak) is issue 13's, still open.
HEALTHY = ["--interval", "0.05", "--warmup", "20s", "--window", "8s", "-q"]


def test_the_healthy_sample_stays_quiet(receiver):
    url, posted = receiver
    result = watch(*HEALTHY, "--alert-webhook", url, "--fail-on-leak", "--",
                   sys.executable, str(REPO / "sample_services" / "healthy_service.py"),
                   "--requests", "40000")  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "no leak" in result.stderr and "LEAK" not in result.stderr
    assert posted == []


def test_fail_on_leak_exits_3_and_stops_the_command():
    started = time.monotonic()
    result = watch(*QUICK, "--fail-on-leak", "--", *LEAKY, "--requests", "100000")
    assert result.returncode == 3, result.stderr
    assert "LEAK" in result.stderr
    assert time.monotonic() - started < 120  # stopped at the flag, not after 100k requests


def test_the_command_exit_status_comes_back():
    result = watch(
        *QUICK, "--", sys.executable, "-c", "import time, sys; time.sleep(1); sys.exit(7)"
    )
    assert result.returncode == 7, result.stderr


@pytest.mark.parametrize("metric", ["rss", "uss"])
def test_watching_a_pid_reports_when_it_exits_and_exits_0(tmp_path, metric):
    script = write_script(tmp_path, "import time\ntime.sleep(3)\n")
    target = subprocess.Popen([sys.executable, str(script)])
    try:
        result = watch(*QUICK, "--pid", target.pid, "--metric", metric, "--out", tmp_path / "out")
    finally:
        target.kill()
        target.wait()
    assert result.returncode == 0, result.stderr
    assert f"no leak in pid {target.pid}" in result.stderr
    assert json.loads((tmp_path / "out" / "leak.json").read_text())["process"]["pid"] == target.pid


def test_duration_ends_the_watch_and_leaves_the_pid_alone():
    target = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        result = watch("--interval", "0.1", "--duration", "2s", "--pid", target.pid)
        assert result.returncode == 0, result.stderr
        assert "--duration" in result.stderr and target.poll() is None
    finally:
        target.kill()
        target.wait()


def test_sigterm_stops_the_watch_with_a_report(tmp_path):
    target = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    watcher = subprocess.Popen(
        probe_cmd("watch", *QUICK, "--pid", target.pid, "--out", tmp_path / "out"),
        stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        time.sleep(2)
        watcher.send_signal(signal.SIGTERM)
        _, stderr = watcher.communicate(timeout=30)
        assert psutil.pid_exists(target.pid)  # watching a pid never touches it
    finally:
        target.kill()
        target.wait()
        if watcher.poll() is None:
            watcher.kill()
    assert watcher.returncode == 128 + signal.SIGTERM, stderr
    assert (tmp_path / "out" / "leak.html").exists()


def test_a_missing_pid_is_one_line_and_exit_2():
    result = watch("--pid", "999999")
    assert result.returncode == 2
    assert result.stderr.strip() == "probe: error: no process with pid 999999"


def test_a_metrics_port_in_use_is_exit_2_and_nothing_is_launched(tmp_path):
    marker = tmp_path / "ran"
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        result = watch("--metrics-port", busy.getsockname()[1], "--",
                       sys.executable, "-c", f"open({str(marker)!r}, 'w')")  # fmt: skip
    assert result.returncode == 2
    assert "cannot serve metrics on 127.0.0.1" in result.stderr
    assert not marker.exists()


def test_an_unreachable_webhook_does_not_change_the_outcome():
    result = watch(*QUICK, "--alert-webhook", f"http://127.0.0.1:{free_port()}/x", "--",
                   *LEAKY, "--requests", "6000")  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "LEAK" in result.stderr and "webhook" in result.stderr


def test_bad_options_are_usage_errors(tmp_path):
    assert watch("--", sys.executable, "-c", "pass", "--pid", "1").returncode == 0  # args of CMD
    assert watch().returncode == 2
    assert watch("--pid", "1", "--", "true").returncode == 2
    assert watch("--interval", "soon", "--pid", "1").returncode == 2
    assert watch("--limit", "lots", "--pid", "1").returncode == 2
    blocked = tmp_path / "file"
    blocked.write_text("")
    result = watch("--out", blocked / "sub", "--pid", str(os.getpid()))
    assert result.returncode == 2 and "cannot write the leak report" in result.stderr
    assert "--fail-on-leak" in watch("--help").stdout


def test_the_in_process_watchdog_flags_a_leak_posts_its_sites_then_stops_tracing(
    tmp_path, receiver
):
    url, posted = receiver
    script = write_script(
        tmp_path,
        f"""
        import json, time, tracemalloc
        import probe.watchdog

        dog = probe.watchdog.start(interval=0.05, warmup=1, window=6, limit="4GiB",
                                   alert_webhook={url!r}, out={str(tmp_path / "out")!r})
        kept = []
        traced = stopped = False  # tracemalloc seen on, then off again while still leaking
        end = time.monotonic() + 40
        while time.monotonic() < end and not stopped:
            kept.append(bytearray(200_000))  # ~4 MB/s, never freed
            time.sleep(0.05)
            traced = traced or tracemalloc.is_tracing()
            stopped = traced and not tracemalloc.is_tracing()
        verdict = probe.watchdog.stop()
        print(json.dumps({{"verdict": verdict, "traced": traced, "stopped": stopped}}))
        """,
    )
    result = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    seen = json.loads(result.stdout)
    # armed by the alert, and off again while the service still ran: not left on for life
    assert seen["traced"] and seen["stopped"], seen
    verdict = seen["verdict"]
    assert "tracing stopped once they were sent" in verdict["attribution_note"]
    assert verdict["detected"] and verdict["seconds_to_limit"] > 0
    assert any("bytearray" in t["type"] for t in verdict["growing_types"]) or verdict["top_sites"]
    assert posted and posted[0]["process"]["pid"] > 0
    assert '"event": "probe.leak"' in result.stderr  # the structured log line
    assert any(p["event"] == "probe.leak.attribution" for p in posted)
    assert (tmp_path / "out" / "leak.json").exists()


def test_a_watched_command_s_secrets_reach_no_file_line_alert_or_metric(tmp_path, receiver):
    # the same secrets on the watched command line, looked for in everything the watch
    # writes or sends: leak.json, leak.html, its terminal lines, every webhook body and
    # the metrics endpoint
    url, posted = receiver
    port = free_port()
    out = tmp_path / "report"
    secrets = ["hunter2", "sk-live-abc123", "pw123"]
    leaking = (
        "import time\n"
        "kept = []\n"
        "end = time.monotonic() + 20\n"
        "while time.monotonic() < end:\n"
        "    kept.append(bytearray(200_000))  # ~4 MB/s, never freed\n"
        "    time.sleep(0.05)\n"
    )
    proc = subprocess.Popen(
        probe_cmd("watch", *QUICK, "--alert-webhook", url, "--metrics-port", port,
                  "--out", out, "--fail-on-leak", "--", sys.executable, "-c", leaking,
                  "--password", "hunter2", "--token=sk-live-abc123",
                  "https://user:pw123@db.example/x"),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    scraped, stdout, stderr = scrape_until_exit(proc, port, timeout=120)
    assert proc.returncode == 3, stderr  # flagged: the alert and its report were sent
    assert posted and scraped and "LEAK" in stderr
    written = {
        "leak.json": (out / "leak.json").read_text(),
        "leak.html": (out / "leak.html").read_text(),
        "terminal": stdout + stderr,
        "webhook": json.dumps(posted),
        "metrics": "".join(scraped),
    }
    for where, text in written.items():
        assert not [s for s in secrets if s in text], where
    assert "db.example" in written["leak.json"]  # the command is named, its secrets are not


def test_the_in_process_watchdog_judges_a_short_life_per_request_as_probe_watch_does(tmp_path):
    # at defaults (a 10-minute warm-up) a service that lives seconds is judged at stop() on
    # its whole series; the requests it finished (probe.request) are the axis, as the
    # agent counts them for probe watch (test_at_defaults_fail_on_leak_exits_3_...)
    def run_in_process(sample: str) -> dict:
        script = write_script(
            tmp_path,
            f"""
            import json, runpy, sys
            import probe.watchdog

            probe.watchdog.start()
            sys.argv = [{sample!r}]
            # the sample's module stays alive until stop(), as a service's own __main__
            # does: runpy drops its temporary one, whose globals (the leaky cache) then
            # live only in cycles that stop()'s full collection would free
            held = None
            try:
                held = runpy.run_path({sample!r}, run_name="__main__")
            except SystemExit as e:  # the sample's sys.exit(main())
                held = e.__traceback__
            print(json.dumps(probe.watchdog.stop()))
            """,
            name=f"watched_{Path(sample).stem}.py",
        )
        done = subprocess.run(
            [sys.executable, str(script)], capture_output=True, text=True, timeout=120
        )
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout.splitlines()[-1])

    leaky = run_in_process(str(REPO / "sample_services" / "leaky_cache.py"))
    assert leaky["detected"] and leaky["basis"] == "requests", leaky
    assert 4e3 < leaky["bytes_per_request"] < 16e3, leaky  # ~8 KB cached a request
    healthy = run_in_process(str(REPO / "sample_services" / "healthy_service.py"))
    assert not healthy["detected"], healthy


def test_descriptors_that_pile_up_in_a_quiet_process_are_alerted_and_named_in_the_last_word(
    receiver,
):
    # a descriptor a request never closed, its memory flat (its truth, read from /proc:
    # tests/memory_corpus/services/fd_leak.py): no memory leak, but what piles up is
    # alerted as it happens (the first look, 10 s in), said again at the end, and fails
    # the watch as a leak does (the process dies at its open-files limit)
    url, posted = receiver
    fd_leak = REPO / "tests" / "memory_corpus" / "services" / "fd_leak.py"
    result = watch(*QUICK, "--fail-on-leak", "--alert-webhook", url, "--",
                   sys.executable, str(fd_leak), "--requests", "1500")  # fmt: skip
    assert result.returncode == 3, result.stderr
    assert "LEAK" not in result.stderr
    assert "PILING UP: file descriptors pile up (" in result.stderr, result.stderr
    assert "open files in " in result.stderr  # the time to the process's limit
    assert [p["event"] for p in posted] == ["probe.pile"]
    assert posted[0]["what"] == "file descriptors" and 50 < posted[0]["per_s"] < 150
    assert result.stderr.count("PILING UP:") == 1  # once, then the last word:
    assert "while memory did not grow enough to call a leak: at this pace" in result.stderr


def test_probe_watch_says_a_native_leak_is_outside_python_s_small_objects(receiver):
    # 16 KiB of ctypes-malloc'd memory a request (its truth, read from outside:
    # tests/memory_corpus/services/native_leak.py): the alert says so, as probe run does
    url, posted = receiver
    native = REPO / "tests" / "memory_corpus" / "services" / "native_leak.py"
    result = watch(*QUICK, "--alert-webhook", url, "--", sys.executable, str(native),
                   "--requests", "2500")  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert posted and posted[0]["event"] == "probe.leak", result.stderr
    alert = posted[0]
    assert alert["malloc_share"] > 0.75 and alert["small_objects_share"][1] < 0.25, alert
    assert "the rest is in allocations over 512 bytes" in alert["held_by"]
    assert "the rest is in allocations over 512 bytes" in result.stderr


SESSIONS = REPO / "tests" / "memory_corpus" / "services"
# bursts of load and the gaps between them, seconds (as session_api.py was found missed)
BURSTS = [(1.2, 2.0), (0.4, 2.0), (2.0, 2.0), (0.8, 2.0), (1.5, 2.0), (0.6, 1.0)]


def _serve_in_bursts(port: int, clients: int = 2) -> int:
    """POST /login from ``clients`` keep-alive connections in BURSTS; the logins sent."""
    import http.client

    sent = [0] * clients

    def client(k: int, until: float) -> None:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        try:
            while time.monotonic() < until:
                conn.request("POST", "/login", '{"user": "ada"}',
                             {"Content-Type": "application/json"})  # fmt: skip
                conn.getresponse().read()
                sent[k] += 1
        finally:
            conn.close()

    for length, gap in BURSTS:
        until = time.monotonic() + length
        threads = [threading.Thread(target=client, args=(k, until)) for k in range(clients)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        time.sleep(gap)
    return sum(sent)


def _listening(port: int, proc: subprocess.Popen[str], timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and proc.poll() is None:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.1)
    raise AssertionError("the app never listened")


def _bursts_then_stop(
    proc: subprocess.Popen[str], port: int, stop: Callable[[], None]
) -> tuple[int, str]:
    """Serve ``proc``'s app in bursts once it listens, ``stop`` it (uvicorn's own Ctrl-C),
    and wait for it (killed if anything failed on the way); (logins, its stderr)."""
    try:
        _listening(port, proc)
        logins = _serve_in_bursts(port)
        stop()
        _, stderr = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return logins, stderr


@pytest.mark.parametrize(
    ("app", "leaks"),
    [("session_api:app", True), ("session_api:app_ttl", False)],
    ids=["sessions-kept-forever", "sessions-expired"],
)
def test_a_served_app_s_requests_are_its_work_axis_so_a_leak_under_bursts_is_caught(
    tmp_path, app, leaks
):
    # an undecorated FastAPI app under uvicorn keeping 9.0 KB a session (tracemalloc; its
    # truth measured from outside in its docstring), served in bursts: in time its floor
    # is a staircase the live tests read as no trend; against the logins the agent counts
    # through probe's middleware, as probe run does, a line. The TTL twin fills for 2 s
    port = free_port()
    out = tmp_path / "report"
    proc = subprocess.Popen(
        probe_cmd("watch", *QUICK, "--fail-on-leak", "--out", out, "--", sys.executable,
                  "-m", "uvicorn", app, "--app-dir", SESSIONS, "--port", port,
                  "--log-level", "critical"),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip

    def stop() -> None:  # the watched uvicorn, a child of probe watch
        for child in psutil.Process(proc.pid).children():
            child.send_signal(signal.SIGINT)

    logins, stderr = _bursts_then_stop(proc, port, stop)
    verdict = json.loads((out / "leak.json").read_text())["verdict"]
    assert logins > 500
    if leaks:
        assert proc.returncode == 3, stderr
        assert verdict["state"] == "leak" and verdict["basis"] == "requests", verdict["reason"]
        assert 6_800 < verdict["bytes_per_request"] < 11_300, verdict  # 9.0 KB, within 25%
    else:
        assert proc.returncode != 3, stderr
        assert verdict["state"] != "leak", verdict["reason"]


# where a service starts its watchdog: in its module (uvicorn is loading it then: 0.54's
# `python -m uvicorn` loads it once to check it, and again through Config.load), or when
# the app starts serving (its lifespan: the app is loaded, and each connection's protocol
# takes it as it is, so only the cycle's task can wrap it)
_AT_IMPORT = """
import atexit, json, sys
import probe.watchdog

probe.watchdog.start()  # at defaults: a life of seconds is judged at stop()
sys.path.insert(0, {sessions!r})
from session_api import app  # noqa: E402

def _last_word():
    with open({verdict!r}, "w") as f:
        json.dump(probe.watchdog.stop(), f)

atexit.register(_last_word)  # after uvicorn's stop, the store still held
"""
_IN_LIFESPAN = """
import json, sys
from contextlib import asynccontextmanager
import probe.watchdog

sys.path.insert(0, {sessions!r})
from session_api import app  # noqa: E402

@asynccontextmanager
async def lifespan(_app):
    probe.watchdog.start()
    yield
    with open({verdict!r}, "w") as f:
        json.dump(probe.watchdog.stop(), f)

app.router.lifespan_context = lifespan
"""


@pytest.mark.parametrize("started", [_AT_IMPORT, _IN_LIFESPAN], ids=["at-import", "in-lifespan"])
def test_the_in_process_watchdog_counts_an_undecorated_app_s_requests_under_uvicorn(
    tmp_path, started
):
    # the same leaking login API, its requests counted through probe's middleware as
    # probe watch's agent counts them, so that the leak is judged per login as probe watch
    # and probe run judge it. Before, the in-process watchdog counted @probe.request
    # alone: this app's logins were not its work axis, and it judged them in time
    port = free_port()
    verdict_file = tmp_path / "verdict.json"
    source = started.format(sessions=str(SESSIONS), verdict=str(verdict_file))
    (tmp_path / "watched_sessions.py").write_text(source)
    proc = subprocess.Popen(
        [sys.executable, "-m", "uvicorn", "watched_sessions:app", "--app-dir", str(tmp_path),
         "--port", str(port), "--log-level", "critical"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    logins, stderr = _bursts_then_stop(proc, port, lambda: proc.send_signal(signal.SIGINT))
    assert proc.returncode == 0, stderr
    verdict = json.loads(verdict_file.read_text())
    assert logins > 500
    assert verdict["basis"] == "requests", verdict["reason"]
    assert verdict["state"] == "leak", verdict["reason"]
    assert 6_800 < verdict["bytes_per_request"] < 11_300, verdict  # 9.0 KB, within 25%
