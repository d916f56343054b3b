"""Whole-process overhead of `probe run` on the reference workloads, as ratios.

Method (from ../shared/workloads/README.md): wall time of the whole process,
instrumented over plain, taken pair by pair (A B A B ...), one warm-up of each, median of
the per-pair ratios, all in one session -- the machine is shared and noisy, so only
ratios measured side by side mean anything.

    python benchmarks/overhead.py                      # W1 W2 W3, 5 pairs, default probe run
    python benchmarks/overhead.py --pairs 9 -w w1 -- --no-report
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
WORKLOADS = HERE.parent.parent / "shared" / "workloads"


def wall(cmd: list[str], env: dict[str, str]) -> float:
    t0 = time.perf_counter()
    subprocess.run(cmd, env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - t0


def measure(script: Path, pairs: int, probe_args: list[str]) -> dict[str, float]:
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1")
    with tempfile.TemporaryDirectory() as tmp:
        n = 0

        def probed() -> list[str]:
            nonlocal n
            n += 1
            out = Path(tmp) / f"run{n}"
            return [
                sys.executable,
                "-m",
                "probe.cli",
                "run",
                "--out",
                str(out),
                *probe_args,
                str(script),
            ]

        plain = [sys.executable, str(script)]
        wall(plain, env)
        wall(probed(), env)  # warm-up
        ratios, a_times, b_times = [], [], []
        for _ in range(pairs):
            a = wall(plain, env)
            b = wall(probed(), env)
            a_times.append(a)
            b_times.append(b)
            ratios.append(b / a)
    return {
        "ratio": statistics.median(ratios),
        "ratio_min": min(ratios),
        "ratio_max": max(ratios),
        "plain_s": statistics.median(a_times),
        "probe_s": statistics.median(b_times),
    }


def main() -> None:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--pairs", type=int, default=5)
    p.add_argument("-w", "--workload", action="append", choices=["w1", "w2", "w3"])
    p.add_argument("probe_args", nargs="*", help="extra `probe run` options (after --)")
    args = p.parse_args()
    names = {"w1": "w1_service.py", "w2": "w2_numpy.py", "w3": "w3_io.py"}
    chosen = args.workload or ["w1", "w2", "w3"]
    print(f"probe run {' '.join(args.probe_args)} vs plain python, {args.pairs} pairs each")
    for w in chosen:
        r = measure(WORKLOADS / names[w], args.pairs, args.probe_args)
        print(
            f"{w.upper()}: {r['ratio']:.3f}x  (pairs {r['ratio_min']:.3f}-{r['ratio_max']:.3f};"
            f" median plain {r['plain_s']:.2f} s, probe {r['probe_s']:.2f} s)",
            flush=True,
        )


if __name__ == "__main__":
    main()
