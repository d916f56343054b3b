"""What `probe run`'s default collection costs a PyTorch CPU service loop (issue 15's bar:
<= 5%), and how much of it is the torch.profiler windows.

The loop is ``tests/torch_corpus/decoder.py`` without a KV cache (one request after
another on the main thread, ~85,000 torch ops a second here), run for ``--requests``
requests three ways in each round, in shuffled order: plain, ``probe run --no-report
--torch-windows 0`` (the stack sampler and the rest, no windows) and ``probe run
--no-report`` (the defaults: up to 3 windows, at most 5% of the time since the first
opened, the next one counted before it opens). The figure is the decoder's own
generation time (perf_counter around its requests, after a warm-up request: start-up and
the end of the run excluded), so the ratio is throughput kept. Also printed: the windows
each default run took and how long closing them stopped the target (meta.json's
``collector.torch``).

    python benchmarks/torch_service_cost.py [--rounds 5] [--requests 1000]

Needs torch (``pip install '.[torch]'``).
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DECODER = REPO / "tests" / "torch_corpus" / "decoder.py"
WAYS = ("plain", "no windows", "default")


def generation_s(cmd: list[str]) -> float:
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    line = next(x for x in out.splitlines() if x.startswith("{"))
    return float(json.loads(line)["seconds"])


def command(way: str, run_dir: Path, requests: int) -> list[str]:
    target = [str(DECODER), "--requests", str(requests)]
    if way == "plain":
        return [sys.executable, *target]
    windows = ["--torch-windows", "0"] if way == "no windows" else []
    probe = [sys.executable, "-m", "probe.cli", "run", "--no-report", "--out", str(run_dir)]
    return [*probe, *windows, *target]


def windows_taken(run_dir: Path) -> list[dict]:
    meta = json.loads((run_dir / "meta.json").read_text())
    return list(meta.get("collector", {}).get("torch", {}).get("windows", []))


def main() -> None:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--requests", type=int, default=1000)
    args = p.parse_args()
    kept: dict[str, list[float]] = {"no windows": [], "default": []}
    with tempfile.TemporaryDirectory() as tmp:
        for k in range(args.rounds):
            seconds: dict[str, float] = {}
            for way in random.sample(WAYS, len(WAYS)):
                run_dir = Path(tmp) / f"{k}-{way.replace(' ', '-')}"
                seconds[way] = generation_s(command(way, run_dir, args.requests))
            taken = windows_taken(Path(tmp) / f"{k}-default")
            stalls = ", ".join(f"{w.get('stall_s', float('nan')):.2f}" for w in taken)
            for way in kept:
                kept[way].append(seconds["plain"] / seconds[way])
            print(
                f"  plain {seconds['plain']:6.2f} s  no windows {seconds['no windows']:6.2f} s"
                f"  default {seconds['default']:6.2f} s  ({len(taken)} windows, closing "
                f"stopped the target {stalls} s)",
                flush=True,
            )
    print(f"throughput kept, median of {args.rounds} rounds of {args.requests} requests:")
    for way, ratios in kept.items():
        print(
            f"  probe run {way:10s} {statistics.median(ratios):.3f} "
            f"(range {min(ratios):.3f}-{max(ratios):.3f})"
        )


if __name__ == "__main__":
    main()
