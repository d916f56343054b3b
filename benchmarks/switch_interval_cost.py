"""What the stack sampler costs a one-thread request loop, at each GIL switch interval
(issue 17).

One process: the main thread runs requests in blocks of 0.25 s -- ``service_loop.py``'s
(json -> Python -> numpy -> post-process, undecorated; ``--loop service``) or
``tests/torch_corpus/decoder.py``'s generation without a KV cache (PyTorch CPU ops under
deep ``nn.Module`` stacks; ``--loop decoder``, needs torch) -- while a thread beside it runs
probe's ``StackSampler`` at 100 Hz under one of these settings, the blocks' order
shuffled each round so that the host's drift falls on all of them alike:

- ``none``: no sampler, the target's own 5-ms interval (the reference);
- ``short``: the sampler, the interval 0.1 ms (``probe run``'s default where the stacks
  are read with the GIL);
- ``held``: the sampler, 0.1 ms while it waits for the GIL and the target's own while its
  tick runs (a 0.1-ms interval cuts a ~85-us tick in two when the displaced thread asks
  for the GIL back: tried as a fix, 2026-11-26, and it bought nothing: 0.974-0.982
  against 0.978-0.991 for ``short`` over three runs of 100 rounds);
- ``own``: the sampler, the target's 5 ms throughout (``--switch-interval 0``; samples
  drift toward GIL-releasing calls: ``benchmarks/sampling_bias.py``);
- ``tick`` and ``tick_own``: as ``short`` and ``own``, the stacks read at the tick's
  instant (``probe.samplers.peek``: the sampler waits in C with the GIL released, reads
  the frames, then takes the GIL), as ``probe run`` samples where the reads are built
  (``tick``: its default there).

Prints each setting's median requests/s over ``none``'s, and the samples the sampler took
a second under it: a setting that makes the sampler wait longer for the GIL samples less
often (5 ms: ~66 a second against ~95 at 0.1 ms, 2026-11-29), which alone costs less.
Separate processes per setting (``throughput.py``) differ by +-4% run to run on this
machine class; blocks in one process resolve the 1-2% this is about.

    python benchmarks/switch_interval_cost.py [--rounds 100] [--loop service|decoder]
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

os.environ["OPENBLAS_NUM_THREADS"] = "1"
os.environ["SERVICE_LOOP_SPANS"] = "0"
HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import numpy as np  # noqa: E402
import service_loop  # noqa: E402

from probe.samplers.peek import TickPeek  # noqa: E402
from probe.samplers.stacks import StackSampler  # noqa: E402

SHORT_S, OWN_S = 0.0001, sys.getswitchinterval()
SETTINGS = ("none", "short", "held", "own", "tick", "tick_own")
BLOCK_S = 0.25


class Sampler:
    """The stack sampler at 100 Hz on a thread, under the setting in ``self.setting``."""

    def __init__(self) -> None:
        self.stacks = StackSampler()
        peek = TickPeek()
        self.at_tick = StackSampler(peek=peek) if peek.available else None
        self.setting = "none"
        self.ticks: dict[str, int] = {}  # samples taken under each setting
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def use(self, setting: str) -> None:
        self.setting = setting
        sys.setswitchinterval(SHORT_S if setting in ("short", "held", "tick") else OWN_S)

    def _run(self) -> None:
        while not self._stop.is_set():
            setting = self.setting
            if setting.startswith("tick") and self.at_tick is not None:
                if not self.at_tick.wait(0.01):
                    self.at_tick.sample()
                    self.ticks[setting] = self.ticks.get(setting, 0) + 1
                continue
            if self._stop.wait(0.01):
                break
            if self.setting == "held":
                sys.setswitchinterval(OWN_S)
                self.stacks.sample()
                sys.setswitchinterval(SHORT_S)
            elif self.setting != "none":
                self.stacks.sample()
            self.ticks[setting] = self.ticks.get(setting, 0) + (setting != "none")

    def __enter__(self) -> Sampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self.at_tick is not None:
            self.at_tick.wake()
        self._thread.join()
        sys.setswitchinterval(OWN_S)


def service_request() -> Callable[[], int]:
    """One pass over 8 of service_loop's requests; returns the requests done."""
    raws = service_loop.payloads()[:8]
    w = np.random.default_rng(0).standard_normal((128, 64)).astype(np.float32)
    state = np.zeros((4, 128), dtype=np.float32)

    def requests() -> int:
        for raw in raws:
            req = service_loop.decode(raw)
            service_loop.postprocess(
                req, service_loop.model(service_loop.preprocess(req), w, state)
            )
        return len(raws)

    return requests


def decoder_request() -> Callable[[], int]:
    """One generation of the decoder without a KV cache (~17 ms here)."""
    import torch

    sys.path.insert(0, str(HERE.parent / "tests" / "torch_corpus"))
    import decoder

    model = decoder.built()
    prompt = torch.randint(0, decoder.VOCAB, (1, decoder.PROMPT))

    def requests() -> int:
        with torch.no_grad():
            decoder.generate(model, prompt, False)
        return 1

    return requests


def requests_per_s(requests: Callable[[], int]) -> float:
    n, started = 0, time.perf_counter()
    end = started + BLOCK_S
    while time.perf_counter() < end:
        n += requests()
    return n / (time.perf_counter() - started)


def main() -> None:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--rounds", type=int, default=100)
    p.add_argument("--loop", choices=("service", "decoder"), default="service")
    args = p.parse_args()
    settings = [s for s in SETTINGS if not s.startswith("tick") or TickPeek().available]
    requests = service_request() if args.loop == "service" else decoder_request()
    requests()  # warm-up: first-call allocations
    rates: dict[str, list[float]] = {s: [] for s in settings}
    seconds = dict.fromkeys(settings, 0.0)
    with Sampler() as sampler:
        for _ in range(args.rounds):
            for setting in random.sample(settings, len(settings)):
                sampler.use(setting)
                time.sleep(0.02)  # the sampler's thread sees the new setting
                started = time.perf_counter()
                rates[setting].append(requests_per_s(requests))
                seconds[setting] += time.perf_counter() - started + 0.02
        ticks = dict(sampler.ticks)
    reference = statistics.median(rates["none"])
    print(f"{args.loop} loop, {args.rounds} rounds of {BLOCK_S}-s blocks, requests/s over none")
    print("(and the samples the sampler took a second: a setting that makes it wait longer")
    print("for the GIL samples less often, and costs less for that alone):")
    for setting in settings:
        rate = statistics.median(rates[setting])
        hz = ticks.get(setting, 0) / seconds[setting] if seconds[setting] else 0.0
        print(f"  {setting:8s} {rate / reference:.3f}  ({rate:,.0f} req/s, {hz:5.1f} samples/s)")


if __name__ == "__main__":
    main()
