"""Reading other threads' frames with the cyclic garbage collector held off.

On CPython 3.11, reading the frames of the target's threads from the sampler thread --
``sys._current_frames()`` and a walk up ``f_back``, or a coroutine's ``cr_frame`` --
crashed a thread-per-request server (Flask on werkzeug's threaded server, a thread per
request: ``tests/threads_corpus/services/search_flask.py``) with SIGSEGV. The same
crash is reported against other in-process profilers on 3.11 (sentry-python #2386 and
#6119, dd-trace-py #13567: a frame read in ``PyFrame_GetBack``). A collection that
starts while such a read is under way is the trigger here; measured with a 20-line
walker of ``sys._current_frames()`` every 10 ms inside that server under 8 clients for
6 s: 6 crashes in 7 runs, 0 in 7 with the collector disabled around each read. Under
``probe run`` the same load: 3 crashes in 4 runs before, 0 in 35 with the stack and task
samplers' reads inside ``collector_held_off``.

The collector is only held off: allocations made meanwhile still count, and the
collection they call for runs at the first allocation after the read (a tick's read
takes ~0.1 ms). A target that disabled the collector itself keeps it disabled. A target
thread that toggles it during a read loses that toggle; reads are short and the toggle
is rare (test suites, batch jobs' setup), so that is accepted.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["collector_held_off"]


@contextmanager
def collector_held_off() -> Iterator[None]:
    """No cyclic collection starts inside the block (in any thread)."""
    was_enabled = gc.isenabled()
    if was_enabled:
        gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()
