"""Measure a corpus service's truth from outside the process, with no probe in it.

Runs the service and, every 50 ms, reads each of its threads from /proc
(``/proc/PID/task/TID/stat``: name, state R/S/D, user+system CPU ticks; and, asleep,
``wchan``: where in the kernel it waits). Writes ``services/NAME.truth.json``: per
thread, its CPU seconds, the share of readings in each kernel state and its top wait
channels (cases measured before 2026-11-23 lack them), and from the scheduler's own
statistics (``/proc/PID/task/TID/schedstat``, exact) its time on a CPU and runnable on a
run queue (cases measured before 2026-11-26 lack them); the process's wall time and mean
cores used; its resident memory at each reading (``rss_mb``: [s, MB] pairs, from
``/proc/PID/statm``; cases measured before 2026-12-05 lack it). Where py-spy is
installed, a second run under ``py-spy record`` (on-CPU samples only; it stops the process
for each sample, so a sample is where the thread was) gives the function holding most
on-CPU samples as a cross-check, and each function's inclusive share of them (cases
measured before 2026-11-29 lack it). A third run under ``py-spy record --native`` gives
the share of its samples inside CPython's garbage collector (``gc_collect_main``), the
collector's time seen from outside (cases measured before 2026-12-05 lack it).

    python tests/threads_corpus/measure.py NAME [ARG ...]
    python tests/threads_corpus/measure.py --serve NAME   # NAME:app under uvicorn
    python tests/threads_corpus/measure.py --serve-script NAME   # NAME.py --port PORT

``--serve`` runs ``NAME:app`` under uvicorn on a free port (``--serve-script``: the
script itself, which serves on ``--port``), drives it with ``drive.py``'s 8 clients for
6 s, then stops it with SIGINT (as Ctrl-C would); the figures are the server's.
"""

from __future__ import annotations

import collections
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import psutil

HERE = Path(__file__).resolve().parent
TICK = os.sysconf("SC_CLK_TCK")


def read_stat(path: str) -> tuple[str, str, int] | None:
    """(name, state, user+system CPU ticks) of a /proc stat file; None if it is gone."""
    try:
        with open(path) as f:
            raw = f.read()
    except OSError:
        return None
    fields = raw[raw.rindex(")") + 2 :].split()
    return raw[raw.index("(") + 1 : raw.rindex(")")], fields[0], int(fields[11]) + int(fields[12])


def read_wchan(pid: int, tid: int) -> str:
    """Where in the kernel a sleeping thread waits (``anon_pipe_write``, ``futex_wait``...);
    "" when running or unreadable."""
    try:
        with open(f"/proc/{pid}/task/{tid}/wchan") as f:
            name = f.read().strip()
    except OSError:
        return ""
    return "" if name == "0" else name


def read_threads(pid: int) -> dict[int, tuple[str, str, int]]:
    """tid -> (name, state, cpu ticks) now; threads that vanish mid-read are skipped."""
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return {}
    read = {int(tid): read_stat(f"/proc/{pid}/task/{tid}/stat") for tid in tids}
    return {tid: stat for tid, stat in read.items() if stat is not None}


def read_schedstat(pid: int, tid: int) -> tuple[int, int] | None:
    """(ns on a CPU, ns runnable on a run queue) of a thread, exact: the scheduler's own
    statistics (/proc/PID/task/TID/schedstat); None if it is gone or the kernel keeps none.
    The stat file's state is read at an instant, its CPU ticks sampled at the timer's."""
    try:
        with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
            on_cpu, runnable, _ = f.read().split()
    except (OSError, ValueError):
        return None
    return int(on_cpu), int(runnable)


def read_process_ticks(pid: int) -> int:
    """The process's user+system CPU ticks, its exited threads' included (0 if gone)."""
    stat = read_stat(f"/proc/{pid}/stat")
    return stat[2] if stat is not None else 0


def serve_and_drive(child: subprocess.Popen, port: int) -> None:
    """Load the server on ``port`` once it listens, then stop it as Ctrl-C would."""
    import signal
    import threading

    from drive import drive, wait_for_port

    def load() -> None:
        wait_for_port(port)
        drive(port)
        child.send_signal(signal.SIGINT)

    threading.Thread(target=load, daemon=True).start()


