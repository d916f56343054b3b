"""``batch_window_api`` with numpy's BLAS at its default, one thread per core: what a
service gets when nobody set ``OPENBLAS_NUM_THREADS``.

The batcher's products (8 rows at a time) are shared out to OpenBLAS's team, and between
batches its threads spin waiting for the next call instead of sleeping. Those threads are
not Python's: the interpreter does not know them, they hold no GIL, and they take a core
from the host all the same.

Truth, measured from outside (``batch_window_blas_api.truth.json``: ``python
tests/threads_corpus/measure.py --serve batch_window_blas_api``): see that file's
threads: the event loop's, and OpenBLAS's busy beside it.

Written before probe's capacity model left such threads out of the GIL's demand: it read
"bound by the GIL" at 163 requests/s with 191/s measured in the same run (the loop and
the spinning team's CPU counted as holding the interpreter, 5.81 ms a request in a first
run, session 88).

    python -m uvicorn batch_window_blas_api:app --port 8000
"""

from __future__ import annotations

import os

# set before batch_window_api imports numpy (it only sets one thread where none is set)
os.environ["OPENBLAS_NUM_THREADS"] = str(os.cpu_count() or 1)

from batch_window_api import app  # noqa: E402

__all__ = ["app"]
