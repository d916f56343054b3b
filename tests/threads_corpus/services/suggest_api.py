"""A FastAPI app served by uvicorn that suggests completions from a vocabulary trie it
builds at start-up, nothing decorated.

At start-up the app builds a trie of 150,000 words (``build_trie``: a dict per node,
each word's ``Entry`` at its last node), kept for the app's life as an autocomplete
index, a tokenizer's vocabulary or a product catalog kept in Python objects would be.
``POST /predict`` (``async def``) takes each word of the request's text, collects up to
eight completions of its first two letters (``complete``: a dict per candidate, with its
features) and ranks them all (``rank``), answering the best twenty.

``SUGGEST_FREEZE=1`` calls ``gc.freeze()`` once the trie is built.

Truth, measured from outside (``suggest_api.truth.json``: ``python
tests/threads_corpus/measure.py --serve suggest_api``, 2026-12-05): the server's one
thread on a CPU at 99% of the readings, 0.98 cores; py-spy's top on-CPU function
``complete``; under ``py-spy record --native``, **34%** of the server's samples (start-up's
included) inside CPython's collector (``gc_collect_main``). ``drive.py``'s 8 clients for
5 s, plain uvicorn, no probe, five alternated pairs: 4,374 answers as it comes (719-944),
6,551 with ``SUGGEST_FREEZE=1`` (1,252-1,381): **1.50x** (pairs 1.40-1.74, the last on a
slower spell of the host).

    python -m uvicorn suggest_api:app --port 8000
"""

from __future__ import annotations

import gc
import os
import random
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI, Request

WORDS = 150_000
LETTERS = "etaoinshrdlcumwfgypbvkjxqz"


class Entry:
    """A word's record at the end of its path in the trie."""

    __slots__ = ("word", "freq", "tags")

    def __init__(self, word: str, freq: int, tags: list[str]) -> None:
        self.word = word
        self.freq = freq
        self.tags = tags


def build_trie(rng: random.Random) -> dict:
    root: dict = {}
    for i in range(WORDS):
        word = "".join(rng.choice(LETTERS[: 6 + i % 20]) for _ in range(3 + i % 7))
        node = root
        for letter in word:
            node = node.setdefault(letter, {})
        node["$"] = Entry(word, rng.randint(1, 10_000), ["noun" if i % 3 else "verb"])
    return root


def complete(trie: dict, prefix: str, limit: int = 8) -> list[dict]:
    node = trie
    for letter in prefix:
        node = node.get(letter)
        if node is None:
            return []
    found: list[dict] = []
    stack = [node]
    while stack and len(found) < limit:
        node = stack.pop()
        for key, child in node.items():
            if key == "$":
                found.append({"entry": child, "features": [child.freq, len(child.word)]})
            else:
                stack.append(child)
    return found


def rank(candidates: list[dict]) -> list[str]:
    scored = sorted(candidates, key=lambda c: -c["features"][0] / (1 + c["features"][1]))
    return [c["entry"].word for c in scored[:20]]


@asynccontextmanager
async def lifespan(app: FastAPI) -> AsyncIterator[None]:
    app.state.trie = build_trie(random.Random(11))
    if os.environ.get("SUGGEST_FREEZE") == "1":
        gc.freeze()
    yield


app = FastAPI(lifespan=lifespan)


@app.post("/predict")
async def predict(request: Request) -> dict:
    text = (await request.json())["text"].lower()
    trie = request.app.state.trie
    candidates = [c for word in text.split() for c in complete(trie, word[:2])]
    return {"suggestions": rank(candidates)}
