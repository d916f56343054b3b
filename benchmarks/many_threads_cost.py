"""What sampling costs a service with many threads that pass the GIL among themselves
(issue 17): ``sample_services/image_io_bound.py --fixed`` (16 download workers and the
upstream's thread per connection, ~35 threads, GIL-bound at ~330 images/s on 2 cores).

Each round runs, in an order shuffled per round so that the host's drift falls on all
alike: the service plain; under ``probe run --no-report`` at the default sampler share;
under ``probe run --no-report --sampler-share 0`` (100 Hz whatever a tick costs); and,
where installed, under ``py-spy record -r 100``. The service prints its own throughput
(images/s over its serving window, its start and probe's end of run outside it); the
figure is each arm's median over the plain runs' median, with the pairs' range, and
probe's stack-sampler ticks and their mean interval from meta.json.

    python benchmarks/many_threads_cost.py [--rounds 8] [--requests 600] [--no-py-spy]
        [--extra FLAGS ...]
"""

from __future__ import annotations

import argparse
import json
import random
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

SAMPLE = Path(__file__).resolve().parents[1] / "sample_services" / "image_io_bound.py"


def throughput(cmd: list[str]) -> float:
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300, check=True)
    found = re.search(r": ([0-9.]+) images/s", done.stdout + done.stderr)
    if not found:
        raise SystemExit(f"no throughput in the output of {' '.join(cmd)}")
    return float(found.group(1))


def arms(
    requests: int, tmp: Path, py_spy: str | None, extra: list[str]
) -> dict[str, list[str] | None]:
    service = [str(SAMPLE), "--requests", str(requests), "--fixed"]
    probe = [sys.executable, "-m", "probe.cli", "run", "--no-report", "--out"]
    commands: dict[str, list[str] | None] = {
        "plain": [sys.executable, *service],
        "probe": [*probe, str(tmp / "paced"), *service],
        "probe --sampler-share 0": [*probe, str(tmp / "fixed-rate"), "--sampler-share", "0"]
        + service,
        "py-spy -r 100": None,
    }
    for i, flags in enumerate(extra):  # more arms: `probe run` with these flags
        commands[f"probe {flags}"] = [*probe, str(tmp / f"extra-{i}"), *flags.split(), *service]
    if py_spy:
        raw = str(tmp / "py-spy.txt")
        commands["py-spy -r 100"] = [py_spy, "record", "-r", "100", "-f", "raw", "-o", raw]
        commands["py-spy -r 100"] += ["--", sys.executable, *service]
    return commands


def pacing(run_dir: Path) -> tuple[int, float]:
    collector = json.loads((run_dir / "meta.json").read_text())["collector"]
    pace = collector.get("stack_pacing") or {}
    return collector["stack_ticks"], float(pace.get("mean_interval_s") or 0.0)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=8)
    p.add_argument("--requests", type=int, default=600)
    p.add_argument(
        "--extra",
        action="append",
        default=[],
        metavar="FLAGS",
        help="one more arm: `probe run` with these flags, repeatable: --extra '--hz 10' (a "
        "space in it), or --extra=--no-http-spans (one flag alone needs the '=')",
    )
    p.add_argument("--no-py-spy", action="store_true", help="leave py-spy's arm out")
    args = p.parse_args()
    rates: dict[str, list[float]] = {}
    ticks: dict[str, list[tuple[int, float]]] = {"probe": [], "probe --sampler-share 0": []}
    py_spy = None if args.no_py_spy else shutil.which("py-spy")
    with tempfile.TemporaryDirectory() as tmp:
        commands = {
            k: v for k, v in arms(args.requests, Path(tmp), py_spy, args.extra).items() if v
        }
        for _ in range(args.rounds):
            order = list(commands)
            random.shuffle(order)
            for name in order:
                for run_dir in Path(tmp).iterdir():
                    if run_dir.is_dir():
                        shutil.rmtree(run_dir, ignore_errors=True)
                rates.setdefault(name, []).append(throughput(commands[name]))
                if name in ticks:
                    run_dir = Path(tmp) / ("paced" if name == "probe" else "fixed-rate")
                    ticks[name].append(pacing(run_dir))
    plain = statistics.median(rates["plain"])
    print("| arm | images/s (median) | over plain | pairs | ticks, tick CPU |")
    print("| --- | --- | --- | --- | --- |")
    for name, values in rates.items():
        pairs = [v / a for v, a in zip(values, rates["plain"], strict=True)]
        tick = ""
        if ticks.get(name):
            n = statistics.median(t for t, _ in ticks[name])
            interval = statistics.median(c for _, c in ticks[name])
            tick = f"{n:.0f}, every {interval * 1e3:.0f} ms" if interval else f"{n:.0f}"
        print(
            f"| {name} | {statistics.median(values):.1f} | {statistics.median(values) / plain:.3f} "
            f"| {min(pairs):.2f}-{max(pairs):.2f} | {tick} |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