def watch(argv: list[str], port: int | None = None) -> dict[str, object]:
    child = subprocess.Popen(
        argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
    )
    try:
        if port is not None:
            serve_and_drive(child, port)
        return watch_pid(child.pid, lambda: child.poll() is None)
    finally:
        reap(child)


def reap(child: subprocess.Popen) -> None:
    """End what is left of ``child``'s session (started with ``start_new_session``): a
    helper process of the service (a store its lifespan starts) outlived a server that
    py-spy's Ctrl-C stopped before it could shut down, three in one sitting."""
    import signal

    try:
        os.killpg(child.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    child.wait()


def watch_pid(pid: int, running: Callable[[], bool], every_s: float = 0.05) -> dict[str, object]:
    """Read process ``pid``'s threads from /proc every ``every_s`` while ``running()``:
    its truth as ``watch`` writes it (also for a process another tool started), each
    thread's CPU counted from its first reading."""
    started = time.monotonic()
    states: dict[int, collections.Counter[str]] = collections.defaultdict(collections.Counter)
    # where the kernel has each thread when it is not running (S or D): the wait's object
    wchans: dict[int, collections.Counter[str]] = collections.defaultdict(collections.Counter)
    last: dict[int, tuple[str, str, int]] = {}
    first_ticks: dict[int, int] = {}  # CPU is counted from a thread's first reading
    first_sched: dict[int, tuple[int, int]] = {}  # schedstat at a thread's first reading
    last_sched: dict[int, tuple[int, int]] = {}
    process_ticks = 0  # the process's own CPU counts threads that have exited
    process_first = read_process_ticks(pid)
    rss: list[tuple[float, float]] = []  # (s since the start, MB resident)
    while running():
        process_ticks = max(process_ticks, read_process_ticks(pid) - process_first)
        resident = read_rss_mb(pid)
        if resident is not None:
            rss.append((round(time.monotonic() - started, 2), round(resident, 1)))
        now = read_threads(pid)
        for tid, (name, state, ticks) in now.items():
            states[tid][state] += 1
            if state in ("S", "D"):
                wchans[tid][read_wchan(pid, tid) or "?"] += 1
            last[tid] = (name, state, ticks)
            first_ticks.setdefault(tid, ticks)
            exact = read_schedstat(pid, tid)
            if exact is not None:
                first_sched.setdefault(tid, exact)
                last_sched[tid] = exact
        time.sleep(every_s)
    wall = time.monotonic() - started
    threads = []
    for tid, (name, _, ticks) in sorted(last.items()):
        seen = sum(states[tid].values())
        threads.append({
            "tid_order": len(threads), "name": name, "cpu_s": (ticks - first_ticks[tid]) / TICK,
            "states": {s: round(n / seen, 3) for s, n in sorted(states[tid].items())},
            "wchans": {w: round(n / seen, 3) for w, n in wchans[tid].most_common(3)},
        })  # fmt: skip
        if tid in last_sched:
            (cpu0, queued0), (cpu1, queued1) = first_sched[tid], last_sched[tid]
            threads[-1]["schedstat"] = {
                "on_cpu_s": round((cpu1 - cpu0) / 1e9, 3),
                "runqueue_s": round((queued1 - queued0) / 1e9, 3),
            }
    # short-lived threads (a thread per request) end between readings: the process's
    # figure holds them, the per-thread ones only what was seen
    cpu = max(sum(t["cpu_s"] for t in threads), process_ticks / TICK)
    return {
        "wall_s": round(wall, 2),
        "cores_used": round(cpu / wall, 2),
        "threads": threads,
        "rss_mb": rss,
    }


def read_rss_mb(pid: int) -> float | None:
    """The process's resident set, in MB (psutil reads ``/proc/PID/statm``)."""
    try:
        return psutil.Process(pid).memory_info().rss / 1e6
    except psutil.Error:
        return None


def py_spy_stacks(argv: list[str], port: int | None = None, *, native: bool = False) -> list[str]:
    """py-spy's raw stacks of a run of ``argv`` (``frame;frame;... COUNT`` lines; with
    ``native``, C frames among them); [] where py-spy is missing or wrote nothing."""
    if shutil.which("py-spy") is None:
        return []
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "raw.txt"
        spy = subprocess.Popen(["py-spy", "record", "-r", "100", "-f", "raw", "-o", str(out),
                                *(["--native"] if native else []), "--", *argv],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                               start_new_session=True)  # fmt: skip
        try:
            if port is not None:
                serve_and_drive(spy, port)  # py-spy passes the SIGINT on to the server
            spy.wait()
        finally:
            reap(spy)
        return out.read_text().splitlines() if out.exists() else []


def py_spy_profile(
    argv: list[str], port: int | None = None
) -> tuple[str | None, dict[str, float] | None]:
    """(the leaf function with most on-CPU samples, the 12 functions on most samples'
    stacks: their share of the samples)."""
    leaf: collections.Counter[str] = collections.Counter()
    inclusive: collections.Counter[str] = collections.Counter()
    for line in py_spy_stacks(argv, port):
        stack, _, count = line.rpartition(" ")
        names = [frame.split(" (")[0] for frame in stack.split(";")]
        leaf[names[-1]] += int(count)
        inclusive.update(dict.fromkeys(names, int(count)))
    total = sum(leaf.values())
    shares = {name: round(n / total, 3) for name, n in inclusive.most_common(12)}
    return (leaf.most_common(1)[0][0] if leaf else None), (shares or None)


# CPython's cyclic collector, as its C frame is named (Modules/gcmodule.c, 3.8-3.12)
COLLECTOR_FRAME = "gc_collect_main"


def py_spy_collector_share(argv: list[str], port: int | None = None) -> float | None:
    """The share of py-spy's on-CPU samples, C frames read too (``--native``), inside the
    garbage collector: its time from outside, as probe times it from inside. None where
    py-spy is missing or cannot read C frames (an interpreter without symbols)."""
    lines = py_spy_stacks(argv, port, native=True)
    total = collected = 0
    for line in lines:
        stack, _, count = line.rpartition(" ")
        total += int(count)
        if any(f.split(" ")[0] == COLLECTOR_FRAME for f in stack.split(";")):
            collected += int(count)
    return round(collected / total, 3) if total else None


def main() -> None:
    serve = len(sys.argv) > 1 and sys.argv[1] in ("--serve", "--serve-script")
    if len(sys.argv) < 2 + serve or not (HERE / "services" / f"{sys.argv[1 + serve]}.py").is_file():
        # a typo (or --help) must not run nothing and write a truth file named after it
        services = sorted(p.stem for p in (HERE / "services").glob("*.py"))
        sys.exit(f"{__doc__}\nNAME is one of: {', '.join(services)}")
    name, args = sys.argv[1 + serve], sys.argv[2 + serve :]
    port = None
    argv = [sys.executable, str(HERE / "services" / f"{name}.py"), *args]
    if serve:
        from drive import free_port

        port = free_port()
        if sys.argv[1] == "--serve-script":
            argv += ["--port", str(port)]
        else:
            argv = [sys.executable, "-m", "uvicorn", f"{name}:app", "--app-dir",
                    str(HERE / "services"), "--port", str(port),
                    "--log-level", "warning"]  # fmt: skip
    truth = watch(argv, port)
    if serve:
        port = free_port()
        argv[argv.index("--port") + 1] = str(port)
    truth["py_spy_top_on_cpu"], truth["py_spy_inclusive"] = py_spy_profile(argv, port)
    if serve:
        port = free_port()
        argv[argv.index("--port") + 1] = str(port)
    truth["py_spy_native_collector"] = py_spy_collector_share(argv, port)
    truth["measured"] = (
        f"python tests/threads_corpus/measure.py {' '.join([*sys.argv[1:]])} "
        f"({time.strftime('%Y-%m-%d')}, this machine kind: 2 cores)"
    )
    path = HERE / "services" / f"{name}.truth.json"
    path.write_text(json.dumps(truth, indent=1) + "\n")
    print(path.read_text())


if __name__ == "__main__":
    main()
