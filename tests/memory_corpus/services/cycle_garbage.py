"""A request handler whose per-request state sits in a reference cycle (a session that
points at its handler, which points back), each holding a 4 KB response buffer; the
last 2,000 sessions are kept for a "recent requests" view, so a session lives through
the young collections and is promoted to the oldest generation before it is dropped.
There it is garbage that only a full collection frees, and CPython makes one only after
ten collections of the middle generation (each after ten of the youngest, each after
700 more container objects made than freed): with eleven containers kept a request,
about every 6,400 requests: measured with ``gc.callbacks`` in a 40-s run, the first at
14.7 s, the next 18.6 s later. Undecorated. Not a leak.

What it looks like: RSS, the bytes malloc holds and Python's live blocks all climb
steadily with the requests for tens of seconds, then fall at each full collection --
a short run sees a steady climb, the shape of a leak (``search_flask.py`` has the same
cause with SQLite connections).

Truth: no leak (record.py --verify, a 15x longer run, 150 s: RSS climbs through the
first two full passes, then holds at 84-91 MiB from ~37 s to the end, its floor back at
84 MiB after each pass).
"""

from __future__ import annotations

import argparse
import time
from collections import deque


class Session:
    def __init__(self, request_id: int) -> None:
        self.request_id = request_id
        self.handler = Handler(self)
        self.response = bytearray(4_096)
        self.parts = [[k] for k in range(8)]  # the parsed request: small containers


class Handler:
    def __init__(self, session: Session) -> None:
        self.session = session  # the cycle: session -> handler -> session


def handle(request_id: int, vocabulary: dict[str, int]) -> int:
    session = Session(request_id)
    words = [f"w{(request_id * 7 + k) % 200_000}" for k in range(40)]
    score = sum(vocabulary.get(w, 0) for w in words)
    session.response[:8] = score.to_bytes(8, "little")
    RECENT.append(session)
    return score


RECENT: deque[Session] = deque(maxlen=2_000)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--seconds", type=float, default=10.0)
    args = p.parse_args()
    vocabulary = {f"w{i}": i for i in range(200_000)}
    end = time.monotonic() + args.seconds
    i = 0
    while time.monotonic() < end:
        handle(i, vocabulary)
        i += 1
        time.sleep(0.002)  # the upstream call a request waits on
    print(f"{i} requests", flush=True)


if __name__ == "__main__":
    main()
