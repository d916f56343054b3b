"""What probe's request middleware costs a 1-ms route (issue 16's bar: at most 2%).

A FastAPI app with one async route that spins 1 ms of CPU is called in-process through
ASGI, the way uvicorn calls it (a fresh scope, receive and send per request), with a span
recorder active: bare, then wrapped in ``probe.serving.asgi.RequestSpans``, alternating
in rounds within one run. Printed: each round's median request time both ways and their
ratio, and the median ratio. In-process on purpose: the middleware's cost is in the
process; over a socket the same difference drowns in the network's jitter.

    python benchmarks/middleware_overhead.py [--rounds 7] [--requests 300]

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

app = FastAPI()


@app.get("/work")
async def work() -> dict:
    deadline = time.perf_counter() + 0.001
    while time.perf_counter() < deadline:
        pass
    return {}


SCOPE = {
    "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "GET",
    "scheme": "http", "path": "/work", "raw_path": b"/work", "query_string": b"",
    "root_path": "", "headers": [], "client": ("127.0.0.1", 5000),
    "server": ("127.0.0.1", 8000),
}  # fmt: skip


async def requests(target, n: int) -> float:
    """The median seconds of ``n`` requests through ``target``."""

    async def receive() -> dict:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: dict) -> None:
        pass

    took = []
    for _ in range(n):
        started = time.perf_counter()
        await target(dict(SCOPE), receive, send)
        took.append(time.perf_counter() - started)
    return statistics.median(took)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--requests", type=int, default=300)
    args = parser.parse_args()
    recorder = spans.SpanRecorder()
    spans.activate(recorder)
    wrapped = RequestSpans(app)
    ratios = []
    print("round  bare_ms  wrapped_ms  ratio")
    for n in range(args.rounds):
        bare = asyncio.run(requests(app, args.requests))
        with_spans = asyncio.run(requests(wrapped, args.requests))
        recorder.drain()
        ratios.append(with_spans / bare)
        print(f"{n:5d}  {bare * 1e3:7.3f}  {with_spans * 1e3:10.3f}  {ratios[-1]:.4f}")
    print(f"median ratio {statistics.median(ratios):.4f} (bar: at most 1.02)")


if __name__ == "__main__":
    main()
