"""A writer that buffers records (~12 KB each) and flushes them every 3 seconds: memory
climbs for 3 s, then drops back, a saw-tooth slower than a short run's bins.

Truth: no leak (by construction: the buffer is emptied at each flush, so its peak is the
same every period); ``record.py --verify`` checks it from outside over a run four times
as long. Written after the detector, as a case it was not designed for.
"""

from __future__ import annotations

import argparse
import time
import uuid

import probe

PENDING: list[dict[str, object]] = []
FLUSH_EVERY_S = 3.0


def handle(request_id: str, last_flush: float) -> float:
    time.sleep(0.01)  # the upstream
    PENDING.append({"id": request_id, "body": bytearray(12000)})
    if time.monotonic() - last_flush > FLUSH_EVERY_S:
        PENDING.clear()  # written out
        return time.monotonic()
    return last_flush


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--requests", type=int, default=900)
    args = p.parse_args()
    last_flush = time.monotonic()
    for _ in range(args.requests):
        rid = uuid.uuid4().hex
        with probe.request(id=rid):
            last_flush = handle(rid, last_flush)


if __name__ == "__main__":
    main()
