"""A FastAPI app served by uvicorn that scores its requests in micro-batches, the way model
servers batch (Triton's dynamic batcher, TorchServe's ``batch_size`` and
``max_batch_delay``, Ray Serve's ``@serve.batch``), nothing decorated.

``POST /predict`` (``async def``) hashes the text's words into a feature row
(``featurize``), puts it on an ``asyncio.Queue`` with a future and awaits the future.
One batcher task, started with the app, takes the first request off the queue, then
more until it holds ``BATCH_MAX`` of them or ``BATCH_WAIT_MS`` have passed since the
first, and scores the batch at once with numpy (``score_batch``: two dense layers),
then answers each request's future. With 32 a batch and 30 ms, as a server sized for
heavier traffic would be set, eight clients never fill a batch: each batch holds the
eight requests within a few ms of its first and then waits out the rest of the window.

``BATCH_MAX=8`` closes a batch when the eight are in.

numpy runs on one BLAS thread (``OPENBLAS_NUM_THREADS=1``, set before it is imported,
as servers running a worker per core set it): eight rows are too few to share out, and
OpenBLAS's idle threads spin, a core's worth beside the loop (0.9 of a core in a first
measurement, which then competed with the fixed variant's loop for the host's two).

Truth, measured from outside (``batch_window_api.truth.json``: ``python
tests/threads_corpus/measure.py --serve batch_window_api``, 2026-12-07): the server's one
thread used 0.31 of a core and was asleep in its selector (``do_epoll_wait``) at 62% of
the readings; py-spy's top on-CPU function ``featurize``. Its variants (the same file,
plain uvicorn, no probe): ``BATCH_MAX=8`` answered 3.7-5.4x as many requests a pair, 4.5x
at the median of five; ``--workers 2`` 1.06-1.15x (each worker's batches hold its share
of the clients and wait out the same window).

Written before probe had a rule for it: probe read "CPU-bound in <library>" (asyncio's
socket sends, the loop's busy third; python or native, confidence 38-71%, two runs) and
proposed one instance per core at 1.80x.

    python -m uvicorn batch_window_api:app --port 8000
"""

from __future__ import annotations

import asyncio
import os
import zlib
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np  # noqa: E402  (after its thread count)
from fastapi import FastAPI, Request

BATCH_MAX = int(os.environ.get("BATCH_MAX", "32"))
BATCH_WAIT_S = float(os.environ.get("BATCH_WAIT_MS", "30")) / 1000
FEATURES = 512
_rng = np.random.default_rng(7)
W1 = _rng.standard_normal((FEATURES, 2048), dtype=np.float32) / 20
W2 = _rng.standard_normal((2048, 16), dtype=np.float32) / 40


def featurize(text: str) -> np.ndarray:
    row = np.zeros(FEATURES, dtype=np.float32)
    for word in text.lower().split():
        row[zlib.crc32(word.encode()) % FEATURES] += 1.0
    return row


def score_batch(rows: np.ndarray) -> np.ndarray:
    hidden = np.maximum(rows @ W1, 0.0)
    return (hidden @ W2).max(axis=1)


async def batcher(queue: asyncio.Queue[tuple[np.ndarray, asyncio.Future[float]]]) -> None:
    loop = asyncio.get_running_loop()
    while True:
        batch = [await queue.get()]
        deadline = loop.time() + BATCH_WAIT_S
        while len(batch) < BATCH_MAX:
            remaining = deadline - loop.time()
            if remaining <= 0:
                break
            try:
                batch.append(await asyncio.wait_for(queue.get(), remaining))
            except TimeoutError:
                break
        scores = score_batch(np.stack([row for row, _ in batch]))
        for (_, answer), value in zip(batch, scores, strict=True):
            answer.set_result(float(value))


@asynccontextmanager
async def lifespan(app: FastAPI) -> AsyncIterator[None]:
    app.state.queue = asyncio.Queue()
    task = asyncio.create_task(batcher(app.state.queue))
    try:
        yield
    finally:
        task.cancel()


app = FastAPI(lifespan=lifespan)


@app.post("/predict")
async def predict(request: Request) -> dict[str, float]:
    body = await request.json()
    answer: asyncio.Future[float] = asyncio.get_running_loop().create_future()
    await request.app.state.queue.put((featurize(body["text"]), answer))
    return {"score": await answer}
