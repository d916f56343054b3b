"""A worker that turns records into content-addressed features, nothing decorated.

Each record goes through three steps, each far shorter than CPython's switch interval:
``tokenize`` (pure Python over the record's text), ``fingerprint`` (hashlib over the
record's 48 KB payload: it releases the GIL while it hashes) and ``encode`` (json.dumps:
C that keeps the GIL). A sampler that has to get the GIL to look finds the thread where it
lets the GIL go -- in ``fingerprint`` -- far more often than it is there.

    python feature_digest.py [--seconds 4] [--timed]

``--timed`` times each step in-process (perf_counter around each call) and prints the
totals as JSON. Three runs of ``--timed --seconds 6`` (2026-11-29, 2 cores): tokenize
2.05-2.07 s, fingerprint 2.78-2.83 s, encode 1.05-1.07 s of a 6.0-s loop (34%, 47%,
18%). py-spy, which stops the process for each sample, read 32%, 47% and 18.5% of its
samples in them (``feature_digest.truth.json``, ``py_spy_inclusive``; ``measure.py
feature_digest --seconds 6``). The split moves with the host: three hours later the same
day, on a host ~40% slower, the timers gave 42%, 35%, 23% and py-spy 40%, 38%, 22% --
so the test holds probe to the timers of its own run (``--timed`` under ``probe run``).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import time

WORDS = "the quick brown fox jumps over the lazy dog while models serve requests".split()


def make_record(i: int) -> tuple[str, bytes]:
    text = " ".join(WORDS[(i + k) % len(WORDS)] for k in range(48))
    return text, bytes([i % 251]) * 48_000


def tokenize(text: str) -> list[str]:
    tokens: list[str] = []
    for word in text.split():
        token = ""
        for ch in word:
            if ch.isalpha():
                token += ch.lower()
        if token:
            tokens.append(token)
    return tokens


def fingerprint(payload: bytes) -> str:
    return hashlib.sha256(payload).hexdigest()


def encode(tokens: list[str], digest: str) -> str:
    return json.dumps({"digest": digest, "tokens": tokens, "counts": [len(t) for t in tokens]})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=4.0)
    parser.add_argument("--timed", action="store_true", help="time each step in-process")
    args = parser.parse_args()
    records = [make_record(i) for i in range(64)]
    spent = {"tokenize": 0.0, "fingerprint": 0.0, "encode": 0.0}
    clock = time.perf_counter
    started = clock()
    done = 0
    while clock() - started < args.seconds:
        text, payload = records[done % len(records)]
        if args.timed:
            a = clock()
            tokens = tokenize(text)
            b = clock()
            digest = fingerprint(payload)
            c = clock()
            encode(tokens, digest)
            d = clock()
            spent["tokenize"] += b - a
            spent["fingerprint"] += c - b
            spent["encode"] += d - c
        else:
            encode(tokenize(text), fingerprint(payload))
        done += 1
    elapsed = clock() - started
    if args.timed:
        json.dump({"loop_s": elapsed, "records": done, "spent_s": spent}, sys.stdout)
        print()
    else:
        print(f"{done} records in {elapsed:.2f} s")


if __name__ == "__main__":
    main()
