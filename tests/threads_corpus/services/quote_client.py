"""A batch job that prices a list of items by asking a quote service over HTTP, one item
at a time; the quote service is a stand-in started in the same process (a
``ThreadingHTTPServer`` on 127.0.0.1 whose handler takes ~20 ms, as a real upstream
would).

Its one bottleneck is the main thread waiting on the network in ``fetch_quote``: the
process barely uses a core; the server's loop waits in ``select`` and its handler threads
sleep. Truth, measured from outside: ``quote_client.truth.json``
(``python tests/threads_corpus/measure.py quote_client``).

    python quote_client.py [--items 150]
"""

from __future__ import annotations

import argparse
import json
import threading
import time
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class QuoteHandler(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        time.sleep(0.02)  # the upstream's own work
        body = json.dumps({"item": self.path, "price": len(self.path) * 1.5}).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


def fetch_quote(port: int, item: int) -> float:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/item/{item}") as response:
        return float(json.loads(response.read())["price"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=150)
    args = parser.parse_args()
    server = ThreadingHTTPServer(("127.0.0.1", 0), QuoteHandler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        total = sum(fetch_quote(server.server_port, i) for i in range(args.items))
    finally:
        server.shutdown()
        server.server_close()
    print(f"{args.items} items priced, total {total:.1f}")


if __name__ == "__main__":
    main()
