"""Whether a process is still there, and ending this one at once (stdlib only: the
collection side uses it too)."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from typing import NoReturn

__all__ = ["HELPER_ENV", "alive", "exit_after", "ignores"]

# In the environment of a process probe starts beside the target (the load driver, the
# finisher): the tree sampler leaves it out of the target's processes
HELPER_ENV = "PROBE_HELPER"


def alive(pid: int) -> bool:
    """True while ``pid`` runs (another user's process included: EPERM says it does). A
    zombie -- ended, its parent yet to reap it -- is not alive: ``probe run``'s load
    driver waited the full two minutes for a service to listen that had already ended,
    its parent (a test's ``communicate``, still reading pipes the driver held) not having
    reaped it (a clean-clone CI run, 2026-12-03)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return not _zombie(pid)


def _zombie(pid: int) -> bool:
    """True when /proc says ``pid`` is a zombie (state Z); False where unreadable."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            # the state follows the command name, which may hold spaces and parentheses
            return f.read().rsplit(b")", 1)[1].split()[0] == b"Z"
    except (OSError, IndexError):
        return False


def ignores(pid: int, signum: int) -> bool:
    """True when ``pid`` ignores ``signum`` (its disposition is SIG_IGN, as the kernel
    keeps it: /proc/PID/status's SigIgn mask). A process started in the background by a
    non-interactive shell (``cmd &``, ``nohup``) inherits SIGINT ignored, and a Python
    process then keeps it so: Ctrl-C sent to it does nothing. False where unreadable."""
    try:
        with open(f"/proc/{pid}/status", "rb") as f:
            for line in f:
                if line.startswith(b"SigIgn:"):
                    return bool(int(line.split()[1], 16) >> (signum - 1) & 1)
    except (OSError, ValueError, IndexError):
        pass
    return False


def exit_after(main: Callable[[list[str]], int]) -> NoReturn:
    """Run a helper process's ``main`` on its arguments and exit with its status without
    the interpreter's teardown: every file is closed and meta.json replaced atomically by
    then, and tearing down pandas/pyarrow costs ~150 ms that ``probe run`` waits for."""
    code = main(sys.argv[1:])
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
