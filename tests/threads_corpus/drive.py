"""A load driver for the corpus's served apps: N clients on 127.0.0.1, each with one
keep-alive connection, sending requests back to back for a while.

    python tests/threads_corpus/drive.py PORT [--clients 8] [--seconds 6]
"""

from __future__ import annotations

import argparse
import http.client
import json
import socket
import threading
import time

BODY = json.dumps({"text": "The quick brown fox, it jumps over the lazy dog! " * 40})


def wait_for_port(port: int, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            time.sleep(0.05)
    raise TimeoutError(f"nothing listens on 127.0.0.1:{port} after {timeout:.0f} s")


def drive(port: int, *, clients: int = 8, seconds: float = 6.0) -> int:
    """Requests answered with 200 by all clients together."""
    done = [0] * clients
    stop = time.monotonic() + seconds

    def client(k: int) -> None:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        headers = {"Content-Type": "application/json"}
        while time.monotonic() < stop:
            conn.request("POST", "/predict", body=BODY, headers=headers)
            response = conn.getresponse()
            response.read()
            done[k] += response.status == 200
        conn.close()

    threads = [threading.Thread(target=client, args=(k,)) for k in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return sum(done)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("port", type=int)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--seconds", type=float, default=6.0)
    args = parser.parse_args()
    wait_for_port(args.port)
    print(drive(args.port, clients=args.clients, seconds=args.seconds), "requests")


if __name__ == "__main__":
    main()
