"""A FastAPI app served by uvicorn that embeds texts with a small torch model on CPU:
``POST /predict`` is a sync route, so Starlette runs each request on its thread pool, and
the model runs on whichever pool thread has the request (``embed``: hashed word ids, an
``EmbeddingBag`` and two linear layers over a batch of 64 sentences a request).

Driven by 8 clients (``tests/threads_corpus/drive.py``). ``EMBED_TORCH_THREADS=N`` sets
``torch.set_num_threads(N)`` at import (unset: torch's default); ``EMBED_GRAPH=1`` runs
the head as one frozen TorchScript graph. Truth, measured from
outside: ``embed_api.truth.json`` (``python tests/threads_corpus/measure.py --serve
embed_api``) and the requests answered in 6 s at each setting (in the truth's
``variants``).

    python -m uvicorn embed_api:app --app-dir tests/threads_corpus/services --port 8000
"""

from __future__ import annotations

import os
import zlib

import torch
from fastapi import FastAPI, Request

if os.environ.get("EMBED_TORCH_THREADS"):
    torch.set_num_threads(int(os.environ["EMBED_TORCH_THREADS"]))

BUCKETS = 20_000
torch.manual_seed(0)
BAG = torch.nn.EmbeddingBag(BUCKETS, 256, mode="mean")
HEAD = torch.nn.Sequential(
    torch.nn.Linear(256, 1024), torch.nn.ReLU(), torch.nn.Linear(1024, 384)
).eval()

if os.environ.get("EMBED_GRAPH"):  # the head traced into one frozen graph
    with torch.inference_mode():
        HEAD = torch.jit.freeze(torch.jit.trace(HEAD, torch.randn(64, 256)))

app = FastAPI()


def word_ids(text: str) -> list[int]:
    return [zlib.crc32(w.encode()) % BUCKETS for w in text.lower().split()]


def embed(text: str) -> list[float]:
    sentences = [text[i:] for i in range(64)]
    ids = [word_ids(s) for s in sentences]
    offsets = torch.tensor([0] + [len(x) for x in ids[:-1]]).cumsum(0)
    flat = torch.tensor([i for x in ids for i in x])
    with torch.inference_mode():
        vectors = HEAD(BAG(flat, offsets))
        vectors = torch.nn.functional.normalize(vectors, dim=1)
    return vectors.mean(dim=0)[:8].tolist()


@app.post("/predict")
def predict(request_body: dict) -> dict:
    return {"embedding": embed(str(request_body.get("text", "")))}


@app.get("/health")
async def health(request: Request) -> dict:
    return {"ok": True}
