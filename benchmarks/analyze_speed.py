"""How long `probe analyze` takes on an hour-long run, and how its cost grows with the data.

Builds synthetic run directories (Parquet, as `probe run` writes them): an hour of a
service on 8 threads, 1,000,000 spans (200,000 requests of 5 spans) and 360,000 stack
samples (100 Hz), with resources at 10 Hz; and the same at a tenth of the size. Runs
`probe analyze --no-write` on each in a fresh process and reports wall time and peak
RSS. Targets (issue 4): <= 10 s and <= 2 GB on the full run; the 10x run takes <= 12x
the time of the 1x run (cost grows linearly).

    python benchmarks/analyze_speed.py [--scale 1.0] [--repeat 3]
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

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.synthetic import hour_long_run as build  # noqa: E402


def analyze(path: Path) -> tuple[float, float]:
    """Wall seconds and peak RSS (MiB) of `probe analyze` in a fresh process."""
    code = (
        "import resource, sys, time\n"
        "t = time.perf_counter()\n"
        "from probe.cli import main\n"
        "try:\n"
        f"    main(['analyze', '--no-write', {str(path)!r}])\n"
        "except SystemExit:\n"
        "    pass\n"
        "sys.stderr.write(f'{time.perf_counter() - t} '\n"
        "    f'{resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}\\n')\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    wall, rss = out.stderr.strip().splitlines()[-1].split()
    return float(wall), float(rss)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--scale", type=float, default=1.0, help="fraction of the hour-long run")
    p.add_argument("--repeat", type=int, default=3)
    args = p.parse_args()
    spans, samples = int(1_000_000 * args.scale), int(360_000 * args.scale)
    with tempfile.TemporaryDirectory() as tmp:
        full, tenth = Path(tmp) / "full", Path(tmp) / "tenth"
        t = time.perf_counter()
        build(full, spans, samples, 3600 * args.scale)
        build(tenth, spans // 10, samples // 10, 360 * args.scale)
        print(f"built {spans:,} spans and {samples:,} samples in {time.perf_counter() - t:.1f} s")
        # interleaved: the machine's noise hits both alike
        runs = [(analyze(tenth), analyze(full)) for _ in range(args.repeat)]
        small = statistics.median(r[0][0] for r in runs)
        big = statistics.median(r[1][0] for r in runs)
        rss = max(r[1][1] for r in runs)
        print(f"1x  ({spans // 10:,} spans, {samples // 10:,} samples): {small:.2f} s")
        print(f"10x ({spans:,} spans, {samples:,} samples): {big:.2f} s, peak RSS {rss:.0f} MiB")
        print(f"10x data / 1x data: {big / small:.1f}x the time (target <= 12x)")
        ok = big <= 10.0 and rss <= 2048 and big / small <= 12.0
        print("targets met" if ok else "TARGETS MISSED")
    return 0 if ok else 1


if __name__ == "__main__":
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    sys.exit(main())
