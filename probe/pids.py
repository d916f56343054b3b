"""Whether a process is still there (stdlib only: the collection side uses it too)."""

from __future__ import annotations

import os

__all__ = ["alive"]


def alive(pid: int) -> bool:
    """True while ``pid`` exists (another user's process included: EPERM says it does)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
