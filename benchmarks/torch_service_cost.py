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

    python benchmarks/torch_service_cost.py [--rounds 5] [--requests 1000] [--window S ...]
                                            [--binding]

``--window S`` adds an arm with the defaults but ``--torch-window S`` (repeatable), in the
same shuffled rounds, to weigh a window's length against its cost. ``--binding`` adds the
defaults with each window closed through torch's Python binding, which holds the GIL
(``PROBE_TORCH_CLOSE_WITH_GIL=1``; probe's default closes it without, where
``probe._torchclose`` is built).

Needs torch (``pip install '.[torch]'``).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DECODER = REPO / "tests" / "torch_corpus" / "decoder.py"
WAYS = ("plain", "no windows", "default")
WINDOW_ARM = "window "
BINDING_ARM = "binding"


def generation_s(cmd: list[str], env: dict[str, str] | None = None) -> float:
    out = subprocess.run(cmd, check=True, capture_output=True, text=True, env=env).stdout
    line = next(x for x in out.splitlines() if x.startswith("{"))
    return float(json.loads(line)["seconds"])


def command(way: str, run_dir: Path, requests: int) -> list[str]:
    target = [str(DECODER), "--requests", str(requests)]
    if way == "plain":
        return [sys.executable, *target]
    windows = ["--torch-windows", "0"] if way == "no windows" else []
    if way.startswith(WINDOW_ARM):
        windows = ["--torch-window", way.removeprefix(WINDOW_ARM)]
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
    p.add_argument("--window", type=float, action="append", default=[], metavar="S")
    p.add_argument("--binding", action="store_true")
    args = p.parse_args()
    ways = [*WAYS, *(f"{WINDOW_ARM}{s:g}" for s in args.window)]
    ways += [BINDING_ARM] if args.binding else []
    binding_env = {**os.environ, "PROBE_TORCH_CLOSE_WITH_GIL": "1"}
    kept: dict[str, list[float]] = {way: [] for way in ways if way != "plain"}
    with tempfile.TemporaryDirectory() as tmp:
        for k in range(args.rounds):
            seconds: dict[str, float] = {}
            for way in random.sample(ways, len(ways)):
                run_dir = Path(tmp) / f"{k}-{way.replace(' ', '-')}"
                env = binding_env if way == BINDING_ARM else None
                seconds[way] = generation_s(command(way, run_dir, args.requests), env)
            line = [f"plain {seconds['plain']:6.2f} s"]
            for way in kept:
                kept[way].append(seconds["plain"] / seconds[way])
                taken = windows_taken(Path(tmp) / f"{k}-{way.replace(' ', '-')}")
                stalls = "/".join(f"{w.get('stall_s', float('nan')):.2f}" for w in taken)
                closes = "/".join(f"{w.get('close_s', float('nan')):.2f}" for w in taken)
                closing = (
                    f" ({len(taken)} windows, closing took {closes} s, stopped it {stalls} s)"
                    if taken
                    else ""
                )
                line.append(f"{way} {seconds[way]:6.2f} s{closing}")
            print("  " + "; ".join(line), flush=True)
    print(f"throughput kept, median of {args.rounds} rounds of {args.requests} requests:")
    for way, ratios in kept.items():
        print(
            f"  probe run {way:12s} {statistics.median(ratios):.3f} "
            f"(range {min(ratios):.3f}-{max(ratios):.3f})"
        )


if __name__ == "__main__":
    main()
