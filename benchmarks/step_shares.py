"""How close the stack samples put short steps to where they run: stacks read at the tick
(``probe.samplers.peek``) against stacks read once the sampler has the GIL.

``tests/threads_corpus/services/feature_digest.py`` runs three steps a record, each far
shorter than the switch interval: pure Python (tokenize), hashlib with the GIL released
(fingerprint), json.dumps keeping it (encode). Each round, in one session: the service
timing its own steps (``--timed``: the truth), under ``probe run --no-report`` with the
tick's reads at the 0.1-ms switch interval and at the target's own (``--switch-interval
0``), with ``PROBE_GIL_STACKS=1`` at 0.1 ms, and under ``py-spy record`` (stops the
process for each sample) when it is installed. Prints each step's share of the three and
each arm's largest error against the timers.

    python benchmarks/step_shares.py [--rounds 3] [--seconds 6]
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from probe.analyzers.diagnosis import diagnose
from probe.rundir import load

SERVICE = Path(__file__).resolve().parents[1] / "tests/threads_corpus/services/feature_digest.py"
STEPS = ("tokenize", "fingerprint", "encode")


def normalised(shares: dict[str, float]) -> dict[str, float]:
    total = sum(shares.get(s, 0.0) for s in STEPS)
    return {s: shares.get(s, 0.0) / total if total else 0.0 for s in STEPS}


def timed(seconds: float) -> dict[str, float]:
    out = subprocess.run(
        [sys.executable, str(SERVICE), "--timed", "--seconds", str(seconds)],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    return normalised(json.loads(out.stdout)["spent_s"])


def under_probe(seconds: float, run_dir: Path, gil: bool, interval_s: float) -> dict[str, float]:
    env = {**os.environ, "PROBE_GIL_STACKS": "1" if gil else "0"}
    subprocess.run(
        [sys.executable, "-m", "probe.cli", "run", "--no-report", "--out", str(run_dir),
         "--switch-interval", str(interval_s), str(SERVICE), "--seconds", str(seconds)],
        env=env, capture_output=True, check=True,
    )  # fmt: skip
    d = diagnose(load(run_dir))
    stages = d.breakdown.stages["path_share"]
    return normalised({str(name).split(" (")[0]: float(v) for name, v in stages.items()})


def under_py_spy(seconds: float, out: Path) -> dict[str, float] | None:
    if shutil.which("py-spy") is None:
        return None
    subprocess.run(
        ["py-spy", "record", "-r", "100", "-f", "raw", "-o", str(out), "--",
         sys.executable, str(SERVICE), "--seconds", str(seconds)],
        capture_output=True, check=True,
    )  # fmt: skip
    counts: collections.Counter[str] = collections.Counter()
    for line in out.read_text().splitlines():
        stack, _, n = line.rpartition(" ")
        names = {frame.split(" (")[0] for frame in stack.split(";")}
        for step in STEPS:
            if step in names:
                counts[step] += int(n)
    return normalised(dict(counts))


def main() -> None:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--seconds", type=float, default=6.0)
    args = p.parse_args()
    print("round  arm          " + "  ".join(f"{s:>11}" for s in STEPS) + "   worst error")
    with tempfile.TemporaryDirectory() as tmp:
        for k in range(args.rounds):
            truth = timed(args.seconds)
            arms = {
                "timers": truth,
                "tick 0.1ms": under_probe(args.seconds, Path(tmp) / f"t{k}", False, 0.0001),
                "tick own": under_probe(args.seconds, Path(tmp) / f"o{k}", False, 0),
                "GIL 0.1ms": under_probe(args.seconds, Path(tmp) / f"g{k}", True, 0.0001),
                "py-spy": under_py_spy(args.seconds, Path(tmp) / f"spy{k}.txt"),
            }
            for arm, shares in arms.items():
                if shares is None:
                    continue
                worst = max(abs(shares[s] - truth[s]) for s in STEPS)
                cells = "  ".join(f"{shares[s]:>11.3f}" for s in STEPS)
                print(f"{k + 1:>5}  {arm:<11}  {cells}   {worst:.3f}", flush=True)


if __name__ == "__main__":
    main()
