"""A fixed mix of requests for the serving corpus's apps, from N clients on 127.0.0.1:
each client alternates ``POST /predict`` and ``GET /items/{id}`` (ids cycling 1, 13,
666, 7: a 200, a 404, a 500, a 200), and counts what it got back per route and status.

    python tests/serving_corpus/drive.py PORT [--clients 4] [--per-client 40]
"""

from __future__ import annotations

import argparse
import http.client
import json
import threading
import time
from collections import Counter

from tests.threads_corpus.drive import wait_for_port

ITEMS = (1, 13, 666, 7)
BODY = json.dumps({"n": 40_000})


def drive(port: int, *, clients: int = 4, per_client: int = 40) -> tuple[Counter, dict]:
    """(answers per (route, status), client-side latencies in ms per route). After a 5xx
    or a closing answer the client reconnects; a request with no answer is counted under
    status 0."""
    answers: Counter = Counter()
    latency: dict[str, list[float]] = {"POST /predict": [], "GET /items/{item_id}": []}
    lock = threading.Lock()

    def client(k: int) -> None:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        for i in range(per_client):
            if i % 2:
                route, method, path, body = "POST /predict", "POST", "/predict", BODY
            else:
                item = ITEMS[(i // 2 + k) % len(ITEMS)]
                route, method, path, body = "GET /items/{item_id}", "GET", f"/items/{item}", None
            headers = {"Content-Type": "application/json"} if body else {}
            sent = time.perf_counter()
            try:
                conn.request(method, path, body=body, headers=headers)
                response = conn.getresponse()
                response.read()
                status = response.status
                # uvicorn closes the connection after a 500 without saying so: the next
                # request on it would be reset unread
                if response.will_close or status >= 500:
                    conn.close()
                    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
            except (ConnectionError, http.client.HTTPException):
                conn.close()
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
                status = 0
            took = (time.perf_counter() - sent) * 1e3
            with lock:
                answers[(route, status)] += 1
                latency[route].append(took)
        conn.close()

    threads = [threading.Thread(target=client, args=(k,)) for k in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return answers, latency


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("port", type=int)
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--per-client", type=int, default=40)
    args = parser.parse_args()
    wait_for_port(args.port)
    answers, latency = drive(args.port, clients=args.clients, per_client=args.per_client)
    for (route, status), n in sorted(answers.items()):
        print(f"{route:24} {status:3d} {n}")
    for route, ms in latency.items():
        ms = sorted(ms)
        print(f"{route:24} p50 {ms[len(ms) // 2]:.1f} ms")


if __name__ == "__main__":
    main()
