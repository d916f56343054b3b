"""A batch job that scores documents on a ``multiprocessing`` pool of two processes
(fork): each document's score is pure Python (``score_document``); the parent builds
the documents, hands them out (``Pool.map``) and collects the results.

Its one bottleneck is the pure Python in the pool's workers, on both cores: nothing to
gain from more processes on this 2-core machine. The parent and its pool's helper
threads wait. Truth, measured from outside: ``pool_score.truth.json``
(``python tests/threads_corpus/measure.py pool_score``: the parent's threads -- 0.12
cores; the workers are other processes) and the whole tree's by ``/usr/bin/time -f "%e
%U"``: 1.61 s of wall, 2.96 s of user CPU (1.84 cores; 2026-12-04).

    python pool_score.py [--docs 3000]
"""

import argparse
import multiprocessing as mp


def score_document(doc: str) -> int:
    total = 0
    for _ in range(60):
        for word in doc.split():
            total = (total * 31 + hash(word)) & 0xFFFFFFFF
    return total


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--docs", type=int, default=3000)
    args = parser.parse_args()
    docs = [" ".join(f"w{(i * 7 + j) % 503}" for j in range(120)) for i in range(args.docs)]
    with mp.get_context("fork").Pool(2) as pool:
        scores = pool.map(score_document, docs, chunksize=20)
    print(sum(scores) % 1000)


if __name__ == "__main__":
    main()
