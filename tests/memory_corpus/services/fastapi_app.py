"""A FastAPI app under uvicorn, driven by its own client threads on 127.0.0.1: memory
rises while imports, the event loop, the thread pool and HTTP connections warm up, then
holds. Undecorated. Not a leak (the issue's invented 283 KiB/s "leak" was this).

Run as a script: it starts uvicorn in-process (``uvicorn.run`` on port 0 is not
possible, so it binds a free port itself), drives ``POST /predict`` with 8 keep-alive
clients for ``--seconds``, then stops the server.

Truth: no leak (no state kept per request); over a 4x longer run RSS stays at the level
of its first seconds (record.py --verify). Needs fastapi and uvicorn.
"""

from __future__ import annotations

import argparse
import http.client
import json
import socket
import threading
import time

import uvicorn
from fastapi import FastAPI

app = FastAPI()


@app.post("/predict")
def predict(body: dict) -> dict:  # a sync route: runs on the thread pool
    values = body.get("values", [])
    norm = sum(v * v for v in values) ** 0.5 or 1.0
    features = [v / norm for v in values]
    return {"label": max(range(len(features)), key=features.__getitem__, default=0)}


def client(port: int, stop: threading.Event) -> None:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    body = json.dumps({"values": list(range(200))})
    while not stop.is_set():
        conn.request("POST", "/predict", body, {"Content-Type": "application/json"})
        conn.getresponse().read()


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--seconds", type=float, default=16.0)
    args = p.parse_args()
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.01)
    stop = threading.Event()
    clients = [threading.Thread(target=client, args=(port, stop)) for _ in range(8)]
    for c in clients:
        c.start()
    time.sleep(args.seconds)
    stop.set()
    for c in clients:
        c.join()
    server.should_exit = True
    thread.join(10)


if __name__ == "__main__":
    main()
