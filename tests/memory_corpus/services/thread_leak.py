"""Each request hands a follow-up to a thread of its own, which waits on an event nobody
sets: the threads never end and pile up, one a request (~90 a second), each holding its
stack (glibc maps 8 MiB, a few pages of it touched) and its Thread object.

Truth: leak, ~1.6-1.8 MB/s (one thread a request kept forever: ~19 KiB each, measured as
RSS over threads from outside); ``record.py --verify`` checks it over a run four times
as long. Written after the detector, as a case it was not designed for: the memory is
thread stacks, neither Python's small objects nor malloc's bytes.
"""

from __future__ import annotations

import threading
import time

from request_loop import run_requests

NEVER = threading.Event()


def follow_up(request_id: str) -> None:
    NEVER.wait()  # the event nobody sets


def handle(request_id: str) -> None:
    time.sleep(0.01)  # the upstream
    threading.Thread(target=follow_up, args=(request_id,), daemon=True).start()


def main() -> None:
    run_requests(handle, 700)


if __name__ == "__main__":
    main()
