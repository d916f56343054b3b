"""Timed calls of a model stage at several batch sizes.

Each size gets warm-up calls first (lazy initialisation, allocator growth and autotuning
belong to no steady state), then calls until ``min_time_s`` has passed and ``min_calls``
were made, or ``max_calls`` were. A call's latency is its wall time; when the function put
work on a CUDA device, the device is synchronised before the clock stops, so the time is
the work the call launched (CUDA returns before its kernels finish). A size whose call runs
out of memory ends the sweep there, with a note; a function that fails on the first size
is an error. Interrupted (Ctrl-C) after the first size, the sizes measured are kept.
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
    min_time_s: float = 0.5  # per size: ~50 calls of a 10-ms stage, a p99 from 100s below
    min_calls: int = 5
    max_calls: int = 2000
    warmup_calls: int = 3  # torch's first calls allocate and pick kernels


def sweep(
    function: Callable[[Any], Any],
    make_batch: Callable[[int], Any],
    settings: SweepSettings = SweepSettings(),
    *,
    clock: Callable[[], int] = perf_counter_ns,
    progress: Callable[[int, list[float]], None] | None = None,
) -> tuple[pd.DataFrame, list[str]]:
    """(one row per timed call: ``batch``, ``latency_s``; notes on where the sweep ended)."""
    rows: list[tuple[int, float]] = []
    notes: list[str] = []
    for size in settings.sizes:
        try:
            batch = make_batch(size)
            latencies = _timed_calls(function, batch, settings, clock)
        except KeyboardInterrupt:
            if not rows:
                raise
            notes.append(f"interrupted at batch {size}: the sweep ends at the sizes before it")
            break
        except Exception as e:  # the user's code: anything it raises ends the sweep here
            why = _failure(size, e)
            if not rows:
                raise ProbeError(why) from None
            notes.append(f"{why}: the sweep ends at the sizes before it")
            break
        rows.extend((size, s) for s in latencies)
        if progress is not None:
            progress(size, latencies)
    return pd.DataFrame(rows, columns=["batch", "latency_s"]), notes


def _timed_calls(
    function: Callable[[Any], Any], batch: Any, settings: SweepSettings, clock: Callable[[], int]
) -> list[float]:
    for _ in range(settings.warmup_calls):
        function(batch)
    synchronize = _device_synchronizer()
    synchronize()
    latencies: list[float] = []
    budget_ns = int(settings.min_time_s * 1e9)
    began = clock()
    while len(latencies) < settings.max_calls:
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
