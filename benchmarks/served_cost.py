"""Throughput a served app keeps under `probe run`, beside py-spy's, on a real server.

A FastAPI route served by uvicorn (``tests/serving_corpus/stall_api.py``; ``/noop``
answers at once, so the server's and the framework's own work per request is all there
is: the case where a per-request cost of the profiler shows most) is driven by ``probe
load`` (closed loop, its own process) for ``--duration`` seconds after a 1-s warm-up, run
three ways in each round, in a shuffled order: plain, under ``py-spy record -r 100``
(the reference's external sampler at 100 Hz, launching the server), and under ``probe
run --no-report`` (the in-run cost; the verdict comes after the load and is
``overhead.py``'s business). Printed: each round's requests a second each way, then per
way the median of its rounds' ratios to plain -- ratios of runs made side by side, since
this machine kind moves by a fifth between minutes -- and the server's CPU a request,
read from /proc: in its main thread (the event loop, where the app and a profiler's
in-process hooks run) and in its other threads (probe's sampler and collector; none
under plain or py-spy, whose sampling is a process of its own).

    python benchmarks/served_cost.py [--rounds 5] [--duration 6] [--route /noop]
    python benchmarks/served_cost.py -- --no-http-spans     # probe run's own options
    python benchmarks/served_cost.py --baseline OLD         # and another checkout's probe
    python benchmarks/served_cost.py --extra=--no-http-spans  # one more arm, repeatable

``--baseline OLD`` runs a second checkout's ``probe run`` (``git worktree add OLD REV``,
its extensions built in place: ``python setup.py build_ext --inplace`` there) as a
fourth way in the same rounds: what a change buys, measured side by side. ``--extra
FLAGS`` adds a way of its own, ``probe run`` with those flags (``--extra '--hz 10'``, or
``--extra=--no-http-spans`` for one flag alone), in the same rounds: where the cost lies.

The load generator shares the two cores with the server (and with probe's helper
process): what a client on this host sees, not a server's throughput alone.

``--app shop_api`` serves ``tests/serving_corpus/shop_api.py``'s ``POST /predict``
instead (a sync route: ~2 ms of pure Python a request on AnyIO's worker threads, so the
loop's thread and the workers contend for the GIL; ``capacity.truth.md``): the case
where what probe does to the GIL -- its switch interval, its sampler taking the GIL each
tick -- shows. The CPU a request is split three ways: the loop's thread, the app's other
threads, and probe's own (the threads its ``meta.json`` lists as ``own_tids``: its
sampler and collector), and the app's threads' voluntary context switches a request are
printed too: each is a thread giving up the GIL or its core, and under GIL contention
each costs a hand-over.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
APP_DIR = REPO / "tests" / "serving_corpus"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _listening(port: int, proc: subprocess.Popen[bytes], timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and proc.poll() is None:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.05)
    raise SystemExit(f"the server on port {port} never listened")


_TICK_S = 1 / os.sysconf("SC_CLK_TCK")


# what each app serves: (its module, the route, probe load's --mix body or None)
APPS = {
    "stall_api": ("stall_api:app", "/noop", None),
    "shop_api": (
        "shop_api:app",
        "",
        '[[request]]\nmethod = "POST"\npath = "/predict"\njson = { n = 40000 }\n',
    ),
}


def _threads(pid: int) -> dict[int, tuple[float, int]]:
    """Each thread's CPU seconds (user + system) and voluntary context switches so far,
    from /proc."""
    out: dict[int, tuple[float, int]] = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        base = f"/proc/{pid}/task/{tid}"
        try:
            with open(f"{base}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            with open(f"{base}/status") as f:
                switches = next(
                    int(line.split()[1]) for line in f if line.startswith("voluntary_ctxt")
                )
        except (OSError, StopIteration):  # the thread ended
            continue
        out[int(tid)] = ((int(fields[11]) + int(fields[12])) * _TICK_S, switches)
    return out


def _probes_threads(run_dir: Path) -> set[int]:
    """The threads probe ran in the target (none without a run directory: plain,
    py-spy)."""
    try:
        meta = json.loads((run_dir / "meta.json").read_text())
    except (OSError, ValueError):
        return set()
    return set(meta.get("collector", {}).get("own_tids", []))


def _server_pid(proc: subprocess.Popen[bytes]) -> int:
    """The server's process: py-spy's child under py-spy; the command's own otherwise
    (``probe run`` runs its target in its own process)."""
    try:
        with open(f"/proc/{proc.pid}/task/{proc.pid}/children") as f:
            children = [int(c) for c in f.read().split()]
    except OSError:
        children = []
    with open(f"/proc/{proc.pid}/comm") as f:
        return children[0] if f.read().strip() == "py-spy" and children else proc.pid


@dataclass(frozen=True)
class Served:
    """One run's requests a second and, a request: the server's CPU (us) in its main
    thread, in the app's other threads and in probe's, and the app's threads' voluntary
    context switches."""

    rate: float
    main_us: float
    app_us: float
    probe_us: float
    switches: float


def served(
    cmd: list[str],
    port: int,
    load_args: list[str],
    clients: int,
    duration: float,
    env: dict[str, str] | None = None,
    run_dir: Path | None = None,
) -> Served:
    """Start ``cmd`` (a server on ``port``; ``run_dir``: its run directory under probe),
    load it (``load_args``: the URL and, for a POST, its --mix), stop it; the figures
    read from /proc over the load's middle (its first and last 0.3 s left out)."""
    proc = subprocess.Popen(
        cmd,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
        env=env,
    )
    try:
        _listening(port, proc)
        server = _server_pid(proc)
        load = subprocess.Popen(
            [sys.executable, "-m", "probe.cli", "load", *load_args,
             "-c", str(clients), "-d", str(duration), "--warmup", "1", "--json"],
            stdout=subprocess.PIPE, text=True,
        )  # fmt: skip
        time.sleep(1.3)
        before, began = _threads(server), time.monotonic()
        time.sleep(max(0.1, duration - 0.6))
        after, window_s = _threads(server), time.monotonic() - began
        out, _ = load.communicate(timeout=duration + 120)
        if load.returncode != 0:
            raise SystemExit(f"probe load failed (exit status {load.returncode})")
        rate = float(json.loads(out)["total"]["throughput_per_s"])
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGINT)  # uvicorn's own stop (py-spy passes it on)
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
    requests = rate * window_s
    probes = _probes_threads(run_dir) if run_dir is not None else set()
    spent = {t: (c - before.get(t, (0.0, 0))[0], n - before.get(t, (0, 0))[1])
             for t, (c, n) in after.items()}  # fmt: skip
    app = [t for t in spent if t != server and t not in probes]
    return Served(
        rate,
        1e6 * spent[server][0] / requests,
        1e6 * sum(spent[t][0] for t in app) / requests,
        1e6 * sum(c for t, (c, _) in spent.items() if t in probes) / requests,
        sum(n for t, (_, n) in spent.items() if t not in probes) / requests,
    )


