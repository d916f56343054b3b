"""The load driver: closed loop (N clients, each sending its next request when the last is
answered) or open loop (requests due at a fixed rate, whatever the answers do).

**Open-loop latency runs from the intended send time**, not the actual one: when the
server stalls, the requests due meanwhile go out late (no connection free, the loop
behind), and their latency carries the stall, as a user arriving at that moment would see
it. Measured from the actual send, a stall hides behind the few requests it held up (the
"coordinated omission" of load testers, Tene's HdrHistogram/wrk2 notes). A send more
than ``LATE_NS`` after its due time is late; ``figures`` warns past 1% of them.

Every request carries its id in ``client.ID_HEADER`` (``L<n>``); requests due during the
warm-up are sent and recorded, flagged, and left out of the figures.
"""

from __future__ import annotations

import asyncio
import itertools
import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from probe.load.client import Connection
from probe.load.mix import Mix, RequestSpec

__all__ = ["LATE_NS", "LoadSettings", "Record", "drive"]

# A send this long after it was due is late. On time is not instant: asyncio's timers
# wake on epoll's millisecond grain, and a busy machine adds a scheduling slice. Measured
# at 100 requests a second against tests/serving_corpus/shop_api.py on the 2-core machine
# class, a test suite running beside it: sends left 0.2-4.6 ms after due, median 0.9 ms
# (26 of 300 past 2 ms). Past 5 ms the driver itself, or a full pool, held the request.
LATE_NS = 5_000_000


@dataclass(frozen=True)
class LoadSettings:
    concurrency: int | None = 8  # closed loop: clients; None with a rate
    rate: float | None = None  # open loop: requests a second
    duration_s: float = 10.0  # measured, after the warm-up
    warmup_s: float = 0.0
    timeout_s: float = 10.0  # per request
    max_connections: int = 256  # open loop: the most requests in flight
    seed: int = 0  # the mix's choices


@dataclass(frozen=True)
class Record:
    label: str
    request_id: str
    intended_ns: int  # when it was due (closed loop: when it was sent)
    sent_ns: int
    done_ns: int
    status: int  # 0: no answer
    error: str
    resent: bool
    warmup: bool

    @property
    def latency_ns(self) -> int:
        return self.done_ns - self.intended_ns


def drive(
    host: str,
    port: int,
    mix: Mix,
    settings: LoadSettings,
    *,
    clock: Callable[[], int] = time.perf_counter_ns,
) -> list[Record]:
    """Run the load to its end; the records of every request sent, in send order."""
    return asyncio.run(_drive(host, port, mix, settings, clock))


async def _drive(
    host: str, port: int, mix: Mix, s: LoadSettings, clock: Callable[[], int]
) -> list[Record]:
    start = clock()
    warm_end = start + int(s.warmup_s * 1e9)
    end = warm_end + int(s.duration_s * 1e9)
    rng = random.Random(s.seed)
    ids = itertools.count(1)
    records: list[Record] = []

    async def one(conn: Connection, spec: RequestSpec, intended: int) -> None:
        request_id = f"L{next(ids)}"
        sent = clock()
        answer = await conn.send(spec, request_id)
        records.append(
            Record(spec.label, request_id, intended, sent, clock(), answer.status,
                   answer.error, answer.resent, intended < warm_end)
        )  # fmt: skip

    if s.rate is None:
        await _closed(host, port, mix, s, rng, clock, end, one)
    else:
        await _open(host, port, mix, s, rng, clock, start, end, one)
    records.sort(key=lambda r: r.sent_ns)
    return records


# sends one request on a connection, due at the given instant, and records it
Send = Callable[[Connection, RequestSpec, int], Awaitable[None]]


async def _closed(
    host: str,
    port: int,
    mix: Mix,
    s: LoadSettings,
    rng: random.Random,
    clock: Callable[[], int],
    end: int,
    one: Send,
) -> None:
    async def client() -> None:
        conn = Connection(host, port, s.timeout_s)
        try:
            while clock() < end:
                await one(conn, mix.pick(rng), clock())
        finally:
            conn.close()

    await asyncio.gather(*(client() for _ in range(s.concurrency or 1)))


async def _open(
    host: str,
    port: int,
    mix: Mix,
    s: LoadSettings,
    rng: random.Random,
    clock: Callable[[], int],
    start: int,
    end: int,
    one: Send,
) -> None:
    interval = 1e9 / float(s.rate or 1.0)
    idle: asyncio.LifoQueue[Connection] = asyncio.LifoQueue()
    opened: list[Connection] = []
    in_flight: set[asyncio.Task[None]] = set()

    async def on(conn: Connection, spec: RequestSpec, due: int) -> None:
        try:
            await one(conn, spec, due)
        finally:
            idle.put_nowait(conn)

    try:
        for n in itertools.count():
            due = start + int(n * interval)
            if due >= end:
                break
            wait = (due - clock()) / 1e9
            if wait > 0:
                await asyncio.sleep(wait)
            if idle.empty() and len(opened) < s.max_connections:
                opened.append(Connection(host, port, s.timeout_s))
                idle.put_nowait(opened[-1])
            conn = await idle.get()  # all busy at the most connections: this one goes late
            task = asyncio.create_task(on(conn, mix.pick(rng), due))
            in_flight.add(task)
            task.add_done_callback(in_flight.discard)
        if in_flight:
            await asyncio.wait(in_flight, timeout=s.timeout_s * 2)
    finally:
        for task in in_flight:
            task.cancel()
        for conn in opened:
            conn.close()
