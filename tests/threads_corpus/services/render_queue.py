"""A pipeline the other way round: the main thread reads small jobs quickly and puts them
on a bounded ``queue.Queue`` (8 slots); one worker thread renders each into text in pure
Python (``render_page``). The main thread then joins the worker.

Its one bottleneck is the worker's rendering: the main thread spends most of its time
blocked in ``put`` on the full queue (back-pressure from the slow consumer, not lock
contention). Truth, measured from outside: ``render_queue.truth.json``
(``python tests/threads_corpus/measure.py render_queue``).

    python render_queue.py [--jobs 3000]
"""

from __future__ import annotations

import argparse
import queue
import threading


def read_job(i: int) -> dict[str, object]:
    return {"id": i, "title": f"report {i}", "rows": [(r, r * i % 97) for r in range(60)]}


def render_page(job: dict[str, object]) -> str:
    lines = [f"<h1>{job['title']}</h1>", "<table>"]
    for row, value in job["rows"]:  # type: ignore[attr-defined]
        cells = "".join(f"<td>{(value * k) % 13:>4}</td>" for k in range(12))
        lines.append(f"<tr><th>{row}</th>{cells}</tr>")
    lines.append("</table>")
    return "\n".join(lines)


def render_all(jobs: queue.Queue, pages: list[int]) -> None:
    while (job := jobs.get()) is not None:
        pages.append(len(render_page(job)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=3000)
    args = parser.parse_args()
    jobs: queue.Queue = queue.Queue(maxsize=8)
    pages: list[int] = []
    worker = threading.Thread(target=render_all, args=(jobs, pages))
    worker.start()
    for i in range(args.jobs):
        jobs.put(read_job(i))
    jobs.put(None)
    worker.join()
    print(f"{len(pages)} pages, {sum(pages)} bytes")


if __name__ == "__main__":
    main()
