"""Timed calls of a model stage at several batch sizes.

The sizes are timed in passes, each visiting every size in turn, and a size's latency is
the least of its passes' medians (``analyzers.batching.batch_curve``): a host slows down
for seconds at a time, and a size timed in one stretch took a slow spell whole -- on a
2-core host of this kind one sweep read batch 128 at 7.1 ms a call between 64 at 2.4 ms
and 256 at 8.9 ms, and another read batch 64 23% slower than the sweep before
(2026-11-28); spread over passes, a spell slows one pass of a size, not its figure.

At each pass a size gets warm-up calls first (lazy initialisation, allocator growth and
autotuning belong to no steady state; another size's calls came between), then calls
until its share of ``min_time_s`` has passed and ``min_calls`` were made, or its share of
``max_calls`` were. A call's latency is its wall time; when the function put work on a
CUDA device, the device is synchronised before the clock stops, so the time is the work
the call launched (CUDA returns before its kernels finish). A size whose call runs out of
memory ends the sweep there, with a note; a function that fails on the first size is an
error. Interrupted (Ctrl-C) after the first size, the calls made are kept.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass
from time import perf_counter_ns
from typing import Any

import pandas as pd

from probe.errors import ProbeError

__all__ = ["DEFAULT_SIZES", "SweepSettings", "parse_sizes", "sweep"]

DEFAULT_SIZES = (1, 2, 4, 8, 16, 32, 64)


@dataclass(frozen=True)
class SweepSettings:
    sizes: tuple[int, ...] = DEFAULT_SIZES
    min_time_s: float = 0.5  # per size, all passes: ~50 calls of a 10-ms stage
    min_calls: int = 5  # per size and pass: a median
    max_calls: int = 2000  # per size, all passes
    warmup_calls: int = 3  # at each pass: torch's first calls allocate and pick kernels
    passes: int = 3


Progress = Callable[[int, int, list[float]], None]  # (pass from 0, size, its latencies)


def sweep(
    function: Callable[[Any], Any],
    make_batch: Callable[[int], Any],
    settings: SweepSettings = SweepSettings(),
    *,
    clock: Callable[[], int] = perf_counter_ns,
    progress: Progress | None = None,
) -> tuple[pd.DataFrame, list[str]]:
    """(one row per timed call: ``batch``, ``latency_s``, ``pass``; notes on where the
    sweep ended)."""
    rows: list[tuple[int, float, int]] = []
    notes: list[str] = []
    sizes = list(settings.sizes)
    for k in range(max(1, settings.passes)):
        for size in list(sizes):
            try:
                latencies = _timed_calls(function, make_batch(size), settings, clock)
            except KeyboardInterrupt:
                if not rows:
                    raise
                notes.append(_interrupted(size, k, settings.passes))
                return _frame(rows), notes
            except Exception as e:  # the user's code: anything it raises ends the sweep here
                why = _failure(size, e)
                if not rows:
                    raise ProbeError(why) from None
                notes.append(f"{why}: the sweep ends at the sizes before it")
                sizes = [b for b in sizes if b < size]
                rows = [row for row in rows if row[0] < size]
                break
            rows.extend((size, s, k) for s in latencies)
            if progress is not None:
                progress(k, size, latencies)
    return _frame(rows), notes


def _frame(rows: list[tuple[int, float, int]]) -> pd.DataFrame:
    return pd.DataFrame(rows, columns=["batch", "latency_s", "pass"])


def _interrupted(size: int, k: int, passes: int) -> str:
    if k == 0:
        return f"interrupted at batch {size}: the sweep ends at the sizes before it"
    return f"interrupted at batch {size} in pass {k + 1} of {passes}: each size keeps its passes"


def _timed_calls(
    function: Callable[[Any], Any], batch: Any, settings: SweepSettings, clock: Callable[[], int]
) -> list[float]:
    for _ in range(settings.warmup_calls):
        function(batch)
    synchronize = _device_synchronizer()
    synchronize()
    latencies: list[float] = []
    passes = max(1, settings.passes)
    budget_ns = int(settings.min_time_s * 1e9 / passes)
    most = max(settings.min_calls, settings.max_calls // passes)
    began = clock()
    while len(latencies) < most:
        start = clock()
        function(batch)
        synchronize()
        end = clock()
        latencies.append((end - start) / 1e9)
        if end - began >= budget_ns and len(latencies) >= settings.min_calls:
            break
    return latencies


def _device_synchronizer() -> Callable[[], None]:
    """torch.cuda.synchronize when the function has put work on a CUDA device (checked
    after the warm-up, which initialises it); otherwise nothing to wait for."""
    torch = sys.modules.get("torch")
    cuda = getattr(torch, "cuda", None)
    try:
        if cuda is not None and cuda.is_available() and cuda.is_initialized():
            return cuda.synchronize
    except Exception:  # a broken CUDA install: the host's clock is all there is
        pass
    return lambda: None


def _failure(size: int, error: BaseException) -> str:
    text = str(error).splitlines()[0] if str(error) else ""
    if isinstance(error, MemoryError) or "out of memory" in text.lower():
        return f"batch {size} ran out of memory"
    return f"the function raised {type(error).__name__} at batch {size}: {text}"[:300]


def parse_sizes(text: str) -> tuple[int, ...]:
    """``1,2,4,8`` or ``1-64`` (powers of two from the first to the last) -> sizes."""
    text = text.strip()
    if "-" in text and "," not in text:
        low, _, high = text.partition("-")
        first, last = _size(low), _size(high)
        sizes = _doubling(first, last)
    else:
        sizes = sorted({_size(part) for part in text.split(",") if part.strip()})
    if not sizes:
        raise ValueError("no batch sizes")
    return tuple(sizes)


def _size(text: str) -> int:
    value = int(text.strip())
    if not 1 <= value <= 1_000_000:
        raise ValueError(f"batch size {value} is not between 1 and 1000000")
    return value


def _doubling(first: int, last: int) -> list[int]:
    if last < first:
        raise ValueError(f"{first}-{last} runs backwards")
    sizes: list[int] = []
    size = first
    while size < last:
        sizes.append(size)
        size *= 2
    sizes.append(last)
    return sizes
