"""An asyncio service that fires a background task a request and never awaits or
cancels it: each task waits on a future nobody completes, holding its request's ~8 KB
payload, and the pending tasks pile up, one a request.

Truth: leak, ~0.8-1.0 MB/s (by construction: ~10 KiB a request kept by a pending task);
``record.py --verify`` checks it over a run four times as long. Written after the
detector, as a case it was not designed for.
"""

from __future__ import annotations

import argparse
import asyncio
import uuid

import probe


async def audit(payload: bytearray, never: asyncio.Future[None]) -> None:
    await never  # completed by nobody


async def handle(request_id: str, never: asyncio.Future[None], tasks: set[object]) -> None:
    await asyncio.sleep(0.01)  # the upstream
    payload = bytearray(8000) + request_id.encode()
    tasks.add(asyncio.ensure_future(audit(payload, never)))


async def serve(requests: int) -> None:
    never: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    tasks: set[object] = set()
    for _ in range(requests):
        rid = uuid.uuid4().hex
        with probe.request(id=rid):
            await handle(rid, never, tasks)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--requests", type=int, default=700)
    asyncio.run(serve(p.parse_args().requests))


if __name__ == "__main__":
    main()
