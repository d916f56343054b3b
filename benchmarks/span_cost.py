"""Cost of one span with a run active (NVTX + recording), against an empty function call.

"with span" reuses one span object (``cm = probe.span("x")`` made once); "with
span()" makes it where the block opens (``with probe.span("x"):``, as most code writes
it), so it also pays ``probe.span``'s call and the object's making.

Both are measured in this process, interleaved, best of several repeats (timeit's
advice: the minimum is the least disturbed figure), with the recorder drained between
repeats as the collector does every second. Prints ns per call and the ratios.

    python benchmarks/span_cost.py

NVTX: without an NVTX tool attached (no ``nsys``), NVTX calls do nothing, and probe does
not call them at all; ``--nvtx`` forces a real ``nvtx`` domain in to measure that path.

Both hot paths are measured: the one this process runs (the compiled ``probe._fastspans``
where it is built), then the pure-Python one in a child process (``PROBE_PURE_SPANS=1``).
``--number`` spans are recorded between drains; the collector drains every second, so
10,000 is a service making 10,000 spans a second.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import timeit

from probe import spans


def empty() -> None:
    pass


def main() -> None:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--nvtx", action="store_true", help="call nvtx as if a tool were attached")
    p.add_argument("--number", type=int, default=10_000)
    p.add_argument("--this-path-only", action="store_true", help="skip the pure-Python run")
    p.add_argument("--repeat", type=int, default=9)
    args = p.parse_args()
    if args.nvtx:
        import nvtx

        spans.set_range_domain(nvtx.get_domain("probe"))

    decorated = spans.stage("bench")(empty)
    cm = spans.span("bench")
    recorder = spans.SpanRecorder()

    def with_cm() -> None:
        with cm:
            pass

    def with_built() -> None:  # as code writes it: the span made where it opens
        with spans.span("bench"):
            pass

    cases = {
        "empty call": empty,
        "@stage call": decorated,
        "with span": with_cm,
        "with span()": with_built,
    }
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
    # What the collector pays per span each second: one JSON encode per thread's batch
    # (what probe does) against one per row.
    batch = [
        (i, None, "stage", "stage", 10**12 + i, 10**12 + i + 500, f"r{i // 5}", None)
        for i in range(25_000)
    ]
    encode = json.JSONEncoder(separators=(",", ":"), default=str).encode
    per_row = (
        min(timeit.repeat(lambda: [encode([7, *r]) for r in batch], number=1, repeat=5))
        / len(batch)
        * 1e9
    )
    batched = (
        min(timeit.repeat(lambda: encode([[7], batch]), number=1, repeat=5)) / len(batch) * 1e9
    )
    compiled = (
        min(timeit.repeat(lambda: spans.encode_batch(7, batch), number=1, repeat=5))
        / len(batch)
        * 1e9
    )
    base = best["empty call"]
    path = "compiled (probe._fastspans)" if spans.uses_compiled_path() else "pure Python"
    print(
        f"{path}; nvtx {'on' if args.nvtx else 'off (no tool attached)'}; "
        f"best of {args.repeat}, {args.number} spans between drains"
    )
    for name, ns in best.items():
        extra = ns - base
        print(
            f"  {name:<12} {ns:7.0f} ns   span cost {extra:6.0f} ns = {extra / base:4.1f}x "
            "an empty call"
            if name != "empty call"
            else f"  {name:<12} {ns:7.0f} ns"
        )
    written = (
        f"{compiled:.0f} ns compiled (as probe writes), {batched:.0f} ns json batched"
        if spans.uses_compiled_path()
        else f"{batched:.0f} ns json batched (as probe writes)"
    )
    print(f"journal encoding per span: {written}, {per_row:.0f} ns row by row")
    # A served request's span: the middleware's attributes (probe.serving.routes), the
    # collector's largest cost on a busy server
    served = {"served": True, "method": "GET", "route": "/items/{item_id}", "status": 200,
              "error": False, "queued_ns": 41_250, "first_byte_ns": 180_500,
              "answered_ns": 190_250, "loop_lag_ns": 0, "handler": "/srv/app/main.py:40",
              "handler_name": "item"}  # fmt: skip
    start = 10**12
    requests = [
        (i, None, "GET /items/{item_id}", "request", start + i, start + i + 500, None, served)
        for i in range(5_000)
    ]
    json_ns = min(timeit.repeat(lambda: encode([[7], requests]), number=1, repeat=5)) * 2e5
    line = f"{json_ns:.0f} ns json batched"
    if spans.uses_compiled_path():
        ns = min(timeit.repeat(lambda: spans.encode_batch(7, requests), number=1, repeat=5)) * 2e5
        line = f"{ns:.0f} ns compiled, " + line
    print(f"journal encoding per served request span: {line}")
    if spans.uses_compiled_path() and not args.this_path_only:
        env = {**os.environ, "PROBE_PURE_SPANS": "1"}
        subprocess.run([sys.executable, *sys.argv, "--this-path-only"], env=env, check=True)


if __name__ == "__main__":
    main()
