"""Why the process tree is sampled from a sidecar: its cost when sampled in-process.

Runs ``service_loop.py`` (an unchanged service) through ``probe.launcher.run`` with the
stack sampler at default settings, with and without the resource/GPU sampler inside the
target at 10 Hz (``sample_tree``), in alternating pairs, and prints the median ratio of
the loop's own requests/s. psutil's ``/proc`` reads release and retake the GIL around
every read, which hands the GIL back and forth with a pure-Python service.

    python benchmarks/tree_sampling_cost.py [--pairs 7]
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
RUNNER = """
import sys
from pathlib import Path
from probe.launcher import resolve_target, run
from probe.rundir.writer import prepare_run_dir
from probe.session import Settings
out, tree = Path(sys.argv[1]), sys.argv[2] == "1"
run(resolve_target(sys.argv[3], None, ()), prepare_run_dir(out), Settings(), sample_tree=tree)
"""


def throughput(out: Path, tree: bool) -> float:
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1", SERVICE_LOOP_SPANS="0")
    res = subprocess.run(
        [sys.executable, "-c", RUNNER, str(out), "1" if tree else "0", str(LOOP)],
        check=True,
        capture_output=True,
        text=True,
        env=env,
    )
    return float(json.loads(res.stdout.splitlines()[0])["throughput"])


def main() -> None:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--pairs", type=int, default=7)
    args = p.parse_args()
    ratios = []
    with tempfile.TemporaryDirectory() as tmp:
        for k in range(args.pairs + 1):
            without = throughput(Path(tmp) / f"a{k}", tree=False)
            with_tree = throughput(Path(tmp) / f"b{k}", tree=True)
            if k:  # the first pair warms up
                ratios.append(with_tree / without)
                print(
                    f"  without {without:8.0f} req/s   in-process tree {with_tree:8.0f} req/s"
                    f"   ratio {with_tree / without:.3f}",
                    flush=True,
                )
    print(
        f"throughput kept with the tree sampled in-process at 10 Hz: "
        f"{statistics.median(ratios):.3f} (median of {len(ratios)} pairs)"
    )


if __name__ == "__main__":
    main()
