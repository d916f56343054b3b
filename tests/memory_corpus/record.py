"""Record the memory corpus: real processes' memory, and what each one truly does.

    python tests/memory_corpus/record.py [NAME ...] [--takes 2] [--verify]
    python tests/memory_corpus/record.py NAME --add RUN_DIR --note "how it was recorded"

Each service in ``SERVICES`` runs under ``probe run`` (each app in ``SERVED`` under
``probe run --load -m uvicorn``): the sidecar reads its RSS from outside at 10 Hz, the
heap sampler reads its allocated blocks and gc type counts from inside, and its run
directory is boiled down to ``series/<name>-<take>.json``: the RSS and USS series, the
request end times (from its spans or the middleware's, when it has any), the allocated
blocks, the gc counts of its most numerous types, and its CPU time -- all in seconds from
the run's start. The leak detectors are held to these series
(``tests/unit/test_memory_corpus.py``).

The truth does not come from probe: each service leaks or not by construction (its
docstring says how), and ``--verify`` checks it from outside, with no probe at all: the
service runs for four times its length while this script reads its RSS from /proc; a
leak keeps climbing at its rate to the end, a healthy service's last quarter stays at
the level of its second. The figures are written into each series (``verification``).

Record on a quiet machine: the services are real, so is their timing.
"""

from __future__ import annotations

import argparse
import json
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
SAMPLES = REPO / "sample_services"
SERVICES_DIR = HERE / "services"

# name -> (script, args, (the argument that scales its length, its value), truth)
SERVICES: dict[str, tuple[Path, list[str], tuple[str, float], str]] = {
    "id_keyed_cache": (SERVICES_DIR / "id_keyed_cache.py", [], ("--requests", 4000), "leak"),
    "staircase": (SERVICES_DIR / "staircase.py", [], ("--requests", 1000), "leak"),
    "log_list": (SERVICES_DIR / "log_list.py", [], ("--seconds", 12), "leak"),
    "leaky_cache": (SAMPLES / "leaky_cache.py", [], ("--requests", 1200), "leak"),
    "leaky_cache_long": (SAMPLES / "leaky_cache.py", [], ("--requests", 3000), "leak"),
    "lru_fills": (SERVICES_DIR / "lru_fills.py", [], ("--requests", 14000), "no_leak"),
    "numpy_cycles": (SERVICES_DIR / "numpy_cycles.py", [], ("--seconds", 12), "no_leak"),
    "lazy_model": (SERVICES_DIR / "lazy_model.py", [], ("--requests", 1000), "no_leak"),
    "zipf_memo": (SERVICES_DIR / "zipf_memo.py", [], ("--requests", 20000), "no_leak"),
    "thread_pool_arenas": (
        SERVICES_DIR / "thread_pool_arenas.py", [], ("--requests", 3000), "no_leak",
    ),
    "torch_warmup": (SERVICES_DIR / "torch_warmup.py", [], ("--seconds", 12), "no_leak"),
    "fastapi_app": (SERVICES_DIR / "fastapi_app.py", [], ("--seconds", 16), "no_leak"),
    "cycle_garbage": (SERVICES_DIR / "cycle_garbage.py", [], ("--seconds", 10), "no_leak"),
    "native_leak": (SERVICES_DIR / "native_leak.py", [], ("--requests", 900), "leak"),
    "growing_buffer": (SERVICES_DIR / "growing_buffer.py", [], ("--requests", 900), "leak"),
    "batch_flush": (SERVICES_DIR / "batch_flush.py", [], ("--requests", 900), "no_leak"),
    "thread_leak": (SERVICES_DIR / "thread_leak.py", [], ("--requests", 700), "leak"),
    "task_leak": (SERVICES_DIR / "task_leak.py", [], ("--requests", 700), "leak"),
    # jobs in bursts with idle gaps: a staircase in time, a line per job; undecorated too
    "bursty_ledger": (SERVICES_DIR / "bursty_ledger.py", [], ("--seconds", 12), "leak"),
    "bursty_ledger_plain": (
        SERVICES_DIR / "bursty_ledger.py", ["--no-spans"], ("--seconds", 12), "leak",
    ),
    "healthy_service": (SAMPLES / "healthy_service.py", [], ("--requests", 2500), "no_leak"),
    # at its own default length: the runs where both verdicts once said LEAK (``--add``)
    "healthy_service_default": (
        SAMPLES / "healthy_service.py", [], ("--requests", 6000), "no_leak",
    ),
    # long enough to outlast its heap's settling (floor 72 -> 79 MB over 10-20 s on a slow
    # host, under a 40-MB saw-tooth): judged live from its 2nd second, as probe watch
    # with a short warm-up did when it read that settling as a leak (2026-11-28)
    "healthy_service_settling": (
        SAMPLES / "healthy_service.py", [], ("--requests", 15000), "no_leak",
    ),
    "tagging": (SAMPLES / "tagging_cpu_bound.py", [], ("--requests", 600), "no_leak"),
    "image_io": (SAMPLES / "image_io_bound.py", [], ("--requests", 150), "no_leak"),
    "translation": (SAMPLES / "translation_model_bound.py", [], ("--requests", 60), "no_leak"),
    "multimodal": (SAMPLES / "multimodal_pipeline.py", [], ("--requests", 120), "no_leak"),
}  # fmt: skip

