"""Six worker threads each send 25 requests to an upstream over HTTP, through one shared
client that holds a ``threading.Lock`` around each call (``with self._lock:``). The
upstream is a separate process on 127.0.0.1 whose handler takes ~15 ms.

Its one bottleneck is the upstream calls, made one at a time: a worker waits on the
network while the five others wait on the lock. The process barely uses a core. Truth,
measured from outside: ``serial_upstream.truth.json``
(``python tests/threads_corpus/measure.py serial_upstream``).

``--fixed`` holds the lock only around the shared state: the calls overlap.

    python serial_upstream.py [--calls 25] [--fixed]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import threading
import time
import urllib.request

UPSTREAM = """
import sys, time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

class Handler(BaseHTTPRequestHandler):
    def do_GET(self):
        time.sleep(0.015)
        self.send_response(200)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"ok")

    def log_message(self, *args):
        pass

server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
print(server.server_port, flush=True)
server.serve_forever()
"""


class SharedClient:
    def __init__(self, port: int) -> None:
        self._port = port
        self._lock = threading.Lock()

    def call_upstream(self, item: int) -> bytes:
        with self._lock:  # held around the network call: the calls run one at a time
            url = f"http://127.0.0.1:{self._port}/item/{item}"
            with urllib.request.urlopen(url) as response:
                return response.read()


class FixedClient(SharedClient):
    """``--fixed``: the lock guards only the shared state (a call count), not the call."""

    calls = 0

    def call_upstream(self, item: int) -> bytes:
        url = f"http://127.0.0.1:{self._port}/item/{item}"
        with urllib.request.urlopen(url) as response:
            body = response.read()
        with self._lock:
            self.calls += 1
        return body


def work(client: SharedClient, calls: int, sizes: list[int]) -> None:
    sizes.extend(len(client.call_upstream(i)) for i in range(calls))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=25)
    parser.add_argument("--fixed", action="store_true", help="no lock across the call")
    args = parser.parse_args()
    upstream = subprocess.Popen([sys.executable, "-c", UPSTREAM], stdout=subprocess.PIPE, text=True)
    try:
        port = int(upstream.stdout.readline())  # type: ignore[union-attr]
        client = FixedClient(port) if args.fixed else SharedClient(port)
        sizes: list[int] = []
        workers = [
            threading.Thread(target=work, args=(client, args.calls, sizes)) for _ in range(6)
        ]
        started = time.perf_counter()
        for t in workers:
            t.start()
        for t in workers:
            t.join()
        print(f"{len(sizes)} calls in {time.perf_counter() - started:.2f} s")
    finally:
        upstream.terminate()
        upstream.wait()


if __name__ == "__main__":
    main()
