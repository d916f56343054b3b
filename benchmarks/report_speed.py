"""How long rendering the HTML report of an hour-long run takes, and how big the page is.

Builds the same synthetic hour as ``analyze_speed.py`` (1,000,000 spans, 360,000 stack
samples, resources at 10 Hz), diagnoses it once, then times the report's views (call
tree, resource series), ``HtmlReport.from_analysis`` and ``render`` (issue 5: <= 5 s)
and reports the page size (<= 10 MB, plotly.js ~4.8 MB of it). Also at a tenth of the
size: the page should not grow with the run.

    python benchmarks/report_speed.py [--repeat 3]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from probe.analyzers.analysis import analyze
from probe.analyzers.diagnosis import diagnose
from probe.reports.html import HtmlReport
from probe.rundir import load
from tests.synthetic import hour_long_run as build  # noqa: E402


def render(path: Path, repeat: int) -> tuple[float, int]:
    run = load(path)
    d = diagnose(run)
    times, size = [], 0
    for _ in range(repeat):
        t = time.perf_counter()
        page = HtmlReport.from_analysis(analyze(run, d)).render()  # fresh views each time
        times.append(time.perf_counter() - t)
        size = len(page.encode())
    return statistics.median(times), size


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeat", type=int, default=3)
    args = p.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        full, tenth = Path(tmp) / "full", Path(tmp) / "tenth"
        build(full, 1_000_000, 360_000, 3600)
        build(tenth, 100_000, 36_000, 360)
        small_s, small_b = render(tenth, args.repeat)
        big_s, big_b = render(full, args.repeat)
    print(f"1x  (100,000 spans):   {small_s:.2f} s, {small_b / 1e6:.2f} MB")
    print(f"10x (1,000,000 spans): {big_s:.2f} s, {big_b / 1e6:.2f} MB (targets: 5 s, 10 MB)")
    ok = big_s <= 5.0 and big_b <= 10_000_000
    print("targets met" if ok else "TARGETS MISSED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
