"""A batch job: checksums synthetic records in pure Python on its main thread and hands
one result in 50 to a pool of 8 threads that formats it as JSON (``format_result``).

Its one bottleneck is the main thread's pure-Python ``rolling_hash`` loop; the 8 pool
threads wait for work nearly all the time (a pool far larger than its load). Truth,
measured from outside: ``checksum_batch.truth.json`` (``python measure.py``).

    python checksum_batch.py [--records 60000]
"""

from __future__ import annotations

import argparse
import json
import time
from concurrent.futures import ThreadPoolExecutor


def make_record(i: int) -> str:
    return f"{i:08d}|" + "abcdefghij" * 40


def rolling_hash(record: str) -> int:
    h = 0
    for ch in record:
        h = (h * 31 + ord(ch)) & 0xFFFFFFFF
    return h


def format_result(record: int, digest: int) -> str:
    return json.dumps({"record": record, "digest": digest})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=60000)
    args = parser.parse_args()
    formatted = []
    with ThreadPoolExecutor(max_workers=8) as pool:
        for _ in range(8):
            pool.submit(time.sleep, 0.05)  # all eight workers started, as after a burst
        for i in range(args.records):
            digest = rolling_hash(make_record(i))
            if i % 50 == 0:
                formatted.append(pool.submit(format_result, i, digest))
    print(f"{args.records} records, {len(formatted)} formatted")


if __name__ == "__main__":
    main()
