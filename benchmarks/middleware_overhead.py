"""What probe's request middleware costs a 1-ms route (issue 16's bar: at most 2%).

A FastAPI app with one async route that spins 1 ms of CPU is called in-process through
ASGI, the way uvicorn calls it (a fresh scope, receive and send per request), with a span
recorder active: bare, then wrapped in ``probe.serving.asgi.RequestSpans``, alternating
in rounds within one run. Printed: each round's median request time both ways and their
ratio, and the median ratio. In-process on purpose: the middleware's cost is in the
process; over a socket the same difference drowns in the network's jitter.

    python benchmarks/middleware_overhead.py [--rounds 7] [--requests 300]
    python benchmarks/middleware_overhead.py --noop --requests 3000

``--noop``: a route that answers at once instead, each request carrying the request id
header ``probe load`` sends, and the difference printed in microseconds: the
middleware's own cost a request, where a change to it shows (run this code and the
code before it in turn; in-process the caches stay warm, so a served server pays more).

Needs fastapi.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time

from fastapi import FastAPI

from probe import spans
from probe.serving.asgi import RequestSpans
from probe.serving.routes import ID_HEADER

app = FastAPI()


@app.get("/work")
async def work() -> dict:
    deadline = time.perf_counter() + 0.001
    while time.perf_counter() < deadline:
        pass
    return {}


@app.get("/noop")
async def noop() -> dict:
    return {}


SCOPE = {
    "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "GET",
    "scheme": "http", "path": "/work", "raw_path": b"/work", "query_string": b"",
    "root_path": "", "headers": [], "client": ("127.0.0.1", 5000),
    "server": ("127.0.0.1", 8000),
}  # fmt: skip


def noop_scope() -> dict:
    """A request to the no-op route, with the id header ``probe load`` sends."""
    headers = [(b"host", b"127.0.0.1:8000"), (ID_HEADER.encode(), b"c1-1")]
    return {**SCOPE, "path": "/noop", "raw_path": b"/noop", "headers": headers}


async def requests(target, n: int, scope: dict = SCOPE) -> float:
    """The median seconds of ``n`` requests through ``target``."""

    async def receive() -> dict:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: dict) -> None:
        pass

    took = []
    for _ in range(n):
        started = time.perf_counter()
        await target(dict(scope), receive, send)
        took.append(time.perf_counter() - started)
    return statistics.median(took)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--requests", type=int, default=300)
    parser.add_argument(
        "--noop", action="store_true", help="a route that answers at once; print the us added"
    )
    args = parser.parse_args()
    recorder = spans.SpanRecorder()
    spans.activate(recorder)
    wrapped = RequestSpans(app)
    scope = noop_scope() if args.noop else SCOPE
    ratios, added_us = [], []
    print("round  bare_ms  wrapped_ms  ratio  added_us")
    for n in range(args.rounds):
        bare = asyncio.run(requests(app, args.requests, scope))
        with_spans = asyncio.run(requests(wrapped, args.requests, scope))
        recorder.drain()
        ratios.append(with_spans / bare)
        added_us.append((with_spans - bare) * 1e6)
        print(
            f"{n:5d}  {bare * 1e3:7.3f}  {with_spans * 1e3:10.3f}  {ratios[-1]:.4f}"
            f"  {added_us[-1]:8.2f}"
        )
    bar = "" if args.noop else " (bar: at most 1.02)"
    print(f"median ratio {statistics.median(ratios):.4f}{bar}")
    print(f"median added {statistics.median(added_us):.2f} us a request")


if __name__ == "__main__":
    main()
