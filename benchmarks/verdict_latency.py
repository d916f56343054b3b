"""How long `probe run` makes a user wait after the target ends, as the run grows.

Runs ``service_loop.py`` under ``probe run`` for each ``--seconds`` (every stage a
``probe.stage``: ~25,000 spans a second, the case where the end of the run grows with
it; ``--undecorated`` for the plain loop) and times, by the run directory's clock, from
the target's end (meta.json's ``end_unix_ns``) to the return of ``probe run``: the
journals compacted, the diagnosis, the verdict and report.html. With ``--baseline DIR``
another checkout's probe (put on PYTHONPATH, its C extensions built in place) runs in the
same rounds, alternately, and the ratio of the medians is printed: only figures taken
side by side mean anything on a shared host.

    python benchmarks/verdict_latency.py [--seconds 4 30] [--rounds 3] [--baseline DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

LOOP = Path(__file__).resolve().parent / "service_loop.py"


def after_target(out: Path, seconds: float, spans: bool, pythonpath: Path | None) -> float:
    """Seconds from the target's end to `probe run`'s return, for one run."""
    env = dict(
        os.environ,
        SERVICE_LOOP_SECONDS=str(seconds),
        SERVICE_LOOP_SPANS="1" if spans else "0",
        OPENBLAS_NUM_THREADS="1",
    )
    if pythonpath is not None:
        env["PYTHONPATH"] = str(pythonpath)
    # -P: the working directory not first on sys.path, where a checkout's own probe/
    # would shadow the --baseline put on PYTHONPATH (run from the repository root)
    cmd = [sys.executable, "-P", "-m", "probe.cli", "run", "--out", str(out), str(LOOP)]
    subprocess.run(cmd, env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    returned_ns = time.time_ns()
    meta = json.loads((out / "meta.json").read_text())
    return (returned_ns - int(meta["end_unix_ns"])) / 1e9


def main() -> None:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--seconds", type=float, nargs="+", default=[4.0, 30.0])
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--undecorated", action="store_true", help="the loop without spans")
    p.add_argument("--baseline", type=Path, metavar="DIR", help="another checkout, alternated")
    args = p.parse_args()
    ways: dict[str, Path | None] = {"probe": None}
    if args.baseline is not None:
        ways["baseline"] = args.baseline
    spans = not args.undecorated
    print(f"after the target, service loop {'decorated' if spans else 'undecorated'}")
    with tempfile.TemporaryDirectory() as tmp:
        runs = iter(range(10**6))
        for seconds in args.seconds:
            waits: dict[str, list[float]] = {way: [] for way in ways}
            for round_no in range(args.rounds):
                order = list(ways.items())
                for way, path in order if round_no % 2 == 0 else order[::-1]:
                    out = Path(tmp) / f"run{next(runs)}"
                    waits[way].append(after_target(out, seconds, spans, path))
            medians = {way: statistics.median(w) for way, w in waits.items()}
            line = ", ".join(
                f"{way} {m:.2f} s ({min(waits[way]):.2f}-{max(waits[way]):.2f})"
                for way, m in medians.items()
            )
            if "baseline" in medians and medians["baseline"] > 0:
                line += f"; probe / baseline {medians['probe'] / medians['baseline']:.2f}"
            print(f"{seconds:g}-s run: {line}", flush=True)


if __name__ == "__main__":
    main()
