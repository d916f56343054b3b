"""What the stack sampler pays, with the GIL, to classify a call site it has not seen:
the call's bytecode read directly (``probe.samplers.waits``, CPython 3.11/3.12) against
through ``dis``, every call in a few of the busiest functions of a served FastAPI app's
stack (uvicorn, Starlette, asyncio), each with a cold classifier, in one run.

    python benchmarks/call_site_cost.py [--repeat 5]

Printed: the mean per site each way (best of the repeats) and their ratio.
"""

from __future__ import annotations

import argparse
import asyncio.base_events
import dis
import time

from probe.samplers import waits


def _sites() -> list[tuple[object, int]]:
    import starlette.routing
    import uvicorn.protocols.http.h11_impl as h11_impl

    functions = (
        h11_impl.H11Protocol.handle_events,
        h11_impl.RequestResponseCycle.send,
        starlette.routing.Router.app,
        asyncio.base_events.BaseEventLoop._run_once,  # type: ignore[attr-defined]
    )
    return [
        (f.__code__, i.offset)
        for f in functions
        for i in dis.get_instructions(f.__code__)
        if i.opname in ("CALL", "CALL_FUNCTION_EX")
    ]


def _mean_cold_s(sites: list[tuple[object, int]], repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        started = time.perf_counter()
        for code, offset in sites:
            waits.WaitClassifier().classify(code, offset)  # type: ignore[arg-type]
        best = min(best, (time.perf_counter() - started) / len(sites))
    return best


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeat", type=int, default=5)
    args = p.parse_args()
    sites = _sites()
    if not waits._RAW_BYTECODE:
        raise SystemExit("this Python reads call sites through dis only: nothing to compare")
    direct = _mean_cold_s(sites, args.repeat)
    waits._RAW_BYTECODE = False
    try:
        through_dis = _mean_cold_s(sites, args.repeat)
    finally:
        waits._RAW_BYTECODE = True
    print(
        f"{len(sites)} call sites, each cold: {direct * 1e6:.0f} us read directly, "
        f"{through_dis * 1e6:.0f} us through dis ({through_dis / direct:.1f}x)"
    )


if __name__ == "__main__":
    main()
