"""A FastAPI app served by uvicorn whose async route calls a blocking client, nothing
decorated.

``POST /predict`` (``async def``) looks the text's first word up in a feature store
through a synchronous HTTP client (``FeatureStore.fetch``: ``urllib.request``, as a sync
database driver or ``requests.get`` would be; the store is a separate process on
127.0.0.1 started with the app, answering in ~20 ms, several requests at once), then
scores the text (~0.3 ms of Python). Inside a coroutine the blocking call holds the
event loop: every other request waits for it, so eight clients are served one at a time.

With ``LOOKUP_API_FIXED=1`` the route awaits the call on Starlette's thread pool
(``run_in_threadpool``), and the loop serves the others meanwhile.

Truth, measured from outside (``lookup_api.truth.json``: ``python
tests/threads_corpus/measure.py --serve lookup_api``, 2026-12-04): the server's one
thread asleep in the socket's read (``wait_woken``) at 86% of the readings, 0.1 cores;
py-spy's top on-CPU function ``SocketIO.readinto``. ``drive.py``'s 8 clients for 5 s got
232-238 answers, and 1,780-1,788 with the fix (two alternated pairs): 7.6x.

    python -m uvicorn lookup_api:app --port 8000
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.request
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI, Request
from starlette.concurrency import run_in_threadpool

FIXED = os.environ.get("LOOKUP_API_FIXED") == "1"
STORE = """
import json, time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

class Handler(BaseHTTPRequestHandler):
    def do_GET(self):
        time.sleep(0.020)
        body = json.dumps({"weight": len(self.path) % 7 / 7.0}).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass

server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
print(server.server_port, flush=True)
server.serve_forever()
"""


class FeatureStore:
    def __init__(self, port: int) -> None:
        self.base = f"http://127.0.0.1:{port}"

    def fetch(self, key: str) -> dict[str, float]:
        with urllib.request.urlopen(f"{self.base}/features/{key}") as response:
            return json.loads(response.read())


@asynccontextmanager
async def lifespan(app: FastAPI) -> AsyncIterator[None]:
    store = subprocess.Popen([sys.executable, "-c", STORE], stdout=subprocess.PIPE, text=True)
    try:
        app.state.store = FeatureStore(int(store.stdout.readline()))  # type: ignore[union-attr]
        yield
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
async def predict(request: Request) -> dict[str, float]:
    body = await request.json()
    text = body["text"]
    key = text.split(" ", 1)[0]
    store = request.app.state.store
    features = await run_in_threadpool(store.fetch, key) if FIXED else store.fetch(key)
    return {"score": score(text, features["weight"])}
