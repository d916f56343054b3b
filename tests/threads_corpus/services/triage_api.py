"""A FastAPI app served by uvicorn whose ``POST /predict`` is an ``async`` route doing its
work in three pure-Python steps on the event loop's own thread: ``tokenize`` (words,
lower-cased, stop words dropped, crudely stemmed, with their 4-letter pieces),
``bag_of_hashes`` (each piece's character bigrams hashed into a 64-slot count vector)
and ``triage`` (the vector's distance to eight fixed centroids, twenty passes, the
nearest one's label). Written to be sized alike: 0.48, 0.60 and 0.55 ms on drive.py's
text (the least of 300 calls each, plain, 2026-12-06); ``GET /health`` is trivial.

Driven by 8 clients on 127.0.0.1 (``tests/threads_corpus/drive.py``), one thread does
everything: the requests queue for the one core the loop runs on, no stage of them
leading. No leak, no lock, no sleep. Truth, measured from outside:
``triage_api.truth.json`` (``python tests/threads_corpus/measure.py --serve triage_api``
for the threads; ``served_variants.py triage_api --variant "--workers 1" --variant
"--workers 2"`` for what two instances answer).

    python -m uvicorn triage_api:app --app-dir tests/threads_corpus/services --port 8000
"""

from __future__ import annotations

from fastapi import FastAPI

app = FastAPI()

STOP = frozenset("the a an of to and in is it that for on with as over".split())
SLOTS = 64
CENTROIDS = [[((k * 31 + s * 17) % 23) / 23.0 for s in range(SLOTS)] for k in range(8)]
LABELS = ["billing", "bug", "feature", "account", "spam", "praise", "legal", "other"]


SUFFIXES = ("ing", "ed", "es", "s", "ly")


def tokenize(text: str) -> list[str]:
    words: list[str] = []
    for raw in text.split():
        word = "".join(ch for ch in raw.lower() if ch.isalpha())
        if not word or word in STOP:
            continue
        for suffix in SUFFIXES:  # a crude stemmer: the longest suffix that leaves 3 letters
            if word.endswith(suffix) and len(word) - len(suffix) >= 3:
                word = word[: -len(suffix)]
                break
        words.append(word)
        words.extend(word[i : i + 4] for i in range(0, max(1, len(word) - 3)))
    return words


def bag_of_hashes(words: list[str]) -> list[float]:
    counts = [0.0] * SLOTS
    for word in words:
        padded = f"^{word}$"
        for i in range(len(padded) - 1):
            h = (ord(padded[i]) * 257 + ord(padded[i + 1])) * 2654435761 % 4294967296
            counts[h % SLOTS] += 1.0
    total = sum(counts) or 1.0
    return [c / total for c in counts]


def triage(vector: list[float]) -> str:
    best, label = float("inf"), LABELS[-1]
    for _ in range(20):  # twenty passes: a re-ranking's worth of distances
        for centroid, name in zip(CENTROIDS, LABELS, strict=True):
            distance = 0.0
            for v, c in zip(vector, centroid, strict=True):
                distance += (v - c) * (v - c)
            if distance < best:
                best, label = distance, name
    return label


@app.post("/predict")
async def predict(payload: dict) -> dict:
    words = tokenize(payload["text"])
    return {"words": len(words), "label": triage(bag_of_hashes(words))}


@app.get("/health")
async def health() -> dict:
    return {"ok": True}
