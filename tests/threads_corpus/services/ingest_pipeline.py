"""A pipeline: one thread parses raw log lines in pure Python (``parse_line``) and puts
each record on a ``queue.Queue``; four consumer threads take them and keep a count per
key (``store_record``). The main thread starts them and joins.

Its one bottleneck is the producer's parsing: the consumers finish each record in
microseconds and wait on the empty queue nearly all the time (starved, not contended).
Truth, measured from outside: ``ingest_pipeline.truth.json``
(``python tests/threads_corpus/measure.py ingest_pipeline``).

    python ingest_pipeline.py [--lines 70000]
"""

from __future__ import annotations

import argparse
import queue
import threading

DONE = None


def make_line(i: int) -> str:
    agent = "Mozilla/5.0 (X11; Linux x86_64) probe-corpus/1.0 " * 4
    return f"2026-11-23T10:{i % 60:02d}:00 host-{i % 7} GET /items/{i} 200 {i * 7 % 5000}ms {agent}"


def parse_line(line: str) -> dict[str, str]:
    """Splits on spaces and colons by hand, the way a hand-written parser does."""
    fields: list[str] = []
    current = ""
    for ch in line:
        if ch == " " or ch == ":":
            fields.append(current)
            current = ""
        else:
            current += ch
    fields.append(current)
    return {"host": fields[3], "path": fields[5], "status": fields[6], "ms": fields[7]}


def produce(lines: int, out: queue.Queue) -> None:
    for i in range(lines):
        out.put(parse_line(make_line(i)))
    for _ in range(4):
        out.put(DONE)


def store_record(record: dict[str, str], counts: dict[str, int], lock: threading.Lock) -> None:
    with lock:
        counts[record["host"]] = counts.get(record["host"], 0) + 1


def consume(source: queue.Queue, counts: dict[str, int], lock: threading.Lock) -> None:
    while (record := source.get()) is not DONE:
        store_record(record, counts, lock)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lines", type=int, default=70000)
    args = parser.parse_args()
    records: queue.Queue = queue.Queue()
    counts: dict[str, int] = {}
    lock = threading.Lock()
    producer = threading.Thread(target=produce, args=(args.lines, records))
    consumers = [threading.Thread(target=consume, args=(records, counts, lock)) for _ in range(4)]
    for t in [producer, *consumers]:
        t.start()
    for t in [producer, *consumers]:
        t.join()
    print(f"{sum(counts.values())} records from {len(counts)} hosts")


if __name__ == "__main__":
    main()
