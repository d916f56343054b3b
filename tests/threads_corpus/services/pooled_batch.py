"""A batch job that looks keys up in a profile store on eight threads, through a pool of
two connections, nothing decorated.

``ThreadPoolExecutor(8).map`` runs ``ProfilePool.lookup`` for 320 keys: each borrows an
open connection from the pool (a ``queue.Queue`` of two, as urllib3's blocking pool or
SQLAlchemy's ``QueuePool`` lend theirs), sends the key and reads the answer (the store is
a separate process on 127.0.0.1 answering in ~25 ms), then gives it back. Eight threads,
two connections: six threads at a time wait in the pool's ``get``.

``POOLED_BATCH_SIZE=8`` opens eight connections instead.

Truth, measured from outside (``pooled_batch.truth.json``: ``python
tests/threads_corpus/measure.py pooled_batch``, 2026-12-04): 0.02 cores; of the eight pool
threads, two asleep in the socket's read (``wait_woken``) at 99% of the readings -- the
same two keep the connections, taking them back as soon as they give them -- and six in a
futex (the pool's condition) at 99-100%. Plain runs, alternated twice: 4.17 s as it
comes, 1.11-1.12 s with eight connections: 3.74x.

    python pooled_batch.py [--keys 320]
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import socket
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

POOL_SIZE = int(os.environ.get("POOLED_BATCH_SIZE", "2"))
STORE = """
import json, socketserver, time

class Profiles(socketserver.StreamRequestHandler):
    def handle(self):
        for line in self.rfile:
            time.sleep(0.025)
            self.wfile.write(json.dumps({"weight": len(line) % 7 / 7.0}).encode() + b"\\n")

class Store(socketserver.ThreadingTCPServer):
    daemon_threads = True
    request_queue_size = 64

with Store(("127.0.0.1", 0), Profiles) as store:
    print(store.server_address[1], flush=True)
    store.serve_forever()
"""


class ProfilePool:
    """Open connections to the store, lent one lookup at a time."""

    def __init__(self, port: int, size: int) -> None:
        self.idle: queue.Queue[tuple[socket.socket, object]] = queue.Queue()
        for _ in range(size):
            conn = socket.create_connection(("127.0.0.1", port))
            self.idle.put((conn, conn.makefile("rb")))

    def lookup(self, key: str) -> dict[str, float]:
        conn, replies = self.idle.get()
        try:
            conn.sendall(key.encode() + b"\n")
            return json.loads(replies.readline())  # type: ignore[attr-defined]
        finally:
            self.idle.put((conn, replies))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keys", type=int, default=320)
    args = parser.parse_args()
    store = subprocess.Popen([sys.executable, "-c", STORE], stdout=subprocess.PIPE, text=True)
    try:
        pool = ProfilePool(int(store.stdout.readline()), POOL_SIZE)  # type: ignore[union-attr]
        with ThreadPoolExecutor(8) as workers:
            weights = list(workers.map(pool.lookup, (f"key-{i}" for i in range(args.keys))))
        print(len(weights), "keys looked up")
    finally:
        store.terminate()
        store.wait()


if __name__ == "__main__":
    main()
