"""A loop that fetches a page of items from an upstream over HTTP (``fetch_page``; the
upstream, a separate process on 127.0.0.1, answers in ~10 ms) and then scores the items
in pure Python (``score_items``, ~20-40 ms of CPU by the host's speed), one page after
another.

Its bottleneck is the scoring: about two thirds of the loop's time is on the CPU in
``score_items``, a third waiting on the network in ``fetch_page``. Truth, measured from
outside: ``score_feed.truth.json`` (``python tests/threads_corpus/measure.py score_feed``).

``--fixed`` fetches the pages on a pool of four threads, ahead of the scoring (what the
diagnosis's ``concurrent_io`` proposes): the fetches overlap the scoring.

    python score_feed.py [--pages 60] [--fixed]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import urllib.request
from concurrent.futures import ThreadPoolExecutor

UPSTREAM = """
import json, time
from http.server import BaseHTTPRequestHandler, HTTPServer

class Handler(BaseHTTPRequestHandler):
    def do_GET(self):
        time.sleep(0.010)
        body = json.dumps([[i, i * 7 % 101] for i in range(200)]).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass

server = HTTPServer(("127.0.0.1", 0), Handler)
print(server.server_port, flush=True)
server.serve_forever()
"""


def fetch_page(port: int, page: int) -> list[list[int]]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/page/{page}") as response:
        return json.loads(response.read())


def score_items(items: list[list[int]]) -> float:
    total = 0.0
    for item_id, weight in items:
        for k in range(1200):
            total += ((item_id * k + weight) % 17) ** 0.5
    return total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pages", type=int, default=60)
    parser.add_argument("--fixed", action="store_true", help="fetch ahead on 4 threads")
    args = parser.parse_args()
    upstream = subprocess.Popen([sys.executable, "-c", UPSTREAM], stdout=subprocess.PIPE, text=True)
    try:
        port = int(upstream.stdout.readline())  # type: ignore[union-attr]
        if args.fixed:
            with ThreadPoolExecutor(max_workers=4) as pool:
                pages = pool.map(fetch_page, [port] * args.pages, range(args.pages))
                scores = [score_items(items) for items in pages]
        else:
            scores = [score_items(fetch_page(port, p)) for p in range(args.pages)]
        print(f"{len(scores)} pages, best {max(scores):.1f}")
    finally:
        upstream.terminate()
        upstream.wait()


if __name__ == "__main__":
    main()
