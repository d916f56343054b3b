"""A batch job that compresses 24 generated documents with the system's ``xz``, one child
process per document (as a job shelling out to ffmpeg, pandoc or a converter per item
does), one after another; nothing decorated. Written after probe's subprocess waits had
no fix to run them side by side, before the rule that proposes it (2026-12-07).

Each document (~700 KB of words) is built in Python (``make_doc``), then piped through
``xz -6`` (``compress``: ``subprocess.run``, which waits for the child). The child does
the CPU work; the job's own thread waits for it.

``--fixed`` overlaps the compressions on a thread pool, one thread a core (the documents
are still built one after another on the main thread, beside the children).
``XZ_THREADS=0`` runs each ``xz`` on every core (``-T0``, 64-KiB blocks): children that
already use the cores gain less from company.

``COMPRESS_TIMERS=1`` prints each function's share of the wall (``perf_counter`` around
its calls) and the CPU of the children waited for (``RUSAGE_CHILDREN``).

Truth, measured without probe (2026-12-07, this machine kind, 2 cores; the figures below
were read while nothing else ran -- see the test for the pairs it takes itself):
``COMPRESS_TIMERS=1``: ``compress`` 86% of the wall, ``make_doc`` 14%; the children
4.1 s of CPU in a 4.8-s run, the job's own process 0.85 s. Plain pairs (``/usr/bin/time``,
as it comes then ``--fixed``): 4.17/2.06, 4.43/2.20, 4.57/2.54 s: **1.8-2.0x**. With
``XZ_THREADS=0`` (measured while a test suite ran beside it): 3.45/2.70, 3.79/2.64 s:
1.3-1.4x.
"""

from __future__ import annotations

import os
import random
import subprocess
import sys
import time

DOCUMENTS = 24


def make_doc(i: int) -> bytes:
    rnd = random.Random(i)
    words = [
        "".join(rnd.choice("abcdefghij") for _ in range(rnd.randint(3, 9))) for _ in range(400)
    ]
    return " ".join(rnd.choice(words) for _ in range(60_000)).encode()


def compress(data: bytes) -> bytes:
    threads = os.environ.get("XZ_THREADS", "1")
    blocks = ["--block-size=64KiB"] if threads != "1" else []  # one block: one thread
    cmd = ["xz", "-6", "-c", f"-T{threads}", *blocks]
    return subprocess.run(cmd, input=data, capture_output=True, check=True).stdout


def main(fixed: bool) -> float:
    if not fixed:
        sizes = [(len(doc), len(compress(doc))) for doc in map(make_doc, range(DOCUMENTS))]
    else:
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(max_workers=os.cpu_count()) as pool:
            docs = [(doc, pool.submit(compress, doc)) for doc in map(make_doc, range(DOCUMENTS))]
            sizes = [(len(doc), len(packed.result())) for doc, packed in docs]
    return sum(out for _, out in sizes) / sum(n for n, _ in sizes)


def timed() -> None:
    """``COMPRESS_TIMERS=1``: the shares of the wall, and the children's CPU."""
    import resource

    spent = {"make_doc": 0.0, "compress": 0.0}
    for name in spent:
        inner = globals()[name]

        def wrapper(*args, _inner=inner, _name=name):  # type: ignore[no-untyped-def]
            started = time.perf_counter()
            try:
                return _inner(*args)
            finally:
                spent[_name] += time.perf_counter() - started

        globals()[name] = wrapper
    started = time.perf_counter()
    main(fixed=False)
    wall = time.perf_counter() - started
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    own = resource.getrusage(resource.RUSAGE_SELF)
    print({k: round(v / wall, 3) for k, v in spent.items()}, f"wall {wall:.2f} s")
    print(f"children's CPU {children.ru_utime + children.ru_stime:.2f} s, "
          f"the job's own {own.ru_utime + own.ru_stime:.2f} s")  # fmt: skip


if __name__ == "__main__":
    if os.environ.get("COMPRESS_TIMERS"):
        timed()
    else:
        print(f"ratio {main('--fixed' in sys.argv):.3f}")