def main() -> None:
    p = argparse.ArgumentParser(
        description=__doc__.splitlines()[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--duration", type=float, default=6.0, help="seconds of load a run")
    p.add_argument("--clients", type=int, default=8)
    p.add_argument(
        "--app",
        choices=sorted(APPS),
        default="stall_api",
        help="stall_api: a route that does nothing; shop_api: POST /predict, a sync route "
        "whose threads contend for the GIL",
    )
    p.add_argument("--route", help="stall_api's route (default /noop)")
    p.add_argument(
        "--baseline",
        metavar="DIR",
        help="another checkout of probe (its built extensions in place) run as a fourth way, "
        "'baseline', through PYTHONPATH: a change's cost against the code before it",
    )
    p.add_argument(
        "--extra",
        action="append",
        default=[],
        metavar="FLAGS",
        help="one more way: probe run with these flags (repeatable)",
    )
    p.add_argument("probe_args", nargs="*", help="after --: options for probe run")
    args = p.parse_args()
    py_spy = shutil.which("py-spy")
    if py_spy is None:
        print("py-spy not found (pip install '.[bench]'): probe's ratio only")
    module, route, mix = APPS[args.app]
    route = args.route or route
    ratios: dict[str, list[float]] = {}
    runs: dict[str, list[Served]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        if mix is not None:
            Path(tmp, "mix.toml").write_text(mix)
        for k in range(1, args.rounds + 1):
            ways = ["plain", "probe"] + (["py-spy"] if py_spy else [])
            ways += ["baseline"] if args.baseline else []
            ways += [f"probe {flags}" for flags in args.extra]
            random.shuffle(ways)
            rates: dict[str, float] = {}
            for n, way in enumerate(ways):
                port = _free_port()
                plain = [sys.executable, "-m", "uvicorn", module, "--app-dir",
                         str(APP_DIR), "--port", str(port), "--log-level", "critical"]  # fmt: skip
                flags = way.split()[1:] if way.startswith("probe ") else args.probe_args
                # -P: run from the repository root, -m would put this checkout's probe/
                # first on sys.path, ahead of --baseline's PYTHONPATH (as overhead.py)
                probe_run = [sys.executable, "-P", "-m", "probe.cli", "run", "--no-report",
                             "--out", f"{tmp}/{n}-{k}", *flags, "-m", *plain[2:]]  # fmt: skip
                cmd = {
                    "plain": plain,
                    "py-spy": [str(py_spy), "record", "-r", "100", "-f", "raw", "-o",
                               f"{tmp}/py-spy-{k}.txt", "--", *plain],
                    "baseline": probe_run,
                }.get(way, probe_run)  # fmt: skip
                env = {**os.environ, "PYTHONPATH": args.baseline} if way == "baseline" else None
                load_args = [f"http://127.0.0.1:{port}{route}"]
                load_args += [] if mix is None else ["--mix", f"{tmp}/mix.toml"]
                run_dir = None if way in ("plain", "py-spy") else Path(f"{tmp}/{n}-{k}")
                run = served(cmd, port, load_args, args.clients, args.duration, env, run_dir)
                rates[way] = run.rate
                runs.setdefault(way, []).append(run)
            for way in rates:
                ratios.setdefault(way, []).append(rates[way] / rates["plain"])
            # in the order they ran: a way after probe's (or py-spy's) end may read lower
            print(f"round {k}: " + ", ".join(f"{w} {rates[w]:.0f}/s" for w in rates))
    for way in sorted(ratios):
        median = {
            k: statistics.median(getattr(r, k) for r in runs[way])
            for k in ("main_us", "app_us", "probe_us", "switches")
        }
        kept = ratios[way]
        print(
            f"{way}: server CPU a request {median['main_us']:.0f} us in its main thread, "
            f"{median['app_us']:.0f} in the app's others, {median['probe_us']:.0f} in "
            f"probe's; the app's voluntary switches {median['switches']:.1f} (medians)"
            + (
                ""
                if way == "plain"
                else f"; keeps {statistics.median(kept):.3f} of plain's requests a second "
                f"(rounds {min(kept):.3f}-{max(kept):.3f})"
            )
        )


if __name__ == "__main__":
    main()
