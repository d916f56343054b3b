"""What a span costs while a torch.profiler window is open (issue 15): probe's spans also
open a torch range then (``probe.samplers.torch_windows.SpanRanges``), so that the
window's trace holds each stage around the ops and kernels it launched.

In this process, recording on, a ``@probe.stage`` function with an empty body called
``--number`` times, best of ``--repeat``, in four settings:

- no window (the span alone);
- a window open, its spans as torch's C++ range (``_RecordFunctionFast``, torch >= 2.2:
  what probe uses);
- a window open, its spans as ``record_function``'s own ops (the fallback on an older
  torch);
- a window open, spans without a range (the profiler's cost on the rest of the call).

    python benchmarks/span_ranges_cost.py [--number 2000] [--repeat 7]

Needs torch (``pip install '.[torch]'``).
"""

from __future__ import annotations

import argparse
import tempfile
import timeit
from collections.abc import Callable
from pathlib import Path
from typing import Any

from probe import spans
from probe.samplers.torch_windows import SpanRanges, start_kineto_window


def record_function_domain() -> SpanRanges:
    """Spans as torch's older range, as ``_torch_ranges`` falls back to it."""
    import torch

    enter_new = torch.ops.profiler._record_function_enter_new
    return SpanRanges(
        None,
        enter=lambda name: enter_new(name, None),
        exit_=torch.ops.profiler._record_function_exit._RecordFunction,
    )


def best_ns(fn: Callable[[], None], number: int, repeat: int, recorder: Any) -> float:
    best = float("inf")
    for _ in range(repeat):
        best = min(best, timeit.timeit(fn, number=number) / number * 1e9)
        recorder.drain()
    return best


def main() -> None:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--number", type=int, default=2000)
    p.add_argument("--repeat", type=int, default=7)
    args = p.parse_args()

    @spans.stage("bench")
    def staged() -> None:
        pass

    recorder = spans.SpanRecorder()
    figures: dict[str, float] = {}
    spans.activate(recorder)
    try:
        figures["no window"] = best_ns(staged, args.number, args.repeat, recorder)
        settings: dict[str, Any] = {
            "window, C++ range (probe's)": None,  # the window's own SpanRanges
            "window, record_function's ops": record_function_domain(),
            "window, no range": "none",
        }
        with tempfile.TemporaryDirectory() as tmp:
            for k, (name, domain) in enumerate(settings.items()):
                window = start_kineto_window()
                try:
                    if domain == "none":
                        spans.set_range_domain(None)
                    elif domain is not None:
                        spans.set_range_domain(domain)
                    figures[name] = best_ns(staged, args.number, args.repeat, recorder)
                finally:
                    window.save(Path(tmp) / f"w{k}.json")
    finally:
        spans.activate(None)
    base = figures["no window"]
    print(f"a @stage call, recording on; best of {args.repeat} x {args.number} calls:")
    for name, ns in figures.items():
        extra = "" if name == "no window" else f"  (+{(ns - base) / 1e3:.2f} us)"
        print(f"  {name:32s} {ns / 1e3:6.2f} us{extra}")


if __name__ == "__main__":
    main()
