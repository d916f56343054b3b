"""The load of ``probe run --load SPEC``, in a process of its own beside the profiled one
(a driver thread inside it would compete with the service for the GIL it measures).

    python -m probe.load.runner RUN_DIR SPEC PID [GRACE_S]

It waits for the service at the spec's URL to listen (giving up if process PID ends
first, or after ``wait`` seconds), drives it, writes ``RUN_DIR/load/figures.json`` and
``RUN_DIR/load/requests.parquet``, then stops the service as Ctrl-C would (SIGINT to PID).
When it cannot drive (a bad spec, a service that never listens), ``figures.json`` holds
the one-line error, the service is stopped all the same, and the exit status is 2.

A service that ignores SIGINT (its own choice, or inherited: ``probe run … &`` from a
script starts with it ignored) would keep ``probe run`` waiting for ever: it gets SIGTERM
instead, at once where the kernel says SIGINT is ignored, else once ``GRACE_S`` (``probe
run``'s ``--stop-grace``) has passed with this process not yet ended by ``probe run``,
which ends it as soon as the run is closed. ``figures.json``'s ``stopped_with`` says
which signal it took.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any

from probe.atomicfile import atomic_output
from probe.errors import ProbeError
from probe.pids import alive, ignores
from probe.rundir.reader import LOAD_REQUESTS

__all__ = ["FIGURES", "REQUESTS", "main"]

FIGURES = "load/figures.json"
REQUESTS = LOAD_REQUESTS  # the reader gives them to the analysis as Run.load_requests
# how long the service may take to listen: a model's loading comes first
WAIT_S = 120.0
# how long a service has to end on SIGINT before SIGTERM: probe run's --stop-grace default
GRACE_S = 5.0


def _write_json(path: Path, document: dict[str, Any]) -> None:
    path.parent.mkdir(exist_ok=True)
    with atomic_output(path) as f:
        f.write(json.dumps(document, indent=2).encode())


def drive_and_stop(
    run_dir: Path, spec: Path, pid: int, *, wait_s: float = WAIT_S, grace_s: float = GRACE_S
) -> int:
    from probe.load import LoadSettings, drive, figures
    from probe.load.mix import read_spec
    from probe.load.store import write_records
    from probe.load.target import parse_target, wait_until_listening

    try:
        mix, s = read_spec(spec)
        target = parse_target(str(s["url"]))
        rate = s.get("rate")
        settings = LoadSettings(
            concurrency=None if rate is not None else int(s.get("concurrency", 8)),
            rate=float(rate) if rate is not None else None,
            duration_s=float(s.get("duration", 10.0)),
            warmup_s=float(s.get("warmup", 0.0)),
            timeout_s=float(s.get("timeout", 10.0)),
            max_connections=int(s.get("max_connections", 256)),
            seed=int(s.get("seed", 0)),
        )
        wait = float(s.get("wait", wait_s))
        wait_until_listening(target, wait, alive=lambda: alive(pid))
        records = drive(target.host, target.port, mix, settings)
        write_records(records, run_dir / REQUESTS)
        result = figures(
            records, mode="closed" if rate is None else "open", duration_s=settings.duration_s
        )
        _write_json(run_dir / FIGURES, {"url": s["url"], **result.to_dict()})
        status = 0
    except ProbeError as e:
        _write_json(run_dir / FIGURES, {"error": str(e)})
        status = e.exit_code
    stop(pid, run_dir / FIGURES, grace_s)
    return status


def stop(pid: int, figures: Path, grace_s: float, sleep: Any = time.sleep) -> None:
    """SIGINT to the service, or SIGTERM where SIGINT is ignored or has not ended it
    within ``grace_s`` (``probe run`` ends this process once the run is closed: being
    here still, the target runs on). ``figures`` gets ``stopped_with`` first."""
    if not alive(pid):
        return
    if not ignores(pid, signal.SIGINT):
        os.kill(pid, signal.SIGINT)
        sleep(grace_s)
        if not alive(pid):
            return
    try:
        document = json.loads(figures.read_text())
    except (OSError, ValueError):
        document = {}
    _write_json(figures, {**document, "stopped_with": "SIGTERM"})
    os.kill(pid, signal.SIGTERM)


def main(argv: list[str]) -> int:
    run_dir, spec, pid = Path(argv[0]), Path(argv[1]), int(argv[2])
    grace_s = float(argv[3]) if len(argv) > 3 else GRACE_S
    return drive_and_stop(run_dir, spec, pid, grace_s=grace_s)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