# Served apps: run as ``python -m uvicorn APP`` (``--app-dir`` the services' folder) and
# driven by ``probe load`` with LOAD_CLIENTS keep-alive clients posting LOGIN_MIX;
# name -> (the app, the seconds a take serves, truth). Their requests are known only from
# probe's own middleware (the apps are undecorated).
SERVED: dict[str, tuple[str, float, str]] = {
    "session_api": ("session_api:app", 10.0, "leak"),
    "session_api_ttl": ("session_api:app_ttl", 10.0, "no_leak"),
}
LOAD_CLIENTS = 4
LOGIN_MIX = '[[request]]\nmethod = "POST"\npath = "/login"\njson = { user = "ada" }\n'

_NEEDS = {
    "torch_warmup": "torch",
    "fastapi_app": "uvicorn",
    "session_api": "uvicorn",
    "session_api_ttl": "uvicorn",
}


def _available(name: str) -> bool:
    module = _NEEDS.get(name)
    if module is None:
        return True
    import importlib.util

    return importlib.util.find_spec(module) is not None


def _rel(ts_ns: Any, t0: int) -> list[float]:
    return [round((int(t) - t0) / 1e9, 4) for t in ts_ns]


def boil_down(run_dir: Path) -> dict[str, Any]:
    """A run directory -> the series the detectors read (seconds from the run's start)."""
    import pandas as pd

    from probe.rundir import load

    run = load(run_dir)
    t0 = int(run.meta["clock"]["perf_ns"])
    res = run.tables["resources"]
    root = res[res["is_root"]].sort_values("ts_ns")
    uss = root[root["uss_bytes"].notna()]
    spans = run.tables["spans"]
    requests = spans[spans["category"] == "request"].sort_values("end_ns")
    heap = run.tables["heap"].sort_values("ts_ns")
    gc_types = run.tables["gc_types"]
    snapshots = sorted(gc_types["snapshot"].unique())
    top = gc_types.groupby("type")["count"].max().nlargest(30).index
    counts = gc_types.pivot_table(index="snapshot", columns="type", values="count", aggfunc="sum")
    counts = counts.reindex(index=snapshots, columns=top).fillna(0).astype(int)
    ts = gc_types.groupby("snapshot")["ts_ns"].max().reindex(snapshots)
    return {
        "duration_s": run.meta.get("duration_s"),
        "memory_limit_bytes": (run.meta.get("host") or {}).get("memory_limit_bytes"),
        "rss": {"t_s": _rel(root["ts_ns"], t0), "bytes": [int(v) for v in root["rss_bytes"]]},
        "uss": {"t_s": _rel(uss["ts_ns"], t0), "bytes": [int(v) for v in uss["uss_bytes"]]},
        "cpu": {
            "t_s": _rel(root["ts_ns"], t0),
            "seconds": [
                round(float(u + s), 4)
                for u, s in zip(root["cpu_user_s"], root["cpu_system_s"], strict=True)
            ],
        },  # fmt: skip
        "requests": _rel(requests["end_ns"], t0) if len(requests) else None,
        "heap": {
            "t_s": _rel(heap["ts_ns"], t0),
            "allocated_blocks": [int(v) for v in heap["allocated_blocks"]],
            # the bytes malloc held (None where unread): the second witness of what lives
            "malloc_in_use_bytes": [
                None if pd.isna(v) else int(v) for v in heap["malloc_in_use_bytes"]
            ],
        },
        # what the session's full collection at the end freed, its time from the start
        "full_collection": _full_collection(run.meta, t0),
        "gc_types": {
            "t_s": _rel(ts, t0),
            "counts": {str(k): [int(v) for v in counts[k]] for k in counts.columns},
        },
        # what may pile up beside a leak: the process's threads and open descriptors (the
        # sidecar's readings), its event loops' pending tasks (the task sampler's)
        "piles": _piles(run, root, t0),
    }


