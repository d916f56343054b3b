"""An asyncio job that enriches records from a feature service over HTTP with httpx, the
client most async inference code uses (OpenAI's and Anthropic's SDKs are built on it),
nothing decorated: for each record in turn, ``fetch_features`` GETs the record's
features from the service (a separate process on 127.0.0.1, a thread per connection,
~25 ms an answer) and ``score`` combines them.

    python enrich_httpx.py [--records 80] [--concurrent N] [--pool N]

``--concurrent N``: N records in flight at once (``asyncio.gather`` behind a semaphore,
the client's pool allowing as many connections, or ``--pool``'s).

Truth, measured from outside (``enrich_httpx.truth.json``: ``python
tests/threads_corpus/measure.py enrich_httpx``, 2026-12-05): 2.52 s; the one thread
asleep in its selector (``do_epoll_wait``) at 78% of the readings, 0.14 cores. Plain
runs, alternated four times (``/usr/bin/time``'s wall, written and measured before
probe ran on it): 2.45-2.52 s one record at a time, 0.45-0.49 s with ``--concurrent 16``
(5.3x), 0.60-0.67 s with 8 (4.0x). 200 records, 16 in flight, the client's pool of 2
connections (``--concurrent 16 --pool 2 --records 200``): 3.03-3.04 s, against
0.65-0.66 s with a pool of 16 (4.6x), three pairs.
"""

from __future__ import annotations

import argparse
import asyncio
import subprocess
import sys

import httpx

SERVER = """
import http.server, json, socketserver, sys, time

class Features(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # headers and body are two writes: no delayed ACK

    def do_GET(self):
        time.sleep(0.025)
        body = json.dumps({"id": self.path, "features": [0.5] * 16}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass

class Server(socketserver.ThreadingTCPServer):
    daemon_threads = True
    request_queue_size = 128

with Server(("127.0.0.1", 0), Features) as server:
    print(server.server_address[1], flush=True)
    server.serve_forever()
"""


async def fetch_features(client: httpx.AsyncClient, base: str, record: int) -> list[float]:
    response = await client.get(f"{base}/features/{record}")
    response.raise_for_status()
    return response.json()["features"]


def score(features: list[float]) -> float:
    return sum(f * w for f, w in zip(features, range(len(features)), strict=True))


async def run(port: int, records: int, concurrent: int, pool: int) -> float:
    base = f"http://127.0.0.1:{port}"
    limits = httpx.Limits(max_connections=pool or max(1, concurrent))
    async with httpx.AsyncClient(limits=limits) as client:
        if concurrent:
            gate = asyncio.Semaphore(concurrent)

            async def bounded(record: int) -> float:
                async with gate:
                    return score(await fetch_features(client, base, record))

            scores = await asyncio.gather(*(bounded(r) for r in range(records)))
        else:
            scores = [score(await fetch_features(client, base, r)) for r in range(records)]
    return sum(scores)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=80)
    parser.add_argument("--concurrent", type=int, default=0)
    parser.add_argument("--pool", type=int, default=0)
    args = parser.parse_args()
    server = subprocess.Popen([sys.executable, "-c", SERVER], stdout=subprocess.PIPE, text=True)
    try:
        port = int(server.stdout.readline())  # type: ignore[union-attr]
        print(f"{asyncio.run(run(port, args.records, args.concurrent, args.pool)):.1f}")
    finally:
        server.terminate()
        server.wait()


if __name__ == "__main__":
    main()
