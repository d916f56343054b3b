"""A gRPC ranking service (grpcio's server, a pool of 8 handler threads), nothing
decorated, with its load built in: it serves on 127.0.0.1 and starts a client process
that sends ``--requests`` rank requests, ``--clients`` in flight at once, then stops.
Each request carries a query vector; ``rank`` scores the service's 600 candidates
against it in pure Python (``score``: a dot product of 32 floats) and answers the top
10. Beside the handlers, grpcio's server has a Python thread of its own that polls the
server's completion queue (``_serve``) and the C core's threads, none of them the work.

    python rank_grpc.py [--requests 2000] [--clients 8] [--workers 8] [--numpy]
                        [--processes N]

``--numpy``: the candidates scored as one matrix product (the handler vectorised).
``--processes N``: N server processes on the same port (grpcio binds with
SO_REUSEPORT), the kernel spreading the client's connections among them; the client
opens one channel per client so that they can spread.

Truth, measured from outside (``rank_grpc.truth.json``: ``python
tests/threads_corpus/measure.py rank_grpc``, 2026-12-05): 3.08 s, 0.96 cores (one core:
the handlers' Python under one GIL); 8 threads of 0.30-0.32 s of CPU each (the
handlers), on a CPU or runnable at 16-27% of the readings, in a futex the rest (the GIL,
their pool's queue, the poller); one of 0.21 s in ``do_epoll_wait`` at 14% (the poller);
the main thread in a futex at 97% (``wait_for_termination``); the C core's threads
(``event_engine``, ``grpc_global_tim``, ``lifeguard``) 0.03 s or less each. py-spy's
on-CPU samples are no cross-check here: it counts threads in ``Condition.wait`` as
active (``rank`` 8%, ``_worker`` 85%). Plain runs, alternated three times
(``/usr/bin/time``'s wall, written and measured before probe ran on it, the main thread
then waiting for the client rather than in ``wait_for_termination``: 2.98-3.09 s as it
was, in two pairs): 3.21-3.75 s as it is, 3.06-3.19 s with one handler
thread (``--workers 1``: threads buy nothing), 2.00-2.31 s with ``--processes 2``
(1.5-1.6x), 0.95-1.21 s with ``--numpy`` (3.0-3.3x).
"""

from __future__ import annotations

import argparse
import concurrent.futures
import random
import struct
import subprocess
import sys
import threading

import grpc

METHOD = "/ranking.Ranker/Rank"
DIM = 32
CANDIDATES = 600

CLIENT = """
import random, struct, sys, threading
import grpc

port, control, requests, clients = (int(a) for a in sys.argv[1:5])
left = [requests]
lock = threading.Lock()

def client(seed):
    rng = random.Random(seed)
    own = [("grpc.use_local_subchannel_pool", 1)]  # a connection per client
    with grpc.insecure_channel(f"127.0.0.1:{port}", options=own) as channel:
        call = channel.unary_unary("/ranking.Ranker/Rank")
        while True:
            with lock:
                if left[0] == 0:
                    return
                left[0] -= 1
            query = struct.pack("32f", *(rng.random() for _ in range(32)))
            call(query, timeout=60)

threads = [threading.Thread(target=client, args=(n,)) for n in range(clients)]
for t in threads:
    t.start()
for t in threads:
    t.join()
with grpc.insecure_channel(f"127.0.0.1:{control}") as channel:  # the load is done
    channel.unary_unary("/ranking.Ranker/Stop")(b"", timeout=10)
"""


def catalogue() -> list[tuple[float, ...]]:
    rng = random.Random(7)
    return [tuple(rng.random() for _ in range(DIM)) for _ in range(CANDIDATES)]


CATALOGUE = catalogue()


def score(query: tuple[float, ...], candidate: tuple[float, ...]) -> float:
    total = 0.0
    for q, c in zip(query, candidate, strict=True):
        total += q * c
    return total


def rank(request: bytes, context: grpc.ServicerContext) -> bytes:
    query = struct.unpack(f"{DIM}f", request)
    scores = [(score(query, c), i) for i, c in enumerate(CATALOGUE)]
    scores.sort(reverse=True)
    return struct.pack("10i", *(i for _, i in scores[:10]))


def rank_numpy(request: bytes, context: grpc.ServicerContext) -> bytes:
    import numpy as np

    query = np.frombuffer(request, dtype=np.float32)
    scores = MATRIX @ query
    return struct.pack("10i", *(int(i) for i in np.argsort(-scores)[:10]))


def serve(port: int, workers: int, vectorised: bool) -> tuple[grpc.Server, int]:
    server = grpc.server(concurrent.futures.ThreadPoolExecutor(max_workers=workers))

    def stop(request: bytes, context: grpc.ServicerContext) -> bytes:
        threading.Thread(target=server.stop, args=(1.0,)).start()  # after this answer
        return b""

    handler = grpc.method_handlers_generic_handler(
        "ranking.Ranker",
        {
            "Rank": grpc.unary_unary_rpc_method_handler(rank_numpy if vectorised else rank),
            "Stop": grpc.unary_unary_rpc_method_handler(stop),
        },
    )
    server.add_generic_rpc_handlers((handler,))
    return server, server.add_insecure_port(f"127.0.0.1:{port}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--workers", type=int, default=8)
    parser.add_argument("--numpy", action="store_true")
    parser.add_argument("--processes", type=int, default=1)
    parser.add_argument("--port", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--until-stdin-closes", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.numpy:
        import numpy as np

        global MATRIX
        MATRIX = np.array(CATALOGUE, dtype=np.float32)
    server, port = serve(args.port, args.workers, args.numpy)
    # the first process alone listens on a second port too, where the client stops it
    control = 0 if args.until_stdin_closes else server.add_insecure_port("127.0.0.1:0")
    server.start()
    if args.until_stdin_closes:  # a second server process on the first one's port
        print("ready", flush=True)
        threading.Thread(target=lambda: (sys.stdin.read(), server.stop(None))).start()
        server.wait_for_termination()
        return
    others = [
        subprocess.Popen(
            [
                sys.executable,
                __file__,
                "--port",
                str(port),
                "--workers",
                str(args.workers),
                "--until-stdin-closes",
                *(["--numpy"] if args.numpy else []),
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )  # fmt: skip
        for _ in range(args.processes - 1)
    ]
    for other in others:
        other.stdout.readline()
    # the load: a client process, whose last call stops the server
    client = subprocess.Popen(
        [sys.executable, "-c", CLIENT, *map(str, (port, control, args.requests, args.clients))]
    )
    server.wait_for_termination()
    client.wait()
    for other in others:
        other.stdin.close()
        other.wait(timeout=10)
    print(f"ranked {args.requests} requests")


if __name__ == "__main__":
    main()
