"""``probe watch`` on a real served store while its request rate rises: the live slow
test's rate check (``analyzers/leaks/rate.py``) on a real process, where its evidence
had been simulated series.

Two arms run at once, each an undecorated FastAPI app under uvicorn
(``tests/memory_corpus/services/session_api.py:app_ttl``, ~9 KB a session, truth in its
docstring) under ``probe watch``, each driven by ``probe load --rate`` through the same
staircase of rates, then held at the last rate:

* ``store``: sessions expire after ``--ttl`` seconds, so memory follows the rate up and
  holds once it holds (truth: no leak; a store bounded in time);
* ``store+leak``: the same, and one session in ``--kept-every`` never expires (truth: a
  leak of ~9 KB / N a login beside the store).

Printed: each arm's status lines over time (memory, verdict) beside the rate then, and per
arm when it first said LEAK. The bar: the store never says LEAK; the leak does, in time.
The truth is by construction; the benchmark also reads each app's session count from
``/health`` at the end (the store's sessions plus the kept ones).

    python benchmarks/watch_ramp.py [--rates 20,30,...] [--step 120] [--steady 600]
        [--ttl 180] [--kept-every 20] [--window 5m] [--warmup 5m] [--keep DIR]

Real processes and real time: ~35 min at the defaults. Run on a quiet machine. Once
either arm is flagged, ``probe watch``'s attribution traces it (tracemalloc) until its
sites are sent, some seconds at ~8x the app's CPU (``attribution_cost.py``); in the first
run, before tracing stopped by itself, it took each app to ~4 GB and 44% of a core after
30 min, and the rates after a first LEAK were not the service's own.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

from probe.watchdog.limits import parse_duration

REPO = Path(__file__).resolve().parents[1]
SERVICES = REPO / "tests" / "memory_corpus" / "services"
_SCRIPT = Path(sys.executable).parent / "probe"
PROBE = [str(_SCRIPT)] if _SCRIPT.is_file() else [sys.executable, "-m", "probe.cli"]
MIX = '[[request]]\nmethod = "POST"\npath = "/login"\njson = { user = "ada" }\n'


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Arm:
    """One app under ``probe watch``, its status lines kept with when they came."""

    def __init__(self, name: str, env: dict[str, str], args: argparse.Namespace, out: Path):
        self.name, self.port = name, free_port()
        self.out = out / name
        self.lines: list[tuple[float, str]] = []
        argv = [*PROBE, "watch", "--window", args.window, "--warmup", args.warmup,
                "--status-every", args.status_every, "--out", str(self.out), "--",
                sys.executable, "-m", "uvicorn", "session_api:app_ttl", "--app-dir",
                str(SERVICES), "--host", "127.0.0.1", "--port", str(self.port),
                "--no-access-log"]  # fmt: skip
        self.proc = subprocess.Popen(
            argv,
            env={**os.environ, **env},
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,  # stopped as a group: nothing outlives the benchmark
        )
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.lines.append((time.monotonic(), line.rstrip()))

    def sessions(self) -> int | None:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/health", timeout=10) as r:
                return int(json.loads(r.read())["sessions"])
        except (OSError, ValueError, KeyError):
            return None

    def stop(self) -> None:
        stop_group(self.proc)
        self._reader.join(10)


def check_watch_args(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """--window and --warmup are durations, and the warm-up outlasts the store's fill: a
    store filling at a steady rate climbs like a leak for a TTL."""
    try:
        warmup_s = parse_duration(args.warmup)
        parse_duration(args.window)
    except ValueError as e:
        parser.error(str(e))
    if warmup_s <= args.ttl:
        parser.error(f"--warmup {args.warmup} must outlast the store's fill (--ttl {args.ttl:g} s)")


def stop_group(proc: subprocess.Popen[str]) -> None:
    """SIGTERM (probe watch stops its command and writes its report), then the group's
    SIGKILL after 2 min: nothing a benchmark started outlives it."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(120)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def drive(arm: Arm, schedule: list[tuple[float, float]], mix: Path, log: list) -> None:
    """``probe load --rate`` at each (rate, seconds) in turn, back to back."""
    for rate, seconds in schedule:
        if arm.proc.poll() is not None:
            return
        log.append((time.monotonic(), arm.name, rate))
        subprocess.run(
            [*PROBE, "load", f"http://127.0.0.1:{arm.port}/login", "--mix", str(mix),
             "--rate", str(rate), "-d", str(seconds), "--wait", "120"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=seconds + 300,
        )  # fmt: skip


STATE = re.compile(r"pid \d+: ([\d.]+) MiB, (LEAK|no leak|undetermined|warming up)(.*)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rates", default="20,30,40,50,60,70,80,90", help="the staircase")
    parser.add_argument("--step", type=float, default=150.0, help="seconds at each rate")
    parser.add_argument("--steady", type=float, default=600.0, help="seconds at the last")
    parser.add_argument("--ttl", type=float, default=180.0, help="the store's session TTL")
    parser.add_argument("--kept-every", type=int, default=20, help="the leak arm's 1 in N")
    parser.add_argument("--window", default="5m")
    # longer than the store takes to fill (its TTL at the first rate): a store filling at
    # a steady rate climbs like a leak for a TTL, and with --warmup 1m beside a 180-s TTL
    # both arms were flagged by the fast test 2 min in (the first run, 2026-12-03)
    parser.add_argument("--warmup", default="5m")
    parser.add_argument("--status-every", default="30s")
    parser.add_argument(
        "--keep",
        type=Path,
        metavar="DIR",
        help="write each arm's leak report (leak.json: its series, its verdict) under DIR "
        "and keep it, to replay a verdict; by default they go with a temporary directory",
    )
    args = parser.parse_args()
    rates = [float(r) for r in args.rates.split(",")]
    check_watch_args(parser, args)
    schedule = [(r, args.step) for r in rates[:-1]] + [(rates[-1], args.step + args.steady)]
    with tempfile.TemporaryDirectory(prefix="probe-watch-ramp-") as tmp:
        out = Path(tmp) if args.keep is None else args.keep
        out.mkdir(parents=True, exist_ok=True)
        mix = out / "login.toml"
        mix.write_text(MIX)
        ttl = {"SESSION_TTL_S": str(args.ttl)}
        arms = [
            Arm("store", {**ttl, "SESSION_KEPT_EVERY": "0"}, args, out),
            Arm("store+leak", {**ttl, "SESSION_KEPT_EVERY": str(args.kept_every)}, args, out),
        ]
        t0 = time.monotonic()
        log: list = []
        drivers = [threading.Thread(target=drive, args=(a, schedule, mix, log)) for a in arms]
        try:
            for d in drivers:
                d.start()
            for d in drivers:
                d.join()
            sessions = {a.name: a.sessions() for a in arms}
        finally:
            for a in arms:
                a.stop()
        report(arms, log, t0, sessions, args)


def report(arms: list[Arm], log: list, t0: float, sessions: dict, args) -> None:
    def rate_at(name: str, t: float) -> float:
        due = [r for at, n, r in log if n == name and at <= t]
        return due[-1] if due else 0.0

    print(f"rates {args.rates}/s, {args.step:.0f} s each, the last held {args.steady:.0f} s "
          f"more; TTL {args.ttl:.0f} s; leak arm keeps 1 session in {args.kept_every}; "
          f"probe watch --window {args.window} --warmup {args.warmup}")  # fmt: skip
    for a in arms:
        print(f"\n## {a.name} (exit {a.proc.returncode}, sessions at the end "
              f"{sessions.get(a.name)})")  # fmt: skip
        first_leak = None
        for at, line in a.lines:
            m = STATE.search(line)
            if not m:
                continue  # the JSON alert line, attribution: the status lines say the state
            t = at - t0
            if m.group(2) == "LEAK" and first_leak is None:
                first_leak = t
            print(f"{t / 60:6.1f} min  {rate_at(a.name, at):5.0f}/s  {m.group(1):>8} MiB  "
                  f"{m.group(2)}{m.group(3)[:150]}")  # fmt: skip
        if not any(STATE.search(line) for _, line in a.lines):
            print("no status line; its stderr ended:", *[line for _, line in a.lines[-5:]])
        said = "never" if first_leak is None else f"at {first_leak / 60:.1f} min"
        print(f"first LEAK: {said}")


if __name__ == "__main__":
    main()
