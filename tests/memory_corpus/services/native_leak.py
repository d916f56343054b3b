"""A request handler that calls into C and leaks there: each request mallocs a 16 KiB
scratch buffer through ctypes, fills it, and never frees it. No Python object is kept:
the gc counts and Python's live blocks stay flat; only native memory grows.

Truth: leak, ~1.4-1.6 MB/s (by construction: 16 KiB a request, ~90 requests a second
behind a 10-ms upstream); ``record.py --verify`` checks it from outside (RSS over a run
four times as long). Written after the detector, as a case it was not designed for: every
leak before it kept Python objects or Python-allocated buffers.
"""

from __future__ import annotations

import ctypes
import time

from request_loop import run_requests

LIBC = ctypes.CDLL(None)
LIBC.malloc.restype = ctypes.c_void_p
LIBC.malloc.argtypes = [ctypes.c_size_t]
SCRATCH = 16 * 1024


def handle(request_id: str) -> int:
    time.sleep(0.01)  # the upstream
    buffer = LIBC.malloc(SCRATCH)
    ctypes.memset(buffer, 7, SCRATCH)  # touched: resident
    return sum(map(ord, request_id))  # the buffer is never freed


def main() -> None:
    run_requests(handle, 900)


if __name__ == "__main__":
    main()
