"""Throughput kept by a service loop under `probe run` at default settings, as a ratio.

Runs ``service_loop.py`` plain and under ``probe run`` in alternating pairs (one warm-up
each), and prints the median of the per-pair ratios of the loop's own requests/s. The
target: >= 0.97 (DESIGN: a plain in-process 100 Hz sampler costs ~4%; py-spy 7-9%).

    python benchmarks/throughput.py [--pairs 7] [--spans] [-- extra probe run options]

Without ``--spans`` the loop is an unchanged service (what ``probe run`` sees by
default); with it every stage is a ``probe.stage`` (5 spans per ~200 us request).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

LOOP = Path(__file__).resolve().parent / "service_loop.py"


SPANS = "0"


def throughput(cmd: list[str]) -> float:
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1", SERVICE_LOOP_SPANS=SPANS)
    out = subprocess.run(cmd, check=True, capture_output=True, text=True, env=env).stdout
    line = next(x for x in out.splitlines() if x.startswith("{"))
    return float(json.loads(line)["throughput"])


def main() -> None:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--pairs", type=int, default=7)
    p.add_argument("--spans", action="store_true", help="decorate every stage")
    p.add_argument("probe_args", nargs="*")
    args = p.parse_args()
    global SPANS
    SPANS = "1" if args.spans else "0"
    with tempfile.TemporaryDirectory() as tmp:
        runs = iter(range(10**6))

        def probed() -> list[str]:
            return [
                sys.executable,
                "-m",
                "probe.cli",
                "run",
                "--no-report",
                "--out",
                str(Path(tmp) / f"r{next(runs)}"),
                *args.probe_args,
                str(LOOP),
            ]

        plain = [sys.executable, str(LOOP)]
        throughput(plain)
        throughput(probed())
        ratios = []
        for _ in range(args.pairs):
            a = throughput(plain)
            b = throughput(probed())
            ratios.append(b / a)
            print(
                f"  plain {a:8.0f} req/s   probe run {b:8.0f} req/s   ratio {b / a:.3f}", flush=True
            )
    what = "decorated (5 spans/request)" if args.spans else "unchanged"
    print(
        f"{what} service, throughput kept under probe run {' '.join(args.probe_args)}: "
        f"{statistics.median(ratios):.3f} (median of {len(ratios)} pairs, "
        f"range {min(ratios):.3f}-{max(ratios):.3f})"
    )


if __name__ == "__main__":
    main()
