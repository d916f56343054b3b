"""The live leak detector on simulated memory series: false alarms, detections, delays.

False alarms: ``--series`` (default 200) simulated 24-hour series of healthy services,
an equal share of each shape (GC saw-tooth, periodic cache flush, warm-up that
plateaus, one-off steps, all of them mixed; +-5% noise, one reading a second; see
``tests/memory_series.py``), fed reading by reading to ``analyzers.leaks.LiveLeakDetector`` at
its defaults. Target (issue 6): 0.

Detections: leaks of 1 MB/s and 10 KB/s starting an hour in, on a flat 300 MB base
with +-5% noise (the background the bar is stated on). Targets: flagged within 60 s
and within 30 min of the onset. The same leaks on the healthy shapes are reported too,
without a target: on a background whose own swings are larger than what the leak adds
in 60 s (a 120-s saw-tooth of 60 MB), no method can tell within 60 s.

Also prints the detector's cost per reading and the size of its state after 24 hours
(ring buffers: it must not grow with the hours watched).

    python benchmarks/leak_corpus.py [--series 200] [--leaks 20] [--jobs 2]
"""

from __future__ import annotations

import argparse
import pickle
import statistics
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from probe.analyzers.leaks import LiveLeakDetector  # noqa: E402
from tests.memory_series import KINDS, flat, make  # noqa: E402

LEAK_ONSET_S = 3600.0


def watch(kind: str, seed: int, rate: float = 0.0, hours: float = 24.0) -> dict:
    if kind == "flat":
        series = flat(seed, hours=hours, leak_bytes_per_s=rate, leak_onset_s=LEAK_ONSET_S)
    else:
        series = make(kind, seed, hours=hours, leak_bytes_per_s=rate, leak_onset_s=LEAK_ONSET_S)
    detector = LiveLeakDetector()
    started = time.process_time()
    flagged = None
    for t, y in zip(series.t_s.tolist(), series.bytes_.tolist(), strict=True):
        if detector.add(t, y) is not None:
            flagged = detector.leak
            if rate:
                break  # a detection run ends at the flag; a healthy one runs its 24 hours
    cpu = time.process_time() - started
    return {
        "kind": kind,
        "seed": seed,
        "rate": rate,
        "flagged_at_s": None if flagged is None else flagged.at_s,
        "onset_s": None if flagged is None else flagged.onset_s,
        "slope": None if flagged is None else flagged.slope_bytes_per_s,
        "reason": None if flagged is None else flagged.reason,
        "readings": detector.readings,
        "cpu_s": cpu,
        "state_bytes": len(pickle.dumps(detector.__dict__)) if not rate else None,
    }


def _run(args: tuple) -> dict:
    return watch(*args)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--series", type=int, default=200, help="healthy 24-hour series")
    parser.add_argument("--leaks", type=int, default=20, help="series per leak case")
    parser.add_argument("--jobs", type=int, default=2)
    args = parser.parse_args()
    per_kind = max(1, args.series // len(KINDS))
    healthy = [(k, seed) for k in KINDS for seed in range(per_kind)]
    leaks = [
        (kind, 1000 + seed, rate, 3.0)
        for rate in (1e6, 1e4)
        for kind in ("flat", *KINDS)
        for seed in range(args.leaks if kind == "flat" else max(1, args.leaks // 4))
    ]
    started = time.perf_counter()
    results = []
    with ProcessPoolExecutor(args.jobs) as pool:
        for i, r in enumerate(pool.map(_run, healthy + leaks), 1):
            results.append(r)
            if i % 20 == 0:
                print(f"  {i}/{len(healthy) + len(leaks)} series", file=sys.stderr, flush=True)
    healthy_r = [r for r in results if not r["rate"]]
    alarms = [r for r in healthy_r if r["flagged_at_s"] is not None]
    print(f"healthy 24-hour series: {len(healthy_r)} ({per_kind} of each: {', '.join(KINDS)})")
    print(f"false alarms: {len(alarms)}")
    for r in alarms:
        print(f"  {r['kind']} seed {r['seed']} at {r['flagged_at_s']:.0f} s: {r['reason']}")
    readings = sum(r["readings"] for r in healthy_r)
    cpu = sum(r["cpu_s"] for r in healthy_r)
    print(
        f"cost: {cpu / readings * 1e6:.1f} us of CPU a reading "
        f"({cpu / readings * 100:.4f}% of a core at one reading a second)"
    )
    print(f"detector state after 24 h: {max(r['state_bytes'] for r in healthy_r) / 1e6:.2f} MB")
    print("detections (leak from 1 h in; delay = flagged - onset):")
    for rate, bar in ((1e6, 60.0), (1e4, 1800.0)):
        for kind in ("flat", *KINDS):
            rs = [r for r in results if r["rate"] == rate and r["kind"] == kind]
            found = [r["flagged_at_s"] - LEAK_ONSET_S for r in rs if r["flagged_at_s"]]
            early = sum(1 for d in found if d < 0)
            late = sum(1 for d in found if d > bar)
            line = (
                f"  {rate / 1e3:>6g} KB/s on {kind:<6}: {len(found)}/{len(rs)} flagged"
                + (
                    f", delay median {statistics.median(found):.0f} s, max {max(found):.0f} s"
                    if found
                    else ""
                )
                + (f", {late} later than {bar:.0f} s" if late else "")
                + (f", {early} before the onset" if early else "")
            )
            print(line + ("   <- the bar" if kind == "flat" else ""))
    print(f"({time.perf_counter() - started:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
