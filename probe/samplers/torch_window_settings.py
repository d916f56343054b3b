"""How many torch.profiler windows ``probe run`` takes, how long, how often
(``probe.samplers.torch_windows``): a module of its own, so that ``probe run``'s options,
whose defaults these are, do not import the collector before its helpers start."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["TorchWindowSettings"]


@dataclass(frozen=True)
class TorchWindowSettings:
    windows: int = 3  # 0: no windows
    # Closing a window costs ~20 us an event with the GIL held (torch builds, formats and
    # frees each one: malloc and page faults ~30%, metadata strings ~10%; perf, /tmp
    # experiment 2026-11-28), so the length is the cost. The decoder's 1,000 requests,
    # 5 rounds of 3 windows each (benchmarks/torch_service_cost.py --window, 2026-11-28):
    # closing a 0.1-s window stopped it 0.39-0.80 s (median 0.54), a 0.05-s one
    # 0.20-0.38 s (0.30), a 0.03-s one 0.19-0.32 s (0.24: a fixed part is left). The
    # kv_cache estimate within 25% of its realisation in 3 of 3 rounds at 0.1 s and 0.05
    # s, 2 of 3 at 0.03 s (benchmarks/kv_cache_estimate.py, same day). But the
    # inference_runtime estimate read low from 0.05-s windows of staged_mlp.py (1.43-1.68x
    # against 2.4-2.6x realised; its integration test failed 3 of 9 runs and a clean-clone
    # CI run, and passed 3 of 3 at 0.1 s, same host, same hour): so 0.1 s stays.
    window_s: float = 0.1
    # After the first forward pass: a model's first calls allocate, autotune and fill
    # caches (the trace diagnosis calls a window dominated by that warm-up, not steady).
    warmup_s: float = 1.0
    every_s: float = 10.0  # the least time from one window's start to the next
    # A window whose target runs a tenth of a core or less closes at this many times
    # ``window_s`` with what it has: a bound chosen (not measured) so that a service idle
    # between requests cannot keep the profiler on for long.
    longest: float = 10.0
    # After a window short of the target's work (``torch_windows.SHORT_OF_WORK``): when the
    # next opens, instead of ``every_s``. Chosen, not measured: a host stall that left a
    # window with 5 ms of the decoder's CPU ended within 4 s (a CI run, 2026-12-03), and a
    # run of ~13 s then still gets a window of the target's work.
    retry_s: float = 1.0
    # Of the time since the first window opened, what the windows may cost (the next one
    # counted before it opens): what issue 15's 5% for the whole default collection
    # leaves once the rest is paid -- with windows off, probe kept 0.964 of the decoder
    # loop's throughput (benchmarks/torch_service_cost.py, 2026-11-26), so 1.5%. At 5%
    # alone the windows took the whole bar (3 windows on a 45-s run, 2026-11-28).
    budget: float = 0.015
