"""The diagnosis' words: kinds and subkinds of limit, the components of a stage's time,
and how each is said and drawn. Every rule and every renderer reads them from here.

A stage's time splits into *components*: on-CPU interpreting Python (``python``), on-CPU
in native code (``native``), and waiting, by the run directory's wait reasons
(``probe.rundir.schema.WAIT_REASONS``). Runnable time that is not the GIL's (``unknown``:
the OS had no core for the thread) is CPU demand, not a wait of its own: it joins the
CPU components, so ``WAITS`` leaves it out.

The primary limit is a *kind* (``cpu``, ``gpu``, ``io``, ``contention``) and a *subkind*
naming what inside it limits (DESIGN.md, "Classification").
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from probe.rundir.schema import WAIT_REASONS

__all__ = [
    "COMPONENTS",
    "COMPONENT_COLOURS",
    "KINDS",
    "KIND_WORDS",
    "SUBKIND_WORDS",
    "WAITS",
    "confidence_words",
    "kind_words",
    "subkind_words",
]

WAITS = tuple(r for r in WAIT_REASONS if r != "unknown")
COMPONENTS = ("python", "native", *WAITS)

KINDS = ("cpu", "gpu", "io", "contention")

KIND_WORDS = {
    "cpu": "CPU-bound",
    "io": "I/O-bound",
    "gpu": "GPU-bound",
    "contention": "contention-bound",
}

SUBKIND_WORDS = {
    "python": "running Python bytecode",
    "gc": "in the garbage collector's collections",
    "native": "in native code",
    "gil": "waiting for the GIL",
    "network": "waiting on the network",
    "disk": "waiting on the disk",
    "sleep": "sleeping",
    "subprocess": "waiting on another process (a child, or the far end of a pipe)",
    "lock": "waiting on locks",
    "gpu_compute": "the GPU is busy computing",
    "gpu_starved": "the GPU waits for the CPU",
    "launch_bound": "kernel launches leave the GPU idle",
    "transfer": "waiting on host-device copies",
    "warm_up": "the traced window is mostly warm-up (allocation, module loading, context creation)",
}

# One colour per component, the same in every chart (matplotlib's tab10 order, so
# Python -- the usual culprit -- is red, waits are blues and purples).
COMPONENT_COLOURS = {
    "python": "#d62728",
    "native": "#ff7f0e",
    "network": "#1f77b4",
    "disk": "#17becf",
    "sleep": "#9edae5",
    "lock": "#9467bd",
    "subprocess": "#8c564b",
    "gpu_sync": "#2ca02c",
    "gil": "#e377c2",
    "unknown": "#c7c7c7",
}


def kind_words(kind: str) -> str:
    return KIND_WORDS.get(kind, kind)


def subkind_words(subkind: str) -> str:
    return SUBKIND_WORDS.get(subkind, subkind)


def confidence_words(confidence: float) -> str:
    """A confidence (0..1) as every report writes it: a whole percent, rounded down, so
    one a doubt lowered never reads 100% beside the doubt that lowered it (a 0.996 did,
    session_scores.py's verdict, 2026-12-05)."""
    return f"{math.floor(round(confidence * 100, 6)):.0f}%"


def speedup_range_words(stated: Sequence[float] | None) -> str:
    """A recommendation's ``evidence.speedup_range`` -- what such fixes realised, measured
    (``analyzers.recommendations``, ``analyzers.trace_fixes``) -- in the words every
    report uses ("" for none)."""
    if not stated:
        return ""
    return f"{stated[0]:.1f}–{stated[1]:.1f}× as such fixes go"
