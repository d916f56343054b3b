"""Cost of one span with a run active (NVTX + recording), against an empty function call.

Both are measured in this process, interleaved, best of several repeats (timeit's
advice: the minimum is the least disturbed figure), with the recorder drained between
repeats as the collector does every second. Prints ns per call and the ratios.

    python benchmarks/span_cost.py

NVTX: without an NVTX tool attached (no ``nsys``), NVTX calls do nothing, and probe does
not call them at all; ``--nvtx`` forces a real ``nvtx`` domain in to measure that path.
"""

from __future__ import annotations

import argparse
import timeit

from probe import spans


def empty() -> None:
    pass


def main() -> None:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--nvtx", action="store_true", help="call nvtx as if a tool were attached")
    p.add_argument("--number", type=int, default=200_000)
    p.add_argument("--repeat", type=int, default=9)
    args = p.parse_args()
    if args.nvtx:
        import nvtx

        spans._set_nvtx_domain(nvtx.get_domain("probe"))

    decorated = spans.stage("bench")(empty)
    cm = spans.span("bench")
    recorder = spans.SpanRecorder()

    def with_cm() -> None:
        with cm:
            pass

    cases = {"empty call": empty, "@stage call": decorated, "with span": with_cm}
    best = {name: float("inf") for name in cases}
    spans.activate(recorder)
    try:
        for _ in range(args.repeat):
            for name, fn in cases.items():
                t = timeit.timeit(fn, number=args.number) / args.number * 1e9
                best[name] = min(best[name], t)
                recorder.drain()
    finally:
        spans.activate(None)
    base = best["empty call"]
    print(f"nvtx {'on' if args.nvtx else 'off (no tool attached)'}; best of {args.repeat}")
    for name, ns in best.items():
        extra = ns - base
        print(
            f"  {name:<12} {ns:7.0f} ns   span cost {extra:6.0f} ns = {extra / base:4.1f}x "
            "an empty call"
            if name != "empty call"
            else f"  {name:<12} {ns:7.0f} ns"
        )


if __name__ == "__main__":
    main()