def _piles(run: Any, root: Any, t0: int) -> dict[str, Any]:
    piles = {
        what: {"t_s": _rel(root["ts_ns"], t0), "count": [int(v) for v in root[column]]}
        for column, what in (("num_threads", "threads"), ("num_fds", "file descriptors"))
        if column in root and root[column].notna().all()
    }
    tasks = run.tables.get("task_samples")
    if tasks is not None and len(tasks):
        pending = tasks.groupby("ts_ns")["tasks"].sum()
        piles["asyncio tasks"] = {
            "t_s": _rel(pending.index, t0),
            "count": [int(v) for v in pending],
        }
    return piles


def _full_collection(meta: dict[str, Any], t0: int) -> dict[str, Any] | None:
    full = (meta.get("collector") or {}).get("full_collection_at_end")
    if not full or full.get("at_ns") is None:
        return full
    return {**full, "at_s": round((int(full["at_ns"]) - t0) / 1e9, 4)}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _uvicorn(app: str, port: int) -> list[str]:
    return ["-m", "uvicorn", app, "--app-dir", str(SERVICES_DIR), "--port", str(port),
            "--log-level", "critical"]  # fmt: skip


def _how(name: str, longer: float) -> tuple[str, list[str], list[str], str]:
    """What a take runs: (the service as the series names it, its arguments, what
    ``probe run`` is given after its own options, truth)."""
    if name in SERVED:
        app, seconds, truth = SERVED[name]
        port = _free_port()
        spec = Path(tempfile.mkdtemp()) / "load.toml"
        spec.write_text(
            f'url = "http://127.0.0.1:{port}"\nconcurrency = {LOAD_CLIENTS}\n'
            f"duration = {seconds * longer:g}\nwarmup = 0\n{LOGIN_MIX}"
        )
        args = [app, f"--load: {LOAD_CLIENTS} clients, {seconds * longer:g} s"]
        return "python -m uvicorn", args, ["--load", str(spec), *_uvicorn(app, port)], truth
    script, args, (scale_arg, base), truth = SERVICES[name]
    scale = type(base)(base * longer)
    argv = [*args, scale_arg, str(scale)]
    return str(script.relative_to(REPO)), argv, [str(script), *argv], truth


