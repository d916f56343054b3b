"""A FastAPI app served by uvicorn that batches its requests on a thread of its own, the
way hand-written model servers often do, nothing decorated.

``POST /predict`` is a plain ``def`` handler, so FastAPI runs it on its thread pool: it
hashes the text's words into a feature row (``featurize``, shared with
``batch_window_api``), puts it on a ``queue.Queue`` with a ``concurrent.futures.Future``
and waits for the future. One batcher thread, started with the app, takes the first row
off the queue, then more until it holds ``BATCH_MAX`` of them or ``BATCH_WAIT_MS`` have
passed since the first (``queue.get(timeout=...)``), and scores the batch at once
(``score_batch``, numpy on one BLAS thread). With 32 a batch and 30 ms, eight clients
never fill a batch: each batch holds the eight within a few ms of its first and then
waits out the rest of the window, every thread of the server asleep.

``BATCH_MAX=8`` closes a batch when the eight are in.

Truth, measured from outside (``batch_thread_api.truth.json``: ``python
tests/threads_corpus/measure.py --serve batch_thread_api``, 2026-12-07): the process used
0.4 of a core; its event loop's thread 0.27, asleep in its selector at 57% of the
readings; the batcher's thread 0.04 and the eight handler threads 0.01 each, asleep on a
futex (``futex_do_wait``) at 90-94% of theirs; py-spy's top on-CPU function
``Condition.wait``. Its variant (the same file, plain uvicorn, no probe): ``BATCH_MAX=8``
answered 2.2-3.2x as many requests a pair, 3.1x at the median of five.

Written before probe's batching rule read batcher threads: probe read "contention-bound
in ``predict``" (76%, waiting on locks, confidence 100%) and proposed shortening what
holds the lock at 3.7x; no lock is held, the handlers wait for their answers and the
batcher for its window.

    python -m uvicorn batch_thread_api:app --port 8000
"""

from __future__ import annotations

import os
import queue
import threading
import time
from collections.abc import AsyncIterator
from concurrent.futures import Future
from contextlib import asynccontextmanager

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np  # noqa: E402
from batch_window_api import featurize, score_batch  # noqa: E402
from fastapi import Body, FastAPI  # noqa: E402

BATCH_MAX = int(os.environ.get("BATCH_MAX", "32"))
BATCH_WAIT_S = float(os.environ.get("BATCH_WAIT_MS", "30")) / 1000

Pending = tuple[np.ndarray, "Future[float]"]


def next_batch(pending: queue.Queue[Pending], stop: threading.Event) -> list[Pending]:
    """The first row to come, then the rest until BATCH_MAX or the window has passed."""
    while not stop.is_set():
        try:
            batch = [pending.get(timeout=0.5)]
        except queue.Empty:
            continue
        deadline = time.monotonic() + BATCH_WAIT_S
        while len(batch) < BATCH_MAX:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            try:
                batch.append(pending.get(timeout=remaining))
            except queue.Empty:
                break
        return batch
    return []


def batcher(pending: queue.Queue[Pending], stop: threading.Event) -> None:
    while batch := next_batch(pending, stop):
        scores = score_batch(np.stack([row for row, _ in batch]))
        for (_, answer), value in zip(batch, scores, strict=True):
            answer.set_result(float(value))


@asynccontextmanager
async def lifespan(app: FastAPI) -> AsyncIterator[None]:
    app.state.pending = queue.Queue()
    stop = threading.Event()
    thread = threading.Thread(target=batcher, args=(app.state.pending, stop), name="batcher")
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()


app = FastAPI(lifespan=lifespan)


@app.post("/predict")
def predict(body: dict = Body(...)) -> dict[str, float]:  # noqa: B008  (FastAPI's way)
    answer: Future[float] = Future()
    app.state.pending.put((featurize(body["text"]), answer))
    return {"score": answer.result()}
