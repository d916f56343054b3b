"""Whole-process overhead of `probe run` on the reference workloads, as ratios.

Method (from ../shared/workloads/README.md): wall time of the whole process,
instrumented over plain, taken pair by pair (A B A B ...), one warm-up of each, median of
the per-pair ratios, all in one session -- the machine is shared and noisy, so only
ratios measured side by side mean anything.

    python benchmarks/overhead.py                      # W1 W2 W3, 5 pairs, default probe run
    python benchmarks/overhead.py --pairs 9 -w w1 -- --no-report

When py-spy is installed (`pip install '.[bench]'`), each round also runs the script
under `py-spy record -r 100` (the reference's external sampler at 100 Hz), so probe's
ratio has py-spy's beside it from the same rounds: A B C A B C ...
"""

from __future__ import annotations

import argparse
import os
import shutil
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


def measure(
    script: Path, pairs: int, probe_args: list[str], py_spy: str | None
) -> dict[str, dict[str, float]]:
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
        out = Path(tmp) / "py-spy.txt"
        others = {"probe": probed}
        if py_spy:
            spied = [py_spy, "record", "-r", "100", "-f", "raw", "-o", str(out), "--", *plain]
            others["py-spy"] = lambda: spied
        wall(plain, env)
        for cmd in others.values():
            wall(cmd(), env)  # warm-up
        a_times: list[float] = []
        times: dict[str, list[float]] = {name: [] for name in others}
        for _ in range(pairs):
            a_times.append(wall(plain, env))
            for name, cmd in others.items():
                times[name].append(wall(cmd(), env))
    results = {}
    for name, b_times in times.items():
        ratios = [b / a for a, b in zip(a_times, b_times, strict=True)]
        results[name] = {
            "ratio": statistics.median(ratios),
            "ratio_min": min(ratios),
            "ratio_max": max(ratios),
            "plain_s": statistics.median(a_times),
            "run_s": statistics.median(b_times),
        }
    return results


def main() -> None:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--pairs", type=int, default=5)
    p.add_argument("-w", "--workload", action="append", choices=["w1", "w2", "w3"])
    p.add_argument("--no-py-spy", action="store_true", help="skip the py-spy rounds")
    p.add_argument("probe_args", nargs="*", help="extra `probe run` options (after --)")
    args = p.parse_args()
    py_spy = None if args.no_py_spy else shutil.which("py-spy")
    if py_spy is None and not args.no_py_spy:
        print("py-spy not found (pip install '.[bench]'): probe's ratios only")
    names = {"w1": "w1_service.py", "w2": "w2_numpy.py", "w3": "w3_io.py"}
    chosen = args.workload or ["w1", "w2", "w3"]
    print(f"probe run {' '.join(args.probe_args)} vs plain python, {args.pairs} pairs each")
    for w in chosen:
        results = measure(WORKLOADS / names[w], args.pairs, args.probe_args, py_spy)
        for name, r in results.items():
            print(
                f"{w.upper()} {name:6}: {r['ratio']:.3f}x  (pairs {r['ratio_min']:.3f}-"
                f"{r['ratio_max']:.3f}; median plain {r['plain_s']:.2f} s, "
                f"{name} {r['run_s']:.2f} s)",
                flush=True,
            )


if __name__ == "__main__":
    main()
