"""How much an in-process collector moves its target's memory floor, read from outside.

``sample_services/healthy_service.py`` fills a cache and clears it every second: its RSS
saw-tooths and, unobserved, its floor (the lowest RSS of each second) stays level. A
collector thread in the same process shares pymalloc's arenas with the target: objects
it keeps across the target's clear can keep an emptied arena from going back to the OS,
and a leak detector then reads a rising floor. This runs the sample unobserved and under
``probe run``, alternated, reads RSS from /proc/PID/statm every 20 ms (outside the
process), and prints each run's floor slope (MB/s, least squares over the per-second
floors after the first two seconds) and the saw-tooth's median swing (peak - floor).

    python benchmarks/allocator_floor.py [--rounds 3] [--requests 8000]
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

SAMPLE = Path(__file__).resolve().parents[1] / "sample_services" / "healthy_service.py"
PAGE = os.sysconf("SC_PAGE_SIZE")


def rss_mb(pid: int) -> float | None:
    try:
        with open(f"/proc/{pid}/statm") as f:
            return int(f.read().split()[1]) * PAGE / 1e6
    except (OSError, IndexError, ValueError):
        return None


def seconds(cmd: list[str]) -> list[tuple[float, float]]:
    """(floor, peak) RSS of each whole second the command ran, in MB."""
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    out, lo, hi, start = [], float("inf"), 0.0, time.monotonic()
    try:
        while proc.poll() is None:
            rss = rss_mb(proc.pid)
            if rss is None:
                break
            lo, hi = min(lo, rss), max(hi, rss)
            if time.monotonic() - start >= 1.0:
                out.append((lo, hi))
                lo, hi, start = float("inf"), 0.0, time.monotonic()
            time.sleep(0.02)
    finally:
        proc.wait()
    return out


def slope(values: list[float]) -> float:
    n = len(values)
    mx, my = (n - 1) / 2, statistics.fmean(values)
    num = sum((x - mx) * (y - my) for x, y in enumerate(values))
    return num / sum((x - mx) ** 2 for x in range(n))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--requests", type=int, default=8000)
    args = parser.parse_args()
    plain = [sys.executable, str(SAMPLE), "--requests", str(args.requests)]
    results: dict[str, list[tuple[float, float]]] = {"unobserved": [], "probe run": []}
    with tempfile.TemporaryDirectory() as tmp:
        for k in range(args.rounds):
            for label in results:
                cmd = plain
                if label == "probe run":
                    out = str(Path(tmp) / f"run{k}")
                    cmd = [sys.executable, "-m", "probe.cli", "run", "--out", out, *plain[1:]]
                secs = seconds(cmd)[2:-1]  # start-up, and the last partial second
                if len(secs) < 4:
                    print(f"{label}: too short a run ({len(secs)} s); raise --requests")
                    continue
                floors = [lo for lo, _ in secs]
                swing = statistics.median(hi - lo for lo, hi in secs)
                results[label].append((slope(floors), swing))
                print(
                    f"{label:10s} round {k}: floor slope {slope(floors):+.2f} MB/s, "
                    f"swing {swing:.0f} MB, floors {' '.join(f'{f:.0f}' for f in floors)}",
                    flush=True,
                )
    for label, runs in results.items():
        if runs:
            print(
                f"{label:10s} median floor slope {statistics.median(s for s, _ in runs):+.2f} "
                f"MB/s, median swing {statistics.median(w for _, w in runs):.0f} MB"
            )


if __name__ == "__main__":
    main()
