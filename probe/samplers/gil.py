"""The GIL switch interval while profiling: very short while the sampler is the only
thread asking the target for the GIL, longer while the target's threads pass it among
themselves.

The sampler needs the GIL to read stacks. At CPython's 5 ms switch interval it waits up to
5 ms while the target runs pure Python, and samples pile up at the next GIL-releasing
call (README, "Sampling bias": on ``healthy_service.py`` a 33% Python stage came out at
2% at 1 ms, 28% at 0.1 ms). So ``probe run`` shortens the interval to 0.1 ms, which costs
a service with one busy Python thread ~100 hand-overs a second.

It costs far more where the target's own threads contend for the GIL: every thread that
wants it now gets it within 0.1 ms, so a producer handing items to consumers through a
``queue.Queue`` wakes a consumer for each item instead of letting items accumulate, and
threads waiting for the GIL wake every 0.1 ms to ask for it (their CPU clocks count it).
Measured on ``tests/threads_corpus/services/ingest_pipeline.py`` (one producer, four
consumers), wall time over plain Python with the interval set and nothing else: 2.0-2.1x
at 0.1 ms, 1.3x at 1 ms. Under ``probe run`` at a fixed 0.1 ms: ~2.1x.

The target's own 5 ms is no answer: a producer and a consumer hand the GIL over where
one blocks on the queue, and at 5 ms the sampler waits for those hand-overs, so samples
land on the consumer's ``Queue.get`` instead of its work (``render_queue.py``: its
``render_page`` fell from ~85% of the path to 55%, its loop read as 39% "native"). At
1 ms the verdicts of all three contended corpus cases held (ingest_pipeline,
render_queue, tokenize_pool), at 1.05-1.4x plain (0.1 ms: up to 2.1x).

So the interval follows the contention the sampler sees. The contention is measured only
at the short interval (at a longer one, threads that would wait for the GIL wait instead
on the locks of the queues they share, and the measure flips). After a window of ticks in
which most had a target thread waiting for the GIL while another of its threads ran, the
interval goes to ``contended_s`` (never longer than the target's own) for a dwell, then
is short for one window to measure again; each time contention is confirmed the dwell
doubles (up to a cap), so a long run of a contended service spends a shrinking share of
its time at the costly setting. ``figures()`` says how long each was in effect, for
meta.json.

Where the sampler reads the stacks at its tick (``probe.samplers.peek``: frames, CPU
clocks and kernel states at one instant, before it asks for the GIL), the instant the
GIL comes no longer places a sample, and the target's own interval let a one-thread
loop keep ~1% more of its throughput (``benchmarks/switch_interval_cost.py``) -- mostly by
sampling ~30% less often: at 5 ms the sampler waits up to 5 ms a tick for the GIL (66
against 95 samples a second, 2026-11-29), and where the target's threads hand the GIL to
each other it loses most of its ticks (``analyzers.diagnosis.ticks_taken``). It is not
the default (``render_queue.py``'s lock finding: 5 failures in 20 of its test
at 5 ms, none in 14 at 0.1 ms, 2026-11-29). Making it safe took more than the stacks:
the CPU clocks and kernel states read at the tick too; threads born since the last tick
read at it, and a thread read there that ends before the GIL comes kept; each thread's
own CPU reading at its end (``probe.samplers.thread_ends``); and, in the rules, waits
for the GIL read as waits for the core where the process has one core only (README,
"The interval left alone where the stacks are read at the tick", for what failed
without each).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

__all__ = ["SwitchInterval", "SwitchSettings"]


@dataclass(frozen=True)
class SwitchSettings:
    # A quarter second of ticks at the default 100 Hz: enough ticks to tell 70-95% from
    # 0% (contended_share), short enough that a 2-s run is not spent mostly at the
    # costly setting (a 100-tick window left ingest_pipeline 1.6x slower, not ~1.2x).
    # Ticks, not seconds: where the sampler's ticks are spaced out for their cost
    # (Settings.sampler_share: ~30 ms apart with 35 threads) a window lasts longer.
    window_ticks: int = 25
    # The target's threads contend in most ticks (at 0.1 ms: ingest_pipeline 71% of
    # ticks, tokenize_pool 95%, render_queue 87%; a single-threaded service 0%;
    # checksum_batch, one busy thread handing 1 record in 50 to a pool, 40%).
    contended_share: float = 0.5
    # The interval while the target's threads contend (see the module docstring).
    contended_s: float = 0.001
    # Windows at the contended interval before measuring again: 1 s at first,
    # doubling while the contention lasts, at most 32 s (a 0.25-s window at the costly
    # setting then costs under 1% of the run).
    first_dwell: int = 4
    max_dwell: int = 128


class SwitchInterval:
    """Sets the process's GIL switch interval from the sampler's ticks; see the module
    docstring. ``short_s`` is ``probe run``'s interval, ``own_s`` the target's (the
    contended interval never exceeds it)."""

    def __init__(
        self,
        short_s: float,
        own_s: float,
        *,
        settings: SwitchSettings = SwitchSettings(),
        set_interval: Callable[[float], None] = sys.setswitchinterval,
    ) -> None:
        self.short_s, self.own_s = short_s, own_s
        self.settings = settings
        self._set = set_interval
        self.contended = False
        self._ticks = self._contended_ticks = 0
        self._windows_left = 0  # at the contended interval: windows until measuring
        self._dwell = settings.first_dwell
        self.ticks_at = {"short": 0, "contended": 0}
        self.changes = 0

    @property
    def contended_interval_s(self) -> float:
        return max(self.short_s, min(self.own_s, self.settings.contended_s))

    def start(self) -> None:
        self._set(self.short_s)

    def tick(self, contended: bool) -> None:
        """One sampler tick: did a target thread wait for the GIL while another ran?"""
        self.ticks_at["contended" if self.contended else "short"] += 1
        self._ticks += 1
        self._contended_ticks += contended
        if self._ticks < self.settings.window_ticks:
            return
        share = self._contended_ticks / self._ticks
        self._ticks = self._contended_ticks = 0
        if self.contended:
            self._windows_left -= 1
            if self._windows_left <= 0:
                self._change(contended=False)  # measure again
        elif share >= self.settings.contended_share:
            self._windows_left = self._dwell
            self._dwell = min(2 * self._dwell, self.settings.max_dwell)
            self._change(contended=True)
        else:
            self._dwell = self.settings.first_dwell

    def _change(self, *, contended: bool) -> None:
        self._set(self.contended_interval_s if contended else self.short_s)
        self.contended = contended
        self.changes += 1

    def figures(self) -> dict[str, Any]:
        total = sum(self.ticks_at.values())
        return {
            "short_s": self.short_s,
            "contended_s": self.contended_interval_s,
            "own_s": self.own_s,
            "share_contended": round(self.ticks_at["contended"] / total, 3) if total else 0.0,
            "changes": self.changes,
        }
