"""A FastAPI app served by uvicorn, unmodified (no probe import): two routes of opposite
kinds.

* ``POST /predict`` -- a sync route (Starlette runs it on AnyIO's worker threads): pure
  Python arithmetic, ``crunch``, ~2 ms of CPU a request.
* ``GET /items/{item_id}`` -- an async route: awaits a 10-ms sleep (a downstream call's
  stand-in), then answers 200, or 404 for item 13 (an HTTPException: a client error),
  or raises for item 666 (an unhandled error: uvicorn answers 500).

Truth, measured from outside probe (``shop_api.truth.md``, with how): the CPU route is
the one that loads the service's one GIL; the sleeping route is the slower one per
request but needs almost no CPU.

    python -m uvicorn shop_api:app --app-dir tests/serving_corpus --port 8000
"""

from __future__ import annotations

import asyncio

from fastapi import FastAPI, HTTPException

app = FastAPI()


def crunch(n: int) -> int:
    total = 0
    for i in range(n):
        total += i * i % 7
    return total


@app.post("/predict")
def predict(payload: dict) -> dict:
    return {"score": crunch(int(payload.get("n", 40_000)))}


@app.get("/items/{item_id}")
async def item(item_id: int) -> dict:
    await asyncio.sleep(0.01)
    if item_id == 13:
        raise HTTPException(status_code=404, detail="no such item")
    if item_id == 666:
        raise RuntimeError("item 666 is cursed")
    return {"id": item_id}
