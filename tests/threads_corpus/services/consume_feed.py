"""An asyncio job that takes items off a feed and looks each one up upstream, nothing
decorated: one producer coroutine reads the feed (a separate process on 127.0.0.1
streaming a line every ~8 ms, as a message queue's consumer or a paginated export would)
and puts each item on an ``asyncio.Queue``; eight consumer tasks take them off and ask an
upstream (a separate process, ~20 ms an answer) over a connection each (``consume``).

The feed's pace sets the run's length: the consumers, eight at ~20 ms an item, could
take an item every ~2.5 ms and wait for the next one most of the time.

Truth, measured from outside (``consume_feed.truth.json``: ``python
tests/threads_corpus/measure.py consume_feed``, 2026-12-04): the one thread asleep in its
selector (``do_epoll_wait``) at 89% of the readings, 0.05 cores. Plain runs, alternated
twice: 4.23-4.25 s as it comes; 4.21-4.22 s with the consumers' upstream instant
(``CONSUME_FEED_UPSTREAM_MS=0``): nothing; 1.45-1.55 s with the feed 4x faster
(``CONSUME_FEED_EVERY_MS=2``).

    python consume_feed.py [--items 500]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys

EVERY_MS = float(os.environ.get("CONSUME_FEED_EVERY_MS", "8"))
UPSTREAM_MS = float(os.environ.get("CONSUME_FEED_UPSTREAM_MS", "20"))
FEED = """
import socketserver, sys, time

class Feed(socketserver.StreamRequestHandler):
    def handle(self):
        for i in range(int(self.rfile.readline())):
            time.sleep(float(sys.argv[1]) / 1e3)
            self.wfile.write(f"item-{i}\\n".encode())
            self.wfile.flush()

with socketserver.TCPServer(("127.0.0.1", 0), Feed) as feed:
    print(feed.server_address[1], flush=True)
    feed.serve_forever()
"""
UPSTREAM = """
import json, socketserver, sys, time

class Lookup(socketserver.StreamRequestHandler):
    def handle(self):
        for line in self.rfile:
            time.sleep(float(sys.argv[1]) / 1e3)
            self.wfile.write(json.dumps({"item": line.decode().strip(), "ok": 1}).encode() + b"\\n")

class Upstream(socketserver.ThreadingTCPServer):
    daemon_threads = True

with Upstream(("127.0.0.1", 0), Lookup) as upstream:
    print(upstream.server_address[1], flush=True)
    upstream.serve_forever()
"""


async def produce(port: int, items: int, queue: asyncio.Queue[str | None]) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(f"{items}\n".encode())
    await writer.drain()
    while line := await reader.readline():
        await queue.put(line.decode().strip())
    writer.close()


async def consume(port: int, queue: asyncio.Queue[str | None], done: list[dict]) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    while (item := await queue.get()) is not None:
        writer.write(item.encode() + b"\n")
        await writer.drain()
        done.append(json.loads(await reader.readline()))
    writer.close()


async def run(feed: int, upstream: int, items: int) -> int:
    queue: asyncio.Queue[str | None] = asyncio.Queue()
    done: list[dict] = []
    consumers = [asyncio.create_task(consume(upstream, queue, done)) for _ in range(8)]
    await produce(feed, items, queue)
    for _ in consumers:
        await queue.put(None)
    await asyncio.gather(*consumers)
    return len(done)


def started(source: str, ms: float) -> tuple[subprocess.Popen, int]:
    child = subprocess.Popen(
        [sys.executable, "-c", source, str(ms)], stdout=subprocess.PIPE, text=True
    )
    return child, int(child.stdout.readline())  # type: ignore[union-attr]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=500)
    args = parser.parse_args()
    feed, feed_port = started(FEED, EVERY_MS)
    upstream, upstream_port = started(UPSTREAM, UPSTREAM_MS)
    try:
        print(asyncio.run(run(feed_port, upstream_port, args.items)), "items looked up")
    finally:
        for child in (feed, upstream):
            child.terminate()
            child.wait()


if __name__ == "__main__":
    main()
