"""A FastAPI app served by uvicorn that caps its calls to a profile store with a
semaphore, nothing decorated.

``POST /predict`` (``async def``) enters ``async with CALLS:`` (an ``asyncio.Semaphore``
of three, as a service protecting its upstream would) and, inside it, asks the store
for the text's first word (``fetch_profile``: a connection a call over asyncio streams;
the store is a separate process on 127.0.0.1 answering in ~25 ms), then scores the
text (~0.3 ms of Python). Eight clients, three calls out at once: the other requests
wait in the route for a permit.

``LIMITED_API_CALLS=8`` lets eight out at once.

Truth, measured from outside (``limited_api.truth.json``: ``python
tests/threads_corpus/measure.py --serve limited_api``, 2026-12-04): the server's one
thread asleep in its selector (``do_epoll_wait``) at 78% of the readings, 0.17 cores;
py-spy's top on-CPU function ``EpollSelector.select``. ``drive.py``'s 8 clients for 5 s got
529-542 answers, and 1,087-1,225 with eight permits (five alternated pairs, plain uvicorn,
no probe; two, then three more the same evening): 2.0-2.3x a pair, 2.17x on the totals
(2,682 against 5,813). The far end slows with eight calls out: each opens a connection,
which the store accepts on one thread and serves on a new one.

    python -m uvicorn limited_api:app --port 8000
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

CALLS = asyncio.Semaphore(int(os.environ.get("LIMITED_API_CALLS", "3")))
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


@asynccontextmanager
async def lifespan(app: FastAPI) -> AsyncIterator[None]:
    store = subprocess.Popen([sys.executable, "-c", STORE], stdout=subprocess.PIPE, text=True)
    try:
        app.state.port = int(store.stdout.readline())  # type: ignore[union-attr]
        yield
    finally:
        store.terminate()
        store.wait()


app = FastAPI(lifespan=lifespan)


async def fetch_profile(port: int, key: str) -> dict[str, float]:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(key.encode() + b"\n")
        await writer.drain()
        return json.loads(await reader.readline())
    finally:
        writer.close()


def score(text: str, weight: float) -> float:
    total = 0.0
    for i, ch in enumerate(text[:400]):
        total += (ord(ch) * (i + 1)) % 13
    return total * weight


@app.post("/predict")
async def predict(request: Request) -> dict[str, float]:
    body = await request.json()
    text = body["text"]
    async with CALLS:
        profile = await fetch_profile(request.app.state.port, text.split(" ", 1)[0])
    return {"score": score(text, profile["weight"])}
