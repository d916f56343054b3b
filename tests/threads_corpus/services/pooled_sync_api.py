"""A FastAPI app served by uvicorn whose sync route borrows a connection from a small
pool, nothing decorated.

``POST /predict`` (a plain ``def``: Starlette runs it on its thread pool, up to 40
threads) asks a profile store for the text's first word over a socket borrowed from the
app's pool (``ConnectionPool``: two open connections on a ``queue.Queue``, as
SQLAlchemy's ``QueuePool`` or urllib3's blocking pool lend theirs; the store is a
separate process on 127.0.0.1 answering each line in ~25 ms), then scores the text
(~0.3 ms of Python). Eight clients, two connections: six request threads at a time
wait in the pool's ``get`` for a connection to come back.

``POOLED_SYNC_SIZE=8`` opens eight connections instead.

Truth, measured from outside (``pooled_sync_api.truth.json``: ``python
tests/threads_corpus/measure.py --serve pooled_sync_api``, 2026-12-04): the eight
request threads asleep at every reading, in a futex (the pool's condition) at 66-87% of
them and in the socket's read (``wait_woken``) at 13-34%: about three in line per one in
a call; 0.16 cores. ``drive.py``'s 8 clients for 5 s got 394-396 answers, and 1,417-1,462
with eight connections (two alternated pairs, plain uvicorn, no probe): 3.64x.

    python -m uvicorn pooled_sync_api:app --port 8000
"""

from __future__ import annotations

import json
import os
import queue
import socket
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI

POOL_SIZE = int(os.environ.get("POOLED_SYNC_SIZE", "2"))
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

    def __init__(self, port: int, size: int) -> None:
        self.idle: queue.Queue[tuple[socket.socket, object]] = queue.Queue()
        for _ in range(size):
            conn = socket.create_connection(("127.0.0.1", port))
            self.idle.put((conn, conn.makefile("rb")))

    def lookup(self, key: str) -> dict[str, float]:
        conn, replies = self.idle.get()
        try:
            conn.sendall(key.encode() + b"\n")
            return json.loads(replies.readline())  # type: ignore[attr-defined]
        finally:
            self.idle.put((conn, replies))

    def close(self) -> None:
        while not self.idle.empty():
            conn, _ = self.idle.get_nowait()
            conn.close()


@asynccontextmanager
async def lifespan(app: FastAPI) -> AsyncIterator[None]:
    store = subprocess.Popen([sys.executable, "-c", STORE], stdout=subprocess.PIPE, text=True)
    try:
        app.state.pool = ConnectionPool(int(store.stdout.readline()), POOL_SIZE)  # type: ignore[union-attr]
        yield
        app.state.pool.close()
    finally:
        store.terminate()
        store.wait()


app = FastAPI(lifespan=lifespan)


def score(text: str, weight: float) -> float:
    total = 0.0
    for i, ch in enumerate(text[:400]):
        total += (ord(ch) * (i + 1)) % 13
    return total * weight


@app.post("/predict")
def predict(body: dict) -> dict[str, float]:
    text = body["text"]
    profile = app.state.pool.lookup(text.split(" ", 1)[0])
    return {"score": score(text, profile["weight"])}
