"""A worker loop that keeps every log record it formats in a list nobody trims (a slow
leak), undecorated: no spans, so the diagnosis has no request count.

Each iteration parses a small JSON payload, scores it in Python and appends a ~180-byte
formatted record to a module-level list. About 1,500 iterations a second here: ~0.3-0.4
MB/s.

Truth: leak (by construction: one string per iteration kept forever); over a 4x longer
run RSS keeps climbing at the same rate (record.py --verify). Slow enough that a short run
may honestly be undetermined -- never "no leak".
"""

from __future__ import annotations

import argparse
import json
import time

HISTORY: list[str] = []


def work(i: int) -> float:
    payload = json.loads(json.dumps({"id": i, "values": list(range(i % 50, i % 50 + 40))}))
    return sum(v * v for v in payload["values"]) / 40


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--seconds", type=float, default=12.0)
    args = p.parse_args()
    end = time.monotonic() + args.seconds
    i = 0
    while time.monotonic() < end:
        score = work(i)
        time.sleep(0.0005)  # waits on its queue
        HISTORY.append(
            f"{time.time():.6f} worker=3 item={i:08d} score={score:12.4f} status=ok "
            f"path=/v1/items/{i:08d} shard={i % 16:02d} retries=0 cache=miss"
        )
        i += 1


if __name__ == "__main__":
    main()
