"""A batch job that fingerprints large blobs on two threads: each hashes 16 MiB buffers
with SHA-256 (``hashlib`` releases the GIL for large buffers), in ``fingerprint``.

Its one bottleneck is native computation on both cores at once (no GIL wait: the hashing
runs outside the interpreter). Truth, measured from outside: ``digest_workers.truth.json``
(``python tests/threads_corpus/measure.py digest_workers``).

    python digest_workers.py [--rounds 200]
"""

from __future__ import annotations

import argparse
import hashlib
import threading


def fingerprint(blob: bytes, rounds: int, out: list[str]) -> None:
    digests = [hashlib.sha256(blob).hexdigest() for _ in range(rounds)]
    out.append(digests[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=200)
    args = parser.parse_args()
    blobs = [bytes([k]) * (16 << 20) for k in range(2)]
    out: list[str] = []
    workers = [threading.Thread(target=fingerprint, args=(b, args.rounds, out)) for b in blobs]
    for t in workers:
        t.start()
    for t in workers:
        t.join()
    print(" ".join(d[:12] for d in out))


if __name__ == "__main__":
    main()
