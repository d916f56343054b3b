"""An asyncio client that enriches records: for each record it asks an upstream (a
separate asyncio process on 127.0.0.1, a line protocol, 40 ms an answer) for the
record's profile and then its price, one call after the other (``lookup``, a connection
each, over asyncio streams), then merges the two (``merge``, a little pure Python).
Eight records are in flight at a time (a semaphore).

Its bottleneck is the network wait in ``lookup``: the event loop's thread is asleep in
its selector almost all the time (the process uses a few percent of a core). Truth,
measured from outside: ``enrich_async.truth.json`` (``python tests/threads_corpus/measure.py
enrich_async``).

``--gather`` asks for the profile and the price at once (``asyncio.gather``): each record
then waits for one round trip instead of two.

    python enrich_async.py [--records 300] [--gather]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys

UPSTREAM = """
import asyncio, json

async def answer(reader, writer):
    while line := await reader.readline():
        await asyncio.sleep(0.040)
        value = {"key": line.decode().strip(), "value": len(line) * 7 % 101}
        writer.write(json.dumps(value).encode() + b"\\n")
        await writer.drain()
    writer.close()

async def main():
    server = await asyncio.start_server(answer, "127.0.0.1", 0)
    print(server.sockets[0].getsockname()[1], flush=True)
    await server.serve_forever()

asyncio.run(main())
"""


async def lookup(port: int, key: str) -> dict:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(key.encode() + b"\n")
    await writer.drain()
    line = await reader.readline()
    writer.close()
    await writer.wait_closed()
    return json.loads(line)


def merge(record: int, profile: dict, price: dict) -> dict:
    fields = {f"f{k}": (record * k + profile["value"]) % 97 for k in range(40)}
    return {"id": record, "price": price["value"], **fields}


async def enrich(port: int, record: int, gate: asyncio.Semaphore, together: bool) -> dict:
    async with gate:
        if together:
            profile, price = await asyncio.gather(
                lookup(port, f"profile {record}"), lookup(port, f"price {record}")
            )
        else:
            profile = await lookup(port, f"profile {record}")
            price = await lookup(port, f"price {record}")
        return merge(record, profile, price)


async def run(port: int, records: int, together: bool) -> int:
    gate = asyncio.Semaphore(8)
    results = await asyncio.gather(*(enrich(port, r, gate, together) for r in range(records)))
    return len(results)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=300)
    parser.add_argument("--gather", action="store_true", help="both calls at once")
    args = parser.parse_args()
    upstream = subprocess.Popen([sys.executable, "-c", UPSTREAM], stdout=subprocess.PIPE, text=True)
    try:
        assert upstream.stdout is not None
        port = int(upstream.stdout.readline())
        done = asyncio.run(run(port, args.records, args.gather))
        print(f"enriched {done} records", file=sys.stderr)
    finally:
        upstream.terminate()
        upstream.wait()
    return 0


if __name__ == "__main__":
    sys.exit(main())
