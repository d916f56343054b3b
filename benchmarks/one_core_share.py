"""What probe's helper processes take from a busy target on one core: a 3-s busy loop
taskset to one CPU, plain and under ``probe run``, in alternating rounds; each prints the
share of its wall time it was on the CPU (its own process's CPU clock), and this prints
the medians and their ratio. The same figure as
``tests/integration/test_run_cost.py``'s bar, re-runnable with more rounds.

    python benchmarks/one_core_share.py [--rounds 8]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tests.integration.test_run_cost import BUSY  # noqa: E402  the test's own loop

# the console script users run, as the tests do
_SCRIPT = Path(sys.executable).parent / "probe"
PROBE = [str(_SCRIPT)] if _SCRIPT.is_file() else [sys.executable, "-m", "probe.cli"]


def _share(cmd: list[str]) -> float:
    cpu = {min(os.sched_getaffinity(0))}
    out = subprocess.run(
        cmd, capture_output=True, text=True, check=True,
        preexec_fn=lambda: os.sched_setaffinity(0, cpu),
    ).stdout  # fmt: skip
    return float(out.split("share ")[1].split()[0])


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=8)
    args = p.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        script = Path(tmp) / "busy.py"
        script.write_text(textwrap.dedent(BUSY))
        plain, probed = [], []
        for k in range(args.rounds):
            plain.append(_share([sys.executable, str(script)]))
            run_dir = Path(tmp) / f"run{k}"
            probed.append(_share([*PROBE, "run", "-o", str(run_dir), str(script)]))
            print(f"round {k + 1}: plain {plain[-1]:.3f}, probe run {probed[-1]:.3f}", flush=True)
    a, b = statistics.median(plain), statistics.median(probed)
    print(f"share of one core kept: plain {a:.3f}, probe run {b:.3f} "
          f"({min(probed):.3f}-{max(probed):.3f}); ratio {b / a:.3f}")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
