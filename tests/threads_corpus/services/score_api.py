"""A FastAPI app served by uvicorn that scores each request with a torch MLP on CPU:
``POST /predict`` is a sync route, so Starlette runs each request on its thread pool, and
the model (three linear layers over a batch of 48 feature rows a request, ``score``)
runs on whichever pool thread has the request; the features are a hash of the text
(little Python).

Driven by 8 clients (``tests/threads_corpus/drive.py``). ``SCORE_TORCH_THREADS=N`` sets
``torch.set_num_threads(N)`` at import (unset: torch's default); ``SCORE_GRAPH=1`` runs
the model as one frozen TorchScript graph. Truth, measured from
outside: ``score_api.truth.json`` (``python tests/threads_corpus/measure.py --serve
score_api``) and the requests answered in 6 s at each setting (the truth's
``variants``).

    python -m uvicorn score_api:app --app-dir tests/threads_corpus/services --port 8000
"""

from __future__ import annotations

import os
import zlib

import torch
from fastapi import FastAPI

if os.environ.get("SCORE_TORCH_THREADS"):
    torch.set_num_threads(int(os.environ["SCORE_TORCH_THREADS"]))

torch.manual_seed(0)
MODEL = torch.nn.Sequential(
    torch.nn.Linear(512, 1024),
    torch.nn.ReLU(),
    torch.nn.Linear(1024, 1024),
    torch.nn.ReLU(),
    torch.nn.Linear(1024, 4),
).eval()

if os.environ.get("SCORE_GRAPH"):  # the model traced into one frozen graph
    with torch.inference_mode():
        MODEL = torch.jit.freeze(torch.jit.trace(MODEL, torch.randn(48, 512)))

app = FastAPI()


def features(text: str) -> torch.Tensor:
    generator = torch.Generator().manual_seed(zlib.crc32(text.encode()))
    return torch.randn(48, 512, generator=generator)


def score(text: str) -> list[float]:
    with torch.inference_mode():
        return MODEL(features(text)).softmax(dim=1).mean(dim=0).tolist()


@app.post("/predict")
def predict(request_body: dict) -> dict:
    return {"scores": score(str(request_body.get("text", "")))}
