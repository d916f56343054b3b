"""What ``probe watch``'s attribution costs a served app after a leak's alert, against an
unwatched twin in the same run.

Two copies of the same undecorated FastAPI app under uvicorn
(``tests/memory_corpus/services/session_api.py:app_ttl``: a session store whose sessions
expire after ``--ttl`` seconds, and one session in ``--kept-every`` never expires -- a
leak of ~9 KB / N a login beside a store of rate x TTL sessions, some 130 blocks each)
take the same ``probe load --rate`` at once: ``watched`` under ``probe watch`` at its
defaults but ``--window`` and ``--warmup``, ``twin`` alone. Each app's RSS and CPU time
are read from ``/proc`` every ``--every`` seconds, from outside both.

The alert (``LEAK:``) arms tracemalloc in the watched app; the sites follow
(``what grows:``), and tracing should stop there, or sooner at its tables' bound
(``probe.watchdog.attribution.TRACING_BOUND_BYTES``). Printed, per phase -- the minute
before the alert, the tracing (alert to sites), and after the sites (from ``--settle``
seconds on): the watched app's RSS over the twin's (medians) and its CPU rate over the
twin's, and what the sites' alert said of its tracing (``attribution_note``). The bar:
after the sites, both ratios back to what they were before the alert (before the fix
tracing never stopped: the first run of ``watch_ramp.py`` had each app at 3.5-4.5 GB and
44% of a core after 30 min).

    python benchmarks/attribution_cost.py [--rate 60] [--ttl 120] [--kept-every 4]
        [--window 2m] [--warmup 150s] [--after 300] [--every 2]

Real processes and real time: ~10 min at the defaults. Run on a quiet machine (both apps
and both load generators share its cores).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import psutil

# the same app, load mix and launchers as the ramp's (run as a script: its folder is on the path)
from watch_ramp import MIX, PROBE, SERVICES, check_watch_args, free_port, stop_group


def serve(port: int) -> list[str]:
    return [sys.executable, "-m", "uvicorn", "session_api:app_ttl", "--app-dir", str(SERVICES),
            "--host", "127.0.0.1", "--port", str(port), "--no-access-log"]  # fmt: skip


class App:
    """One app (under ``probe watch`` or alone), its /proc readings, its stderr's lines."""

    def __init__(self, name: str, argv: list[str], env: dict[str, str], port: int) -> None:
        self.name, self.port = name, port
        self.proc = subprocess.Popen(
            argv, env={**os.environ, **env}, stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE, text=True, start_new_session=True,
        )  # fmt: skip
        self.lines: list[tuple[float, str]] = []
        self.readings: list[tuple[float, float, float]] = []  # (t, RSS bytes, CPU s)
        self._served: psutil.Process | None = None
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.lines.append((time.monotonic(), line.rstrip()))

    def served(self) -> psutil.Process | None:
        """The Python process that serves: the command itself, or probe watch's child."""
        if self._served is None:
            try:
                me = psutil.Process(self.proc.pid)
                if "watch" not in me.cmdline():
                    self._served = me
                else:
                    children = me.children()
                    self._served = children[0] if children else None
            except psutil.Error:
                return None
        return self._served

    def read(self) -> None:
        p = self.served()
        if p is None:
            return
        try:
            with p.oneshot():
                cpu = p.cpu_times()
                self.readings.append((time.monotonic(), p.memory_info().rss, cpu.user + cpu.system))
        except psutil.Error:
            pass

    def first_line(self, text: str) -> float | None:
        return next((t for t, line in self.lines if text in line), None)

    def stop(self) -> None:
        stop_group(self.proc)


