"""How long the stack sampler holds the GIL a tick beside a one-thread loop, and in what.

One process: the main thread runs ``service_loop.py``'s requests (as
``switch_interval_cost.py`` does) for ``--seconds`` at the target's own 5-ms switch
interval, while a thread runs probe's ``StackSampler`` with the tick's reads
(``probe.samplers.peek``) at 100 Hz, each of its steps timed from inside the sampler
thread (``time.perf_counter_ns`` around it). What the sampler does with the GIL held is
time the loop does not run; what the tick reads in C without it (frames, CPU clocks,
kernel states, run-queue delays) is not, and shows only in ``wait``.

Prints the median microseconds a tick of: ``prep`` (the Python around the C wait:
choosing the threads, building the reads), ``sample`` (all of ``sample()``), and within
it ``read_frames``, ``queued`` (run-queue reads made with the GIL, per call), ``emit``.

    python benchmarks/tick_gil_time.py [--seconds 5]

Needs ``probe._tickpeek`` built (``pip install -e .``).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import threading
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

os.environ["OPENBLAS_NUM_THREADS"] = "1"
os.environ["SERVICE_LOOP_SPANS"] = "0"
HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from switch_interval_cost import service_request  # noqa: E402

from probe.samplers.peek import TickPeek  # noqa: E402
from probe.samplers.stacks import StackSampler  # noqa: E402


def _timed(times: list[int], f: Callable[..., Any]) -> Callable[..., Any]:
    def timed(*args: Any, **kwargs: Any) -> Any:
        started = time.perf_counter_ns()
        try:
            return f(*args, **kwargs)
        finally:
            times.append(time.perf_counter_ns() - started)

    return timed


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seconds", type=float, default=5.0)
    args = p.parse_args()
    peek = TickPeek()
    if not peek.available:
        sys.exit("probe._tickpeek is not built or not usable here")
    sampler = StackSampler(peek=peek)
    times: dict[str, list[int]] = defaultdict(list)
    sampler._read_frames = _timed(times["read_frames"], sampler._read_frames)  # type: ignore[method-assign]
    sampler._queued = _timed(times["queued"], sampler._queued)  # type: ignore[method-assign]
    sampler._emit_all = _timed(times["emit"], sampler._emit_all)  # type: ignore[method-assign]
    module = peek._module
    in_c: list[int] = []

    class Timed:  # the compiled module, its wait timed: what prep leaves out
        USABLE, CODE_OFFSET = module.USABLE, module.CODE_OFFSET
        thread_states, code_at = staticmethod(module.thread_states), staticmethod(module.code_at)
        wait_and_peek = staticmethod(_timed(in_c, module.wait_and_peek))

    peek._module = Timed()
    stop = threading.Event()

    def run() -> None:
        while not stop.is_set():
            started = time.perf_counter_ns()
            woken = sampler.wait(0.01)
            waited = time.perf_counter_ns()
            if woken:
                break
            times["prep"].append(waited - started - in_c[-1])
            sampler.sample()
            times["sample"].append(time.perf_counter_ns() - waited)

    sys.setswitchinterval(0.005)
    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    requests = service_request()
    end = time.perf_counter() + args.seconds
    done = 0
    while time.perf_counter() < end:
        done += requests()
    stop.set()
    sampler.wake()
    thread.join()
    sampler.close()
    ticks = len(times["sample"])
    print(f"{ticks} ticks in {args.seconds:g} s beside {done:,} requests; median us with the GIL:")
    for name in ("prep", "sample", "read_frames", "queued", "emit"):
        values = times[name]
        if values:
            print(f"  {name:12s} {statistics.median(values) / 1e3:7.1f}  (n={len(values)})")


if __name__ == "__main__":
    main()
