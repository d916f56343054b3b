"""What one torch.profiler window of ``probe run`` costs a PyTorch target (issue 15).

The target is ``tests/torch_corpus/decoder.py``'s model generating on the main thread
without a KV cache (one request after another, ~85,000 ops a second on this machine).
From a second thread, as the session does, windows of each length are opened with
``probe.samplers.torch_windows.start_kineto_window`` and closed with ``save``. Printed,
per window length: the median request time inside the window over the median of the
requests before it (the in-window slowdown), how long opening and closing took, the
requests that ended while it closed and the slowest request that overlapped the closing
(through torch's Python binding the closing holds the GIL and stops the target: no
request ends while torch writes the window; through ``probe._torchclose``, probe's
default where it is built, the target runs on), the profiler's cost per op measured as
the window opened, and the trace's size.

    python benchmarks/torch_windows.py [--lengths 0.1 0.3] [--rounds 3]
                                       [--trace-only-ab | --close-ab]

``--trace-only-ab``: each round takes two windows of each length, one with torch's
``trace_only`` (probe's default: the closing builds the trace, not the list of events)
and one without, in alternating order; the rows say which, and a last line gives each
way's median closing time per MB of trace (the windows' sizes vary with the ops that
fell in them, and the closing's cost with the events).

``--close-ab``: each round takes two windows of each length, one closed through
``probe._torchclose`` (the GIL released) and one through torch's Python binding (as with
``PROBE_TORCH_CLOSE_WITH_GIL=1``), in alternating order; a last line per way gives the
median closing time, requests ended while closing and slowest request overlapping it.

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


def op_cost_ns(path: Path) -> float:
    """The window's per-op cost as the diagnosis reads it off the trace's own ops
    (``analyzers.op_breakdown.profiler_op_cost_ns``)."""
    from probe.analyzers.op_breakdown import profiler_op_cost_ns
    from probe.rundir.kineto import read_kineto

    cost = profiler_op_cost_ns(read_kineto(path).tables["ops"])
    return float("nan") if cost is None else cost


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lengths", type=float, nargs="+", default=[0.1, 0.3])
    parser.add_argument("--rounds", type=int, default=3)
    both = parser.add_mutually_exclusive_group()
    both.add_argument("--trace-only-ab", action="store_true")
    both.add_argument("--close-ab", action="store_true")
    args = parser.parse_args()
    import torch

    sys.path.insert(0, str(REPO / "tests" / "torch_corpus"))
    import decoder

    from probe.samplers import torch_windows
    from probe.samplers.torch_windows import start_kineto_window

    gil_free = torch_windows._gil_free_close()  # resolved once, as a session does
    if args.close_ab and gil_free is None:
        print("--close-ab: probe._torchclose is not built or finds no torch functions here")
        return 2

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
                    for trace_only, closer in ways(args, n):
                        # the closing's way: probe's (resolved as the session does) or
                        # torch's binding (the module's "cannot be used")
                        torch_windows._gil_free = gil_free if closer == "gil free" else None
                        before = [b - a for a, b in ended[-20:]]
                        opening = time.perf_counter()
                        window = start_kineto_window(trace_only)
                        opened = time.perf_counter()
                        time.sleep(length)
                        closing = time.perf_counter()
                        path = Path(tmp) / f"w-{length}-{n}.json"
                        window.save(path)
                        closed = time.perf_counter()
                        time.sleep(0.2)  # the request under way at the end, ended
                        inside = [b - a for a, b in ended if a >= opened and b <= closing]
                        during = sum(1 for _, b in ended if closing < b < closed)
                        slowest = max(
                            (b - a for a, b in ended if a < closed and b > closing), default=0.0
                        )
                        rows.append(
                            (
                                trace_only if not args.close_ab else closer,
                                length,
                                statistics.median(inside) / statistics.median(before)
                                if inside
                                else float("nan"),
                                opened - opening,
                                closed - closing,
                                during,
                                slowest,
                                op_cost_ns(path),
                                path.stat().st_size / 1e6,
                            )
                        )
                        time.sleep(0.8)
    finally:
        stop.set()
        worker.join()
    print(
        f"{'closing' if args.close_ab else 'trace_only':10}  window_s  in-window request "
        "time (x)  open_s  close_s  requests ended while closing  slowest overlapping "
        "request_s  op_cost_ns  trace_MB"
    )
    for way, length, ratio, open_s, close_s, during, slowest, op_cost, mb in rows:
        print(
            f"{way!s:10}  {length:8.2f}  {ratio:27.2f}  {open_s:6.3f}  {close_s:7.3f}  "
            f"{during:28d}  {slowest:27.3f}  {op_cost:10.0f}  {mb:8.1f}"
        )
    if args.trace_only_ab:
        for t_only in (True, False):
            per_mb = [row[4] / row[8] for row in rows if row[0] is t_only and row[8] > 0]
            print(f"trace_only {t_only}: closing {statistics.median(per_mb):.4f} s a MB of trace")
    if args.close_ab:
        for closer in ("gil free", "binding"):
            mine = [row for row in rows if row[0] == closer]
            print(
                f"closing {closer}: {statistics.median(r[4] for r in mine):.3f} s, "
                f"{statistics.median(r[5] for r in mine):.0f} requests ended meanwhile, "
                f"slowest overlapping request {statistics.median(r[6] for r in mine):.3f} s "
                "(medians)"
            )
    return 0


def ways(args: argparse.Namespace, round_: int) -> list[tuple[bool, str]]:
    """This round's windows, each (trace_only, how it closes): probe's defaults alone, or
    the two ways compared in an order that alternates by round (a host drifting over the
    run favours neither)."""
    if args.trace_only_ab:
        pair = [(True, "gil free"), (False, "gil free")]
    elif args.close_ab:
        pair = [(True, "gil free"), (True, "binding")]
    else:
        return [(True, "gil free")]
    return pair if round_ % 2 == 0 else pair[::-1]


if __name__ == "__main__":
    sys.exit(main())
