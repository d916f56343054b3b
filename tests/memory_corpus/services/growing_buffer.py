"""An audit trail kept in one bytearray, appended to on every request and never trimmed:
one object, so the gc counts and Python's live blocks stay flat, while the buffer (and
RSS) grows by ~12 KB a request.

Truth: leak, ~1.0-1.2 MB/s (by construction: ~12 KB a request at ~90 requests a second
behind a 10-ms upstream); ``record.py --verify`` checks it from outside. Written after the
detector, as a case it was not designed for (one growing object, realloc'd in place or
moved by mremap as it grows).
"""

from __future__ import annotations

import json
import time

from request_loop import run_requests

AUDIT = bytearray()


def handle(request_id: str) -> None:
    time.sleep(0.01)  # the upstream
    AUDIT.extend(json.dumps({"id": request_id, "payload": "x" * 12000}).encode())


def main() -> None:
    run_requests(handle, 900)


if __name__ == "__main__":
    main()
