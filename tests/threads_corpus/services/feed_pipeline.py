"""A pipeline: one thread renders report rows in pure Python and puts them on a queue;
four threads take rows off it and compress them with zlib; the main thread starts them
all and joins them.

The four consumers starve: a row takes them ~0.05 ms to compress and ~0.7 ms to render,
so they wait on an empty queue nearly all the time. Its one bottleneck is the producer's
pure-Python ``render_row``. Truth, measured from outside: ``feed_pipeline.truth.json``
(``python tests/threads_corpus/measure.py feed_pipeline``).

    python feed_pipeline.py [--rows 12000]
"""

from __future__ import annotations

import argparse
import queue
import threading
import zlib

DONE = None


def render_row(i: int) -> bytes:
    cells = []
    for column in range(200):
        value = (i * 7919 + column * 104729) % 1_000_003
        cells.append(f"{column}:{value:>9}:{'x' if value % 3 else 'y'}")
    return "|".join(cells).encode()


def produce(rows: int, out: queue.Queue, consumers: int) -> None:
    for i in range(rows):
        out.put(render_row(i))
    for _ in range(consumers):
        out.put(DONE)


def consume(inbox: queue.Queue, sizes: list[int]) -> None:
    while True:
        row = inbox.get()
        if row is DONE:
            return
        sizes.append(len(zlib.compress(row, 1)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=12000)
    args = parser.parse_args()
    rows: queue.Queue = queue.Queue(maxsize=64)
    sizes: list[int] = []
    consumers = [threading.Thread(target=consume, args=(rows, sizes)) for _ in range(4)]
    producer = threading.Thread(target=produce, args=(args.rows, rows, len(consumers)))
    for t in [producer, *consumers]:
        t.start()
    for t in [producer, *consumers]:
        t.join()
    print(f"{len(sizes)} rows, {sum(sizes)} bytes compressed")


if __name__ == "__main__":
    main()
