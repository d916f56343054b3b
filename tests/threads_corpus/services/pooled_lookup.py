"""A FastAPI app served by uvicorn whose async route borrows a connection from a small
pool, nothing decorated.

``POST /predict`` (``async def``) asks a profile store for the text's first word over a
persistent connection borrowed from the app's pool (``ConnectionPool``: two open asyncio
stream connections on an ``asyncio.Queue``, as asyncpg's or an HTTP client's pool holds
them; the store is a separate process on 127.0.0.1 answering each line in ~25 ms), then
scores the text (~0.3 ms of Python). Eight clients, two connections: six requests at a
time wait for a connection to come back to the pool, and the server answers at most two
per 25 ms whatever the load.

``POOLED_LOOKUP_SIZE=8`` opens eight connections instead.

Truth, measured from outside (``pooled_lookup.truth.json``: ``python
tests/threads_corpus/measure.py --serve pooled_lookup``, 2026-12-04): the server's one
thread asleep in its selector (``do_epoll_wait``) at 87% of the readings, 0.11 cores;
py-spy's top on-CPU function ``EpollSelector.select``. ``drive.py``'s 8 clients for 5 s got
382-388 answers, and 1,481-1,484 with eight connections (two alternated pairs, plain
uvicorn, no probe): 3.84x.

    python -m uvicorn pooled_lookup:app --port 8000
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI, Request

POOL_SIZE = int(os.environ.get("POOLED_LOOKUP_SIZE", "2"))
STORE = """
import json, socketserver, time

class Profiles(socketserver.StreamRequestHandler):
    def handle(self):
        for line in self.rfile:
            time.sleep(0.025)
            self.wfile.write(json.dumps({"weight": len(line) % 7 / 7.0}).encode() + b"\\n")

class Store(socketserver.ThreadingTCPServer):
    daemon_threads = True

with Store(("127.0.0.1", 0), Profiles) as store:
    print(store.server_address[1], flush=True)
    store.serve_forever()
"""


class ConnectionPool:
    """Open connections to the store, lent one request at a time."""

    def __init__(self) -> None:
        self.idle: asyncio.Queue[tuple[asyncio.StreamReader, asyncio.StreamWriter]] = (
            asyncio.Queue()
        )

    async def open(self, port: int, size: int) -> None:
        for _ in range(size):
            self.idle.put_nowait(await asyncio.open_connection("127.0.0.1", port))

    async def lookup(self, key: str) -> dict[str, float]:
        reader, writer = await self.idle.get()
        try:
            writer.write(key.encode() + b"\n")
            await writer.drain()
            return json.loads(await reader.readline())
        finally:
            self.idle.put_nowait((reader, writer))

    async def close(self) -> None:
        while not self.idle.empty():
            _, writer = self.idle.get_nowait()
            writer.close()


@asynccontextmanager
async def lifespan(app: FastAPI) -> AsyncIterator[None]:
    store = subprocess.Popen([sys.executable, "-c", STORE], stdout=subprocess.PIPE, text=True)
    pool = ConnectionPool()
    try:
        await pool.open(int(store.stdout.readline()), POOL_SIZE)  # type: ignore[union-attr]
        app.state.pool = pool
        yield
    finally:
        await pool.close()
        store.terminate()
        store.wait()


app = FastAPI(lifespan=lifespan)


def score(text: str, weight: float) -> float:
    total = 0.0
    for i, ch in enumerate(text[:400]):
        total += (ord(ch) * (i + 1)) % 13
    return total * weight


@app.post("/predict")
async def predict(request: Request) -> dict[str, float]:
    body = await request.json()
    text = body["text"]
    profile = await request.app.state.pool.lookup(text.split(" ", 1)[0])
    return {"score": score(text, profile["weight"])}
