"""Simulated memory series for the leak detector: the shapes a healthy service makes, and leaks.

One reading a second (the watchdog's default interval). Every series has i.i.d. noise
of +-5% of its base (uniform) on top of its shape. The non-leaking shapes:

* ``gc``: a saw-tooth -- memory climbs linearly by 2-20% of the base, then drops back
  (a collection or an arena released); period 10-120 s, jittered +-10% a cycle;
* ``cache``: a cache that fills linearly by 5-30% of the base, then is flushed;
  period 5-15 min;
* ``warmup``: growth of 10-50% of the base that plateaus, ``A (1 - exp(-t / tau))``
  with tau 2-20 min (imports, pools and caches reaching their working size);
* ``steps``: one to three one-off steps of 5-20% of the base (a model loaded, a pool
  resized), up or down, at least an hour apart;
* ``mixed``: all of the above at once.

``leak`` adds a linear leak of a given rate from a given onset to any of them.
Everything is drawn from ``numpy.random.default_rng(seed)``: a series is reproducible
from its kind and seed.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

MB = 1e6
KINDS = ("gc", "cache", "warmup", "steps", "mixed")


@dataclass(frozen=True)
class Series:
    kind: str
    seed: int
    t_s: np.ndarray
    bytes_: np.ndarray
    base: float


def _sawtooth(t: np.ndarray, rng: np.random.Generator, period: float, height: float) -> np.ndarray:
    """Linear climbs of ``height`` that drop to zero; each cycle's length jitters +-10%."""
    cycles = int(t[-1] / (period * 0.9)) + 2
    lengths = period * rng.uniform(0.9, 1.1, cycles)
    starts = np.concatenate([[-rng.uniform(0, period)], lengths]).cumsum()
    which = np.searchsorted(starts, t, side="right") - 1
    phase = (t - starts[which]) / lengths[np.minimum(which, cycles - 1)]
    return height * np.clip(phase, 0.0, 1.0)


def shape(kind: str, t: np.ndarray, base: float, rng: np.random.Generator) -> np.ndarray:
    """The noiseless non-leaking shape of one kind (bytes above the base)."""
    y = np.zeros_like(t)
    if kind in ("gc", "mixed"):
        y += _sawtooth(t, rng, rng.uniform(10, 120), rng.uniform(0.02, 0.20) * base)
    if kind in ("cache", "mixed"):
        y += _sawtooth(t, rng, rng.uniform(300, 900), rng.uniform(0.05, 0.30) * base)
    if kind in ("warmup", "mixed"):
        y += rng.uniform(0.10, 0.50) * base * (1 - np.exp(-t / rng.uniform(120, 1200)))
    if kind in ("steps", "mixed"):
        at = 3600.0
        for _ in range(int(rng.integers(1, 4))):
            at += rng.uniform(3600, 6 * 3600)
            if at >= t[-1]:
                break
            size = rng.uniform(0.05, 0.20) * base * rng.choice([-1.0, 1.0], p=[0.3, 0.7])
            y += np.where(t >= at, size, 0.0)
    return y


def make(
    kind: str,
    seed: int,
    *,
    hours: float = 24.0,
    base: float | None = None,
    interval_s: float = 1.0,
    leak_bytes_per_s: float = 0.0,
    leak_onset_s: float = 0.0,
) -> Series:
    rng = np.random.default_rng([KINDS.index(kind) if kind in KINDS else 99, seed])
    t = np.arange(0.0, hours * 3600.0, interval_s)
    b = base if base is not None else 300 * MB * rng.uniform(0.5, 2.0)
    y = b + (shape(kind, t, b, rng) if kind in KINDS else 0.0)
    y = y + leak_bytes_per_s * np.clip(t - leak_onset_s, 0.0, None)
    y = y + rng.uniform(-0.05, 0.05, len(t)) * b
    return Series(kind, seed, t, y, b)


def flat(seed: int, **kwargs: float) -> Series:
    """A flat 300 MB base with +-5% noise: the background the detection bar is stated on."""
    return make("flat", seed, base=300 * MB, **kwargs)


