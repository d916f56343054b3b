"""Issue 15's KV-cache bar, measured: ``probe run``'s kv_cache estimate on the decoder
without a cache beside the speedup the cache realises (plain wall clocks of the whole
process, before/after pairs), over several rounds in one sitting.

    python benchmarks/kv_cache_estimate.py [--rounds 5] [--requests 300] [-- PROBE_RUN_FLAGS]

Prints each round's estimate (or "none" when the verdict did not recommend kv_cache),
each pair's realised speedup, and how many estimates land within 25% of the median
realised one. Needs torch (``pip install '.[torch]'``).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

DECODER = Path(__file__).resolve().parents[1] / "tests" / "torch_corpus" / "decoder.py"


def wall_s(*args: str) -> float:
    started = time.perf_counter()
    subprocess.run([sys.executable, str(DECODER), *args], check=True, capture_output=True)
    return time.perf_counter() - started


def estimate(requests: int, flags: list[str]) -> float | None:
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "run"
        probe = [sys.executable, "-m", "probe.cli", "run", "--out", str(out), *flags]
        cmd = [*probe, str(DECODER)]
        subprocess.run([*cmd, "--requests", str(requests)], check=True, capture_output=True)
        d = json.loads((out / "diagnosis.json").read_text())
    kv = next((r for r in d["recommendations"] if r["id"] == "kv_cache"), None)
    return None if kv is None else float(kv["estimated_speedup"])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--requests", type=int, default=300)
    parser.add_argument("flags", nargs="*", help="more `probe run` flags, after --")
    args = parser.parse_args()
    n = str(args.requests)
    estimates, realised = [], []
    for i in range(args.rounds):
        estimates.append(estimate(args.requests, args.flags))
        realised.append(wall_s("--requests", n) / wall_s("--requests", n, "--kv-cache"))
        shown = "none" if estimates[-1] is None else f"{estimates[-1]:.2f}x"
        print(f"round {i + 1}: estimate {shown}, realised {realised[-1]:.2f}x", flush=True)
    truth = statistics.median(realised)
    within = sum(1 for e in estimates if e is not None and abs(e / truth - 1) <= 0.25)
    print(f"realised median {truth:.2f}x; estimates within 25%: {within}/{args.rounds}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
