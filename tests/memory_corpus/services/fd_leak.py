"""Each request opens a descriptor to write its audit line and never closes it (a raw
``os.open``, which no garbage collection closes): the process's open descriptors climb
by one a request, while its memory hardly moves (the kernel's file table holds them).

Truth, measured from outside without probe (``ls /proc/PID/fd`` and VmRSS every second
of a plain run, 2026-11-27): 5, 96, 193, 290, 388, 485 descriptors at 0-5 s, ~97 a
second (one a request); RSS 15.3 MiB from 1 s to the end, not a page more. At a soft
limit of 1,024 open files (most distributions' default) the process fails in ~10 s with
"Too many open files".
Written after the leak detector, as a case it was not designed for.
"""

from __future__ import annotations

import os
import time

from request_loop import run_requests


def handle(request_id: str) -> None:
    time.sleep(0.01)  # the upstream
    fd = os.open(os.devnull, os.O_WRONLY)
    os.write(fd, request_id.encode())  # never closed


def main() -> None:
    run_requests(handle, 600)


if __name__ == "__main__":
    main()