def served_ramp(
    seed: int,
    *,
    hours: float = 5.0,
    ttl_s: float = 600.0,
    session_bytes: float = 2_000.0,
    rates: tuple[float, float] = (50.0, 150.0),
    ramp: tuple[float, float] = (3600.0, 7200.0),
    leak_bytes_per_request: float = 0.0,
    leak_onset_s: float = 0.0,
) -> tuple[Series, np.ndarray]:
    """A served process on a flat 300 MB base (+-5% noise) whose requests come at
    ``rates[0]`` a second, then rise linearly to ``rates[1]`` over ``ramp`` (its start, its
    length: a morning's traffic), and which keeps every session for ``ttl_s`` (a store
    bounded in time: its size follows the rate). ``leak_bytes_per_request``: kept for
    good by every request from ``leak_onset_s`` on. (The series, the requests finished
    by each reading.)"""
    rng = np.random.default_rng([98, seed])
    t = np.arange(0.0, hours * 3600.0, 1.0)
    rate = rates[0] + (rates[1] - rates[0]) * np.clip((t - ramp[0]) / ramp[1], 0.0, 1.0)
    done = np.cumsum(rate)
    alive = done - np.interp(t - ttl_s, t, done, left=0.0)
    kept = done - np.interp(leak_onset_s, t, done)
    y = 300 * MB + session_bytes * alive + leak_bytes_per_request * np.clip(kept, 0.0, None)
    y = y + rng.uniform(-0.05, 0.05, len(t)) * 300 * MB
    return Series("served_ramp", seed, t, y, 300 * MB), done


def served_staircase(
    seed: int,
    *,
    ttl_s: float = 180.0,
    step_s: float = 150.0,
    rates: tuple[float, ...] = (20, 30, 40, 50, 60, 70, 80, 90),
    hold_s: float = 600.0,
    session_bytes: float = 9_500.0,
    creep: float = 0.07,
    creep_at_s: float = 600.0,
    kept_every: int = 0,
    native_bytes_per_request: float = 0.0,
) -> tuple[Series, np.ndarray, np.ndarray]:
    """``benchmarks/watch_ramp.py``'s store as its run at the defaults read it (2026-12-03,
    counted sessions against the RSS floors of ``probe watch``'s report): a served
    process of 47.6 MiB whose requests (Poisson) step through ``rates`` every ``step_s``,
    then hold ``hold_s``, keeping each session ``ttl_s``; its RSS a live session
    ``session_bytes`` (9.5 KB read there) until ``creep_at_s``, then ``creep`` more over
    150 s (there: to 10.2 KB, 7%, from 10 to 12.5 min); RSS never falls (the allocator reuses
    what expires) and moves by pages. Its live Python heap: 240,000 blocks and 125 a
    session (a dict, a list of 120 strings, a token), +-3,000. ``kept_every``: one
    session in that many never expires (a leak); ``native_bytes_per_request``: kept for
    good by each request outside Python's heap (a leak no block counts). (The series,
    the requests finished by each reading, the live blocks at each.)"""
    rng = np.random.default_rng([99, seed])
    t = np.arange(0.0, step_s * len(rates) + hold_s, 1.0)
    step = np.clip(((t - 14.0) // step_s).astype(int), 0, len(rates) - 1)  # launched at 14 s
    done = np.cumsum(rng.poisson(np.asarray(rates, float)[step])).astype(float)
    alive = done - np.interp(t - ttl_s, t, done, left=0.0)
    kept = np.floor(done / kept_every) if kept_every else 0.0
    per_session = session_bytes * (1.0 + creep * np.clip((t - creep_at_s) / 150.0, 0.0, 1.0))
    base = 47.6 * 2**20
    native = native_bytes_per_request * done
    y = np.maximum.accumulate(base + per_session * alive + session_bytes * kept + native)
    y = np.floor(y / 4096) * 4096
    blocks = 240e3 + 125 * (alive + kept) + rng.integers(-3000, 3000, len(t))
    return Series("served_staircase", seed, t, y, base), done, blocks