def record(name: str, take: int, longer: float = 1.0) -> Path:
    """One take; ``longer`` times the service's length (files named ``<name>-x3-1.json``:
    series long enough for the live detector's windows at 10 readings a second)."""
    service, args, target, truth = _how(name, longer)
    with tempfile.TemporaryDirectory() as tmp:
        run_dir = Path(tmp) / "run"
        cmd = [sys.executable, "-m", "probe.cli", "run", "--no-report", "--out", str(run_dir),
               *target]  # fmt: skip
        subprocess.run(cmd, check=True, capture_output=True, timeout=600)
        series = boil_down(run_dir)
    stem = name if longer == 1 else f"{name}-x{longer:g}"
    path = HERE / "series" / f"{stem}-{take}.json"
    # the service's truth was verified on its own length (4x as long as a take)
    first = HERE / "series" / f"{name}-1.json"
    old = json.loads(first.read_text()) if first.exists() else {}
    document = {
        "name": name,
        "service": service,
        "args": args,
        "truth": truth,
        "recorded": time.strftime("%Y-%m-%d"),
        "verification": old.get("verification"),
        **series,
    }
    path.parent.mkdir(exist_ok=True)
    path.write_text(json.dumps(document, separators=(",", ":")) + "\n")
    return path


def add(name: str, run_dir: Path, note: str) -> Path:
    """A run recorded elsewhere (one where a verdict went wrong) joins the corpus as the
    service's next take, with the service's verified truth and how it was recorded."""
    service, args, _, truth = _how(name, 1.0)
    takes = sorted((HERE / "series").glob(f"{name}-[0-9]*.json"))
    path = HERE / "series" / f"{name}-{len(takes) + 1}.json"
    document = {
        "name": name,
        "service": service,
        "args": args,
        "truth": truth,
        "recorded": f"{time.strftime('%Y-%m-%d')}: {note}",
        "verification": verify(name),
        **boil_down(run_dir),
    }
    path.write_text(json.dumps(document, separators=(",", ":")) + "\n")
    return path


# How many times a take's length the truth is verified over, where 4x is too short to see
# the service settle: cycle_garbage's full collections come 14.9 s, then every 18.6 s,
# after its start (gc.callbacks, 150-s run): the garbage between two passes peaks from the
# second pass on (~33 s), RSS holds at 84-91 MiB from ~37 s to 150 s; 4x (40 s) ends on
# that climb.
VERIFY_TIMES = {"cycle_garbage": 15}


