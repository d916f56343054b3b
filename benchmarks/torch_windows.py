"""What one torch.profiler window of ``probe run`` costs a PyTorch target (issue 15).

The target is ``tests/torch_corpus/decoder.py``'s model generating on the main thread
without a KV cache (one request after another, ~85,000 ops a second on this machine).
From a second thread, as the session does, windows of each length are opened with
``probe.samplers.torch_windows.start_kineto_window`` and closed with ``save``. Printed,
per window length: the median request time inside the window over the median of the
requests before it (the in-window slowdown), how long opening and closing took (closing
stops the target: no request ends while torch writes the window), the requests that
ended while it closed, the profiler's cost per op measured as the window opened, and
the trace's size.

    python benchmarks/torch_windows.py [--lengths 0.1 0.3] [--rounds 3] [--trace-only-ab]

``--trace-only-ab``: each round takes two windows of each length, one with torch's
``trace_only`` (probe's default: the closing builds the trace, not the list of events)
and one without, in alternating order; the rows say which, and a last line gives each
way's median closing time per MB of trace (the windows' sizes vary with the ops that
fell in them, and the closing's cost with the events).

Needs torch (``pip install '.[torch]'``).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def op_cost_ns(window, path: Path) -> float:
    """The window's per-op cost as the run's reader computes it: what the profiler added
    to a calibration call over the ops each call recorded on this (the opening) thread."""
    from probe.rundir.kineto import read_kineto
    from probe.rundir.reader import calibrated_op_cost_ns

    ops = read_kineto(path).tables["ops"]
    own = int((ops["tid"] == threading.get_native_id()).sum())
    cost = calibrated_op_cost_ns(window.calibration_calls, window.added_ns_per_call, own)
    return float("nan") if cost is None else cost


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lengths", type=float, nargs="+", default=[0.1, 0.3])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--trace-only-ab", action="store_true")
    args = parser.parse_args()
    import torch

    sys.path.insert(0, str(REPO / "tests" / "torch_corpus"))
    import decoder

    from probe.samplers.torch_windows import start_kineto_window

    model = decoder.built()
    prompt = torch.randint(0, decoder.VOCAB, (1, decoder.PROMPT))
    ended: list[tuple[float, float]] = []  # each request's (start, end)
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            t0 = time.perf_counter()
            decoder.generate(model, prompt, False)
            ended.append((t0, time.perf_counter()))

    worker = threading.Thread(target=serve)
    worker.start()
    rows = []
    try:
        time.sleep(1.5)  # warm-up: first-call allocations
        with tempfile.TemporaryDirectory() as tmp:
            for length in args.lengths:
                for n in range(args.rounds):
                    for trace_only in ways(args.trace_only_ab, n):
                        before = [b - a for a, b in ended[-20:]]
                        opening = time.perf_counter()
                        window = start_kineto_window(trace_only)
                        opened = time.perf_counter()
                        time.sleep(length)
                        closing = time.perf_counter()
                        path = Path(tmp) / f"w-{length}-{n}.json"
                        window.save(path)
                        closed = time.perf_counter()
                        inside = [b - a for a, b in ended if a >= opened and b <= closing]
                        during = sum(1 for _, b in ended if closing < b < closed)
                        rows.append(
                            (
                                trace_only,
                                length,
                                statistics.median(inside) / statistics.median(before)
                                if inside
                                else float("nan"),
                                opened - opening,
                                closed - closing,
                                during,
                                op_cost_ns(window, path),
                                path.stat().st_size / 1e6,
                            )
                        )
                        time.sleep(1.0)
    finally:
        stop.set()
        worker.join()
    print(
        "trace_only  window_s  in-window request time (x)  open_s  close_s  requests ended "
        "while closing  op_cost_ns  trace_MB"
    )
    for trace_only, length, ratio, open_s, close_s, during, op_cost, mb in rows:
        print(
            f"{trace_only!s:10}  {length:8.2f}  {ratio:27.2f}  {open_s:6.3f}  {close_s:7.3f}  "
            f"{during:28d}  {op_cost:10.0f}  {mb:8.1f}"
        )
    if args.trace_only_ab:
        for way in (True, False):
            per_mb = [row[4] / row[7] for row in rows if row[0] is way and row[7] > 0]
            print(f"trace_only {way}: closing {statistics.median(per_mb):.4f} s a MB of trace")
    return 0


def ways(both: bool, round_: int) -> tuple[bool, ...]:
    """trace_only for this round's windows: probe's default alone, or both in an order
    that alternates by round (a host drifting over the run favours neither)."""
    if not both:
        return (True,)
    return (True, False) if round_ % 2 == 0 else (False, True)


if __name__ == "__main__":
    sys.exit(main())
