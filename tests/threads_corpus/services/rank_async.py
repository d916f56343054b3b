"""An asyncio job that ranks search candidates: for each query it asks a candidate store
(a separate process on 127.0.0.1, one line in, one JSON line out, ~20 ms an answer) for
the query's candidates, over a connection of its own (asyncio streams), then ranks them
in pure Python inside the same coroutine (``rank_query``), without handing the CPU work
to a thread or a process. Sixteen queries are in flight at a time (a semaphore).

Its bottleneck is the ranking: the store's waits overlap one another, but the ranking
runs on the event loop's one thread, so the loop is on a CPU almost all the time and
every other query's answer waits for it (loop lag). Truth, measured from outside:
``rank_async.truth.json`` (``python tests/threads_corpus/measure.py rank_async``).

    python rank_async.py [--queries 480]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys

STORE = """
import json, socketserver, time

class Candidates(socketserver.StreamRequestHandler):
    def handle(self):
        for line in self.rfile:
            time.sleep(0.020)
            seed = sum(line)
            rows = [[seed * k % 1009, k] for k in range(200)]
            self.wfile.write(json.dumps(rows).encode() + b"\\n")

class Store(socketserver.ThreadingTCPServer):
    daemon_threads = True
    request_queue_size = 64

with Store(("127.0.0.1", 0), Candidates) as store:
    print(store.server_address[1], flush=True)
    store.serve_forever()
"""


async def rank_query(port: int, query: str, slots: asyncio.Semaphore) -> list[int]:
    async with slots:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(query.encode() + b"\n")
        await writer.drain()
        candidates = json.loads(await reader.readline())
        writer.close()
        await writer.wait_closed()
    scored = []
    for score, doc in candidates:
        relevance = 0.0
        for term in range(150):
            relevance += ((score + term * doc) % 13) / (1 + term)
        scored.append((relevance, doc))
    scored.sort(reverse=True)
    return [doc for _, doc in scored[:10]]


async def rank_all(port: int, queries: int) -> list[list[int]]:
    slots = asyncio.Semaphore(16)
    jobs = [rank_query(port, f"query {i}", slots) for i in range(queries)]
    return await asyncio.gather(*jobs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--queries", type=int, default=480)
    args = parser.parse_args()
    store = subprocess.Popen([sys.executable, "-c", STORE], stdout=subprocess.PIPE, text=True)
    try:
        port = int(store.stdout.readline())  # type: ignore[union-attr]
        ranked = asyncio.run(rank_all(port, args.queries))
        print(f"{len(ranked)} queries ranked")
    finally:
        store.terminate()
        store.wait()


if __name__ == "__main__":
    main()
