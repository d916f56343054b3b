"""A slow image upstream for the samples: an HTTP server on 127.0.0.1 in a daemon thread.

``GET /image/<n>`` answers after a delay of 20-50 ms (seeded per image: a slow storage
service or CDN) with a raw RGB image, ``side`` x ``side`` x 3 bytes. ``?small=1`` answers
with a quarter-size image, zlib-compressed: the "smaller, compressed payload" fix.

    with SlowUpstream() as upstream:
        data = fetch(upstream.url(7))

Not a sample itself: imported by image_io_bound.py and multimodal_pipeline.py.
"""

from __future__ import annotations

import random
import threading
import time
import urllib.request
import zlib
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

import numpy as np

SIDE = 128


def image_bytes(n: int, side: int) -> bytes:
    rng = np.random.default_rng(n)
    base = rng.integers(0, 256, size=(1, 1, 3))
    noise = rng.integers(-30, 30, size=(side, side, 3))
    return np.clip(base + noise, 0, 255).astype(np.uint8).tobytes()


def delay_s(n: int) -> float:
    return random.Random(n).uniform(0.020, 0.050)


def fetch(url: str) -> bytes:
    """One blocking GET: the thread waits on the socket until the body has arrived."""
    with urllib.request.urlopen(url, timeout=10) as response:
        return response.read()


class _Handler(BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802 - the http.server API
        parts = urlsplit(self.path)
        if not parts.path.startswith("/image/"):
            self.send_error(404)
            return
        n = int(parts.path.rsplit("/", 1)[1])
        small = parse_qs(parts.query).get("small") == ["1"]
        time.sleep(delay_s(n))
        body = zlib.compress(image_bytes(n, SIDE // 2), 6) if small else image_bytes(n, SIDE)
        self.send_response(200)
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002
        pass  # quiet: the samples print their own throughput


class _Server(ThreadingHTTPServer):
    # The default listen backlog (5) overflows under 16 concurrent clients, and each
    # refused SYN costs a 1 s retransmit: the fix would look slower than it is.
    request_queue_size = 128


class SlowUpstream:
    """The server, bound to a free port on 127.0.0.1, stopped on exit."""

    def __init__(self) -> None:
        self._server = _Server(("127.0.0.1", 0), _Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever, name="slow-upstream", daemon=True
        )

    def url(self, n: int, *, small: bool = False) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}/image/{n}" + ("?small=1" if small else "")

    def __enter__(self) -> SlowUpstream:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join()
