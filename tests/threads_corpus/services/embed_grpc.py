"""A batch job that embeds passages by calling an embedding service over gRPC, one call
after another, nothing decorated: ``embed`` sends a passage to the service (a separate
process on 127.0.0.1, grpcio's server with a thread pool, ~20 ms an answer, as a model
behind it would take) and ``normalise`` scales the vector it gets back. The calls are
grpcio's blocking unary calls: the calling thread polls the call's completion queue in
grpcio's C core (Cython, no Python frame below ``_channel.py``), not in a selector or a
socket read of Python's own.

    python embed_grpc.py [--passages 120] [--concurrent N]

``--concurrent N``: N calls in flight at once (grpcio's ``.future()`` calls, at most N
outstanding).

Truth, measured from outside (``embed_grpc.truth.json``: ``python
tests/threads_corpus/measure.py embed_grpc``, 2026-12-05): 2.96 s, 0.07 cores; the main
thread asleep at 91% of the readings, in ``do_epoll_wait`` at 86% (grpcio's C core
polls in the calling thread); py-spy's on-CPU samples are mostly the imports. Plain
runs, alternated three times (``/usr/bin/time``'s wall, written and measured before
probe ran on it): 2.83-2.92 s one call at a time, 0.47-0.50 s with ``--concurrent 16``
(5.8x), 0.58-0.69 s with 8 (4.6x).
"""

from __future__ import annotations

import argparse
import collections
import math
import struct
import subprocess
import sys

import grpc

METHOD = "/embedding.Embedder/Embed"
DIM = 64

SERVER = """
import concurrent.futures, math, struct, sys, time
import grpc

DIM = 64

def embed(request, context):
    time.sleep(0.020)  # the model behind the service
    seed = sum(request) or 1
    return struct.pack(f"{DIM}f", *(math.sin(seed * (i + 1)) for i in range(DIM)))

handler = grpc.method_handlers_generic_handler(
    "embedding.Embedder", {"Embed": grpc.unary_unary_rpc_method_handler(embed)}
)
server = grpc.server(concurrent.futures.ThreadPoolExecutor(max_workers=32))
server.add_generic_rpc_handlers((handler,))
port = server.add_insecure_port("127.0.0.1:0")
server.start()
print(port, flush=True)
sys.stdin.read()  # until the job closes its end
server.stop(None)
"""


def passage(n: int) -> bytes:
    return f"passage {n}: " + "lorem ipsum dolor sit amet " * 8


def embed(call: grpc.UnaryUnaryMultiCallable, text: str) -> bytes:
    return call(text.encode(), timeout=10)


def normalise(raw: bytes) -> list[float]:
    vector = struct.unpack(f"{DIM}f", raw)
    norm = math.sqrt(sum(v * v for v in vector)) or 1.0
    return [v / norm for v in vector]


def run(port: int, passages: int, concurrent: int) -> float:
    total = 0.0
    with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        call = channel.unary_unary(METHOD)
        if concurrent:
            in_flight: collections.deque = collections.deque()
            for n in range(passages):
                if len(in_flight) == concurrent:
                    total += normalise(in_flight.popleft().result())[0]
                in_flight.append(call.future(passage(n).encode(), timeout=10))
            while in_flight:
                total += normalise(in_flight.popleft().result())[0]
        else:
            for n in range(passages):
                total += normalise(embed(call, passage(n)))[0]
    return total


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--passages", type=int, default=120)
    parser.add_argument("--concurrent", type=int, default=0)
    args = parser.parse_args()
    server = subprocess.Popen(
        [sys.executable, "-c", SERVER], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        port = int(server.stdout.readline())
        print(f"embedded {args.passages} passages: {run(port, args.passages, args.concurrent):.3f}")
    finally:
        server.stdin.close()
        server.wait(timeout=10)


if __name__ == "__main__":
    main()
