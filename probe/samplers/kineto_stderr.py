"""Kineto's own lines kept off the target's stderr while probe opens and closes a
torch.profiler window.

Each window made torch's profiler library print to the process's stderr (torch 2.13, CPU,
``probe run`` of ``tests/torch_corpus/decoder.py``, 2026-12-06): once a run,
``ERROR: External init callback must run in same thread as registerClient (A != B)``
(torch registers its Kineto client on the thread that imported it, and probe prepares the
profiler on a thread of its own; the client's init is skipped, nothing else is), and at
every window ``USDT:... profiler_start`` and ``... profiler_stop``. A service's operators
read an ERROR line on their service's stderr as a fault of their service; the lines are
probe's doing, so probe keeps them back. ``KINETO_LOG_LEVEL`` (set before the process
starts) silences neither.

They come from C++ writing to file descriptor 2, not through ``sys.stderr``, so for the
length of the profiler's calls (prepare and enable as a window opens, disable and save as
it closes: ~1 ms and ~0.4 s) descriptor 2 points at a temporary file; then it is put
back and everything written meanwhile is written to it, but Kineto's lines -- nothing of
anyone else's is lost, only delayed by the call's length. Since the closing runs without
the GIL (``probe._torchclose``), the target's Python threads may write in it too: their
lines come out up to ~0.4 s late, in their order, and a process killed by a signal in
those 0.4 s loses them (a temporary file, unlinked).
"""

from __future__ import annotations

import os
import re
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["kinetos_lines_held_back", "without_kinetos_lines"]

STDERR = 2
# the lines seen (module docstring), and torch 2.0-2.2's "STAGE:... ActivityProfilerController
# ... Completed Stage: Warm Up" lines of the same kind
_KINETOS = re.compile(
    rb"^(ERROR: External init callback must run in same thread as registerClient"
    rb"|USDT:.*\] profiler_(start|stop)\s*$"
    rb"|STAGE:.*ActivityProfilerController)"
)


def without_kinetos_lines(written: bytes) -> bytes:
    """``written`` less Kineto's lines (an unterminated last line kept as it is)."""
    return b"".join(line for line in written.splitlines(keepends=True) if not _KINETOS.match(line))


@contextmanager
def kinetos_lines_held_back(fd: int = STDERR) -> Iterator[None]:
    """Descriptor ``fd`` into a temporary file for the block, then back, with what was
    written in the meantime but Kineto's lines. Where ``fd`` cannot be duplicated (closed)
    or no temporary file can be made, the block runs with ``fd`` as it is."""
    try:
        saved = os.dup(fd)
    except OSError:
        yield
        return
    try:
        held = tempfile.TemporaryFile()
    except OSError:
        os.close(saved)
        yield
        return
    with held:
        os.dup2(held.fileno(), fd)
        try:
            yield
        finally:
            os.dup2(saved, fd)
            os.close(saved)
            held.seek(0)
            _write_all(fd, without_kinetos_lines(held.read()))


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        try:
            view = view[os.write(fd, view) :]
        except OSError:  # the descriptor's reader is gone: nothing left to keep it for
            return
