"""A batch job that tokenizes documents on a pool of four threads
(``ThreadPoolExecutor.map``); the tokenizer is pure Python (``split_tokens``).

Its one bottleneck is the GIL: four threads of pure Python, so the process runs at about
one core of two and each worker waits for the GIL most of the time it is not running.
Truth, measured from outside: ``tokenize_pool.truth.json``
(``python tests/threads_corpus/measure.py tokenize_pool``). py-spy's hottest "on-CPU"
function there is a ``Condition.__enter__``: it counts threads waiting for the GIL (or
for the work queue's mutex, held by a worker that lost the GIL) as active.

``--fixed`` runs the same tokenizer on a process pool of one process per core (what the
diagnosis recommends): the pure Python runs in parallel.

    python tokenize_pool.py [--docs 2000] [--fixed]
"""

from __future__ import annotations

import argparse
import os
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor

WORDS = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta"]


def make_doc(i: int) -> str:
    return f"{WORDS[i % 8]}{i % 10} " * 1500


def split_tokens(doc: str) -> list[str]:
    tokens: list[str] = []
    word = ""
    for ch in doc:
        if ch.isalpha():
            word += ch
        else:
            if word:
                tokens.append(word.lower())
            word = ""
    if word:
        tokens.append(word.lower())
    return tokens


def count_tokens(doc: str) -> int:
    return len(split_tokens(doc))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--docs", type=int, default=2000)
    parser.add_argument("--fixed", action="store_true", help="a process pool, one per core")
    args = parser.parse_args()
    docs = [make_doc(i) for i in range(args.docs)]
    if args.fixed:
        with ProcessPoolExecutor(max_workers=os.cpu_count()) as processes:
            counts = list(processes.map(count_tokens, docs, chunksize=50))
    else:
        with ThreadPoolExecutor(max_workers=4) as pool:
            counts = list(pool.map(lambda d: len(split_tokens(d)), docs))
    print(f"{sum(counts)} tokens in {len(docs)} documents")


if __name__ == "__main__":
    main()
