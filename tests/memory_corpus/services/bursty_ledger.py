"""A settlement worker whose jobs come in bursts, and whose ledger of settled jobs is never
trimmed (a leak that follows the work, not the clock).

Jobs arrive in bursts of 40-400 (a seeded random draw), each settled in ~0.15 ms of Python
(a checksum over its lines) and recorded as an entry of 5.1 KB (tracemalloc over 2,000
jobs) appended to a module-level list; between bursts the worker sleeps 0.2-1.5 s. So
memory climbs during each burst and holds through each gap: in time, an irregular
staircase; per job, a straight line.
Each job is a ``probe.request`` (its id never repeats); ``--no-spans`` runs it
undecorated, so a diagnosis knows no request count and judges it in time.

    python bursty_ledger.py [--seconds S] [--no-spans]

Truth: leak (by construction: one 5.1-KB entry a job, kept forever); measured from
outside without probe by ``record.py --verify`` (the worker run four times as long, its
RSS read from /proc at 10 Hz: every quarter's floor above the one before). Written after
the leak detectors, as a case they were not designed for.
"""

from __future__ import annotations

import argparse
import contextlib
import random
import time
import uuid

import probe

LEDGER: list[dict[str, object]] = []


def settle(job: int) -> dict[str, object]:
    lines = [f"job-{job}-line-{k:03d}:{(job * 7919 + k) % 10007:05d}" for k in range(60)]
    checksum = 0
    for line in lines:
        for ch in line:
            checksum = (checksum * 31 + ord(ch)) & 0xFFFFFFFF
    return {"job": job, "lines": lines, "checksum": checksum}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seconds", type=float, default=12.0, help="serve for this long")
    p.add_argument("--no-spans", action="store_true", help="no probe.request per job")
    args = p.parse_args()
    rng = random.Random(11)
    deadline = time.monotonic() + args.seconds
    job = 0
    while time.monotonic() < deadline:
        for _ in range(rng.randint(40, 400)):
            rid = uuid.uuid4().hex
            with contextlib.nullcontext() if args.no_spans else probe.request(id=rid):
                LEDGER.append(settle(job))  # the leak: nothing ever trims the ledger
            job += 1
            if time.monotonic() >= deadline:
                break
        time.sleep(min(rng.uniform(0.2, 1.5), max(0.0, deadline - time.monotonic())))


if __name__ == "__main__":
    main()