def load(port: int, rate: float, seconds: float, mix: Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [*PROBE, "load", f"http://127.0.0.1:{port}/login", "--mix", str(mix),
         "--rate", str(rate), "-d", str(seconds), "--wait", "120"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
    )  # fmt: skip


def phase(app: App, start: float, end: float) -> tuple[float, float]:
    """(median RSS, CPU seconds a second) of ``app`` between ``start`` and ``end``."""
    rows = [r for r in app.readings if start <= r[0] <= end]
    if len(rows) < 2:
        return float("nan"), float("nan")
    cpu_rate = (rows[-1][2] - rows[0][2]) / (rows[-1][0] - rows[0][0])
    return statistics.median(r[1] for r in rows), cpu_rate


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rate", type=float, default=60.0, help="logins a second, each app")
    parser.add_argument("--ttl", type=float, default=120.0, help="the store's session TTL")
    parser.add_argument("--kept-every", type=int, default=4, help="the leak: 1 session in N")
    parser.add_argument("--window", default="2m")
    parser.add_argument("--warmup", default="150s", help="longer than --ttl: the store's fill")
    parser.add_argument(
        "--after", type=float, default=300.0, help="seconds watched after the sites"
    )
    parser.add_argument("--settle", type=float, default=30.0, help="after the sites, left out")
    parser.add_argument("--every", type=float, default=2.0, help="seconds between /proc readings")
    parser.add_argument("--limit", type=float, default=1200.0, help="give up after this long")
    args = parser.parse_args()
    check_watch_args(parser, args)
    env = {"SESSION_TTL_S": str(args.ttl), "SESSION_KEPT_EVERY": str(args.kept_every)}
    with tempfile.TemporaryDirectory(prefix="probe-attribution-cost-") as tmp:
        mix = Path(tmp) / "login.toml"
        mix.write_text(MIX)
        ports = free_port(), free_port()
        watch = [*PROBE, "watch", "--window", args.window, "--warmup", args.warmup,
                 "--status-every", "30s", "--out", str(Path(tmp) / "report"), "--"]  # fmt: skip
        apps = [App("watched", watch + serve(ports[0]), env, ports[0]),
                App("twin", serve(ports[1]), env, ports[1])]  # fmt: skip
        loads: list[subprocess.Popen[bytes]] = []
        try:
            time.sleep(5)  # both listening
            loads = [load(a.port, args.rate, args.limit, mix) for a in apps]
            t0 = time.monotonic()
            while time.monotonic() - t0 < args.limit and apps[0].proc.poll() is None:
                for a in apps:
                    a.read()
                sites = apps[0].first_line("what grows:")
                if sites is not None and time.monotonic() - sites >= args.after:
                    break
                time.sleep(args.every)
        finally:
            for p in loads:
                if p.poll() is None:
                    os.killpg(p.pid, signal.SIGKILL)
                    p.wait()
            for a in apps:
                a.stop()
        report(apps, Path(tmp) / "report" / "leak.json", args, t0)


def report(apps: list[App], leak_json: Path, args: argparse.Namespace, t0: float) -> None:
    watched, twin = apps
    alert, sites = watched.first_line("LEAK: memory grows"), watched.first_line("what grows:")
    print(f"{args.rate:g} logins/s each app, TTL {args.ttl:g} s, 1 session in {args.kept_every} "
          f"kept; probe watch --window {args.window} --warmup {args.warmup}")  # fmt: skip
    if alert is None or sites is None:
        said = "no alert" if alert is None else "an alert but no sites"
        print(f"{said} within {args.limit:g} s: no result. Its last lines:")
        print(*[line for _, line in watched.lines[-5:]], sep="\n")
        return
    end = max(t for t, _, _ in watched.readings)
    phases = [
        ("the minute before the alert", alert - 60, alert),
        ("tracing (alert to sites)", alert, sites),
        (f"after the sites (+{args.settle:g} s on)", sites + args.settle, end),
    ]
    print(f"alert at {alert - t0:.0f} s, sites at {sites - t0:.0f} s, watched to {end - t0:.0f} s")
    print(f"{'phase':<36} {'RSS watched':>12} {'RSS twin':>10} {'ratio':>6} {'CPU ratio':>10}")
    for name, start, stop in phases:
        (rss_w, cpu_w), (rss_t, cpu_t) = phase(watched, start, stop), phase(twin, start, stop)
        print(f"{name:<36} {rss_w / 2**20:>9.0f} MiB {rss_t / 2**20:>6.0f} MiB "
              f"{rss_w / rss_t:>6.2f} {cpu_w / cpu_t:>10.2f}")  # fmt: skip
    print("\nRSS over time (MiB), from 1 min before the alert:")
    for t in range(int(alert - 60), int(end), 30):
        (w, _), (tw, _) = phase(watched, t - 2, t + 2), phase(twin, t - 2, t + 2)
        print(f"  {t - alert:+5.0f} s  watched {w / 2**20:6.0f}  twin {tw / 2**20:6.0f}")
    peak = max(r[1] for r in watched.readings if alert <= r[0] <= sites + args.settle)
    print(
        f"peak RSS of the watched app, alert to {args.settle:g} s after the sites: "
        f"{peak / 2**20:.0f} MiB"
    )
    try:
        verdict = json.loads(leak_json.read_text())["verdict"]
    except (OSError, ValueError, KeyError):
        print("no leak.json")
        return
    print(f"attribution: {verdict.get('attribution_note') or '(no note)'}")
    top = (verdict.get("growing_containers") or [{}])[0].get("name")
    site = (verdict.get("top_sites") or [{}])[0].get("site")
    print(f"named: {top}; top site: {site}")


if __name__ == "__main__":
    main()