def verify(name: str) -> dict[str, Any]:
    """Run the service 4x as long without probe (``VERIFY_TIMES`` where that is too
    short), reading its RSS from /proc at 10 Hz."""
    if name in SERVED:
        return _verify_served(name)
    script, args, (scale_arg, scale), truth = SERVICES[name]
    times = VERIFY_TIMES.get(name, 4)
    proc = subprocess.Popen(
        [sys.executable, str(script), *args, scale_arg, str(scale * times)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    readings = _rss_until_exit(proc)
    how = (
        f"the service run {times}x as long without probe, RSS read from /proc at 10 Hz; "
        "floors (minimum RSS) of each quarter of that run but its last second (the "
        "interpreter's teardown), and the climbs from the second quarter on (the first "
        "holds the start-up)"
    )
    return _judged(readings, truth, how)


def _verify_served(name: str) -> dict[str, Any]:
    """Serve the app plain (uvicorn, no probe) under ``probe load`` for 4x a take's
    length, reading the server's RSS from /proc at 10 Hz; the load and the server are
    both ended before this returns."""
    app, seconds, truth = SERVED[name]
    times = VERIFY_TIMES.get(name, 4)
    port = _free_port()
    server = subprocess.Popen(
        [sys.executable, *_uvicorn(app, port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    mix = Path(tempfile.mkdtemp()) / "mix.toml"
    mix.write_text(LOGIN_MIX)
    load = subprocess.Popen(
        [sys.executable, "-m", "probe.cli", "load", f"http://127.0.0.1:{port}", "--mix",
         str(mix), "-c", str(LOAD_CLIENTS), "-d", f"{seconds * times:g}"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        readings = _rss_until_exit(load, of=server)
    finally:
        for proc in (load, server):
            proc.terminate()
            proc.wait(timeout=30)
    how = (
        f"uvicorn serving the app without probe, driven by probe load ({LOAD_CLIENTS} "
        f"clients, {seconds * times:g} s, {times}x a take) while its RSS was read from /proc "
        "at 10 Hz; floors (minimum RSS) of each quarter of that run but its last second, "
        "and the climbs from the second quarter on (the first holds the start-up)"
    )
    return _judged(readings, truth, how)


def _rss_until_exit(proc: subprocess.Popen[bytes], of: subprocess.Popen[bytes] | None = None):
    """(seconds, RSS bytes) of ``of`` (``proc`` itself by default) every 0.1 s until
    ``proc`` exits."""
    page = 4096
    pid = (of or proc).pid
    readings: list[tuple[float, int]] = []
    start = time.monotonic()
    while proc.poll() is None:
        try:
            rss = int(Path(f"/proc/{pid}/statm").read_text().split()[1]) * page
        except (OSError, IndexError, ValueError):
            break
        readings.append((time.monotonic() - start, rss))
        time.sleep(0.1)
    proc.wait()
    return [r for r in readings if r[1] > 0]


# The interpreter's teardown frees the module's globals before the process exits: not the
# service's behaviour. A reading taken during it read a leak's last quarter below its third
# (bursty_ledger.py over 48 s: 26 MB against 57 MB at the third quarter's floor,
# 2026-12-01; its next run's last reading, before the teardown, was 86 MB). A teardown of
# tens of MB of small objects takes a few tenths of a second here.
TEARDOWN_S = 1.0


def _judged(readings: list[tuple[float, int]], truth: str, how: str) -> dict[str, Any]:
    readings = [r for r in readings if r[0] <= readings[-1][0] - TEARDOWN_S] or readings
    end = readings[-1][0]

    def level(lo: float, hi: float) -> int:
        inside = [b for t, b in readings if lo * end <= t <= hi * end]
        return min(inside) if inside else 0  # the floor of that stretch

    quarters = [level(q / 4, (q + 1) / 4) for q in range(4)]
    # the first quarter holds the start-up (the interpreter's first readings): from the
    # second on, a leak climbs every quarter at its pace, a healthy service holds
    climbs = [b - a for a, b in zip(quarters[1:], quarters[2:], strict=False)]
    return {
        "how": how,
        "seconds": round(end, 1),
        "quarter_floors_bytes": quarters,
        "climbs_bytes": climbs,
        "truth_holds": bool(
            (truth == "leak" and min(climbs) > 0 and climbs[-1] >= 0.5 * climbs[0])
            or (truth == "no_leak" and climbs[-1] <= max(2**20, 0.02 * quarters[-1]))
        ),
    }


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("names", nargs="*", help="services to record (default: all)")
    p.add_argument("--takes", type=int, default=2, help="recordings per service")
    p.add_argument("--verify", action="store_true", help="check each service's truth first")
    p.add_argument("--longer", type=float, default=1.0, help="record N times the length")
    p.add_argument("--add", type=Path, metavar="RUN_DIR", help="add a run recorded elsewhere")
    p.add_argument("--note", default="", help="with --add: how that run was recorded")
    args = p.parse_args()
    if args.add is not None:
        (name,) = args.names
        print(add(name, args.add, args.note).relative_to(REPO))
        return 0
    names = args.names or [*SERVICES, *SERVED]
    for name in names:
        if not _available(name):
            print(f"{name}: skipped ({_NEEDS[name]} is not installed)")
            continue
        checked = verify(name) if args.verify else None
        if checked is not None:
            floors = [round(b / 2**20, 1) for b in checked["quarter_floors_bytes"]]
            truth = SERVED[name][2] if name in SERVED else SERVICES[name][3]
            print(f"{name}: truth {truth}, verified: {checked['truth_holds']} "
                  f"(quarter floors {floors} MiB)")  # fmt: skip
        for take in range(1, args.takes + 1):
            path = record(name, take, args.longer)
            if checked is not None:
                document = json.loads(path.read_text())
                document["verification"] = checked
                path.write_text(json.dumps(document, separators=(",", ":")) + "\n")
            print(f"  {path.relative_to(REPO)}")
    shutil.rmtree(HERE / "__pycache__", ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
