"""An I/O-bound API whose response cache is keyed by the request id: it never hits, it
only grows (a leak), under a garbage-collection saw-tooth.

Each request waits ~2 ms on an upstream (a sleep), builds a ~4 KB response, and stores it
under its own request id. Meanwhile each request also makes ~30 KB of cyclic garbage that
only the cyclic collector frees: RSS saw-tooths around the leak's climb.

Truth: leak, ~1.5-2 MB/s (by construction: one ~4 KB entry per request kept forever).
Run with ``--requests 4x`` longer, RSS keeps climbing at the same rate (record.py --verify).
"""

from __future__ import annotations

import time

from request_loop import run_requests

RESPONSES: dict[str, dict[str, object]] = {}


class Node:
    def __init__(self, parent: Node | None) -> None:
        self.parent = parent
        self.children: list[Node] = []
        self.payload = bytearray(200)


def scratch() -> None:
    """Cyclic garbage: a tree whose children point back at their parent."""
    root = Node(None)
    for _ in range(120):
        root.children.append(Node(root))


def handle(request_id: str) -> dict[str, object]:
    cached = RESPONSES.get(request_id)
    if cached is not None:
        return cached
    time.sleep(0.002)  # the upstream
    scratch()
    response = {"id": request_id, "items": [f"item-{request_id}-{k:04d}" for k in range(60)]}
    RESPONSES[request_id] = response  # keyed by an id that never repeats
    return response


def main() -> None:
    run_requests(handle, 4000)


if __name__ == "__main__":
    main()
