"""The ``probe`` command (``probe.cli.verbs``: the group and ``main``).

This package imports nothing itself: ``python -m probe.cli.sidecar`` and
``probe.cli.finisher``, the helper processes ``probe run`` starts beside every target,
import it first, and click with the verbs cost them ~25 ms of a short run's end.
``cli`` and ``main`` are loaded from ``probe.cli.verbs`` when asked for.
"""

from __future__ import annotations

from typing import Any

__all__ = ["cli", "main"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from probe.cli import verbs

        return getattr(verbs, name)
    raise AttributeError(f"module 'probe.cli' has no attribute {name!r}")
