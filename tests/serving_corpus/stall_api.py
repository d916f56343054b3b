"""A FastAPI app for the load driver's honesty tests: ``GET /sleep`` awaits 20 ms,
``GET /noop`` answers at once (the driver's and the server's own overhead), and
``POST /stall`` blocks the event loop for a second with a sync sleep inside an async
route (the classic mistake): every request due meanwhile waits for it. ``GET /linger``
awaits half a second: a request surely open on the server when a stall sent 0.2 s after
it begins (the 20-ms ``/sleep`` of a client looping on it may be between requests then,
its next one waiting unread in the socket for the stall to end).

Truth by construction (the sleeps), and measured: ``python -m uvicorn stall_api:app
--app-dir tests/serving_corpus --port 8793`` driven by ``probe load
http://127.0.0.1:8793/sleep --rate 20 -d 3`` (and ``/noop``), alternately, twice: /sleep's
p50 22.7 and 22.8 ms, /noop's 2.0 and 2.1 ms (2026-11-24, the 2-core machine class, with
a test suite running beside it): 20 ms plus the overhead, within 4%.
"""

from __future__ import annotations

import asyncio
import time

from fastapi import FastAPI

app = FastAPI()


@app.get("/sleep")
async def sleep() -> dict:
    await asyncio.sleep(0.02)
    return {"slept_ms": 20}


@app.get("/noop")
async def noop() -> dict:
    return {}


@app.get("/linger")
async def linger() -> dict:
    await asyncio.sleep(0.5)
    return {"slept_ms": 500}


@app.post("/stall")
async def stall() -> dict:
    time.sleep(1.0)  # blocks the loop: the point of this route
    return {"stalled_s": 1.0}
