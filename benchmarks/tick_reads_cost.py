"""What reading the stacks at the tick (``probe.samplers.peek``) costs a run, against the
stacks read with the GIL (``PROBE_GIL_STACKS=1``).

``probe run --no-report`` of W1 (one BLAS thread, as ``../shared/workloads/README.md``
says) and W2 (BLAS on both cores), the two arms alternated pair by pair; prints each
workload's job walls (``meta.json``'s ``duration_s``) and the median of the per-pair
ratios, tick reads over GIL reads. Both arms at the 0.1-ms switch interval, named, so
that the reads alone differ whatever ``probe run``'s default (what the interval costs
beside them: ``benchmarks/switch_interval_cost.py``).

    python benchmarks/tick_reads_cost.py [--pairs 6]
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

WORKLOADS = Path(__file__).resolve().parents[2] / "shared" / "workloads"
CASES = {"W1": ("w1_service.py", {"OPENBLAS_NUM_THREADS": "1"}), "W2": ("w2_numpy.py", {})}


def job_wall(script: Path, env: dict[str, str], out: Path) -> float:
    subprocess.run(
        [sys.executable, "-m", "probe.cli", "run", "--no-report", "--switch-interval", "0.0001",
         "-o", str(out), str(script)],
        env={**os.environ, **env}, capture_output=True, check=True,
    )  # fmt: skip
    return float(json.loads((out / "meta.json").read_text())["duration_s"])


def main() -> None:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--pairs", type=int, default=6)
    args = p.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        for name, (script, extra) in CASES.items():
            walls: dict[str, list[float]] = {"0": [], "1": []}
            for k in range(args.pairs):
                for gil in ("0", "1") if k % 2 == 0 else ("1", "0"):
                    out = Path(tmp) / f"{name}-{k}-{gil}"
                    env = {**extra, "PROBE_GIL_STACKS": gil}
                    walls[gil].append(job_wall(WORKLOADS / script, env, out))
            ratios = [a / b for a, b in zip(walls["0"], walls["1"], strict=True)]
            print(f"{name} tick reads {[round(w, 2) for w in walls['0']]}")
            print(f"{name} GIL reads  {[round(w, 2) for w in walls['1']]}")
            print(
                f"{name} tick / GIL: median {statistics.median(ratios):.3f} "
                f"(pairs {min(ratios):.3f}-{max(ratios):.3f})",
                flush=True,
            )


if __name__ == "__main__":
    main()
