"""What the asyncio task sampler costs a tick, by the number of pending tasks.

A loop runs in a thread with N tasks suspended (half in a stream read on a silent
socket, half queued on a semaphore, as a client with a concurrency limit looks); the
stack sampler and the task sampler tick from the main thread as probe's sampler thread
would, and the mean time of the task sampler's tick is printed -- first with every task
still on the future it waited on at the last tick (the steady state: none walked again),
then with each task moved since (every chain walked, up to the per-tick cap) -- and how
many ticks a second probe then takes, spacing them to cost at most 1% of the time. Last,
what the loop-lag reading made at every stack tick costs alone (each loop's ready queue
and running task, ``loop_samples``): it is not spaced.

    python benchmarks/task_sampler_cost.py [--tasks 10 100 1000] [--ticks 300]
"""

from __future__ import annotations

import argparse
import asyncio
import socket
import threading
import time
from typing import Any

from probe.samplers.stacks import StackSampler
from probe.samplers.tasks import TaskSampler


async def suspended(port: int, gate: asyncio.Semaphore) -> None:
    async with gate:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        try:
            await reader.readline()  # the server never answers
        finally:
            writer.close()


def start_loop(n: int, server: socket.socket) -> tuple[asyncio.AbstractEventLoop, list[Any]]:
    loop = asyncio.new_event_loop()
    threading.Thread(target=loop.run_forever, daemon=True).start()
    tasks: list[Any] = []

    async def spawn() -> None:
        gate = asyncio.Semaphore(max(1, n // 2))
        port = server.getsockname()[1]
        tasks.extend(asyncio.ensure_future(suspended(port, gate)) for _ in range(n))
        await asyncio.sleep(0.5)

    asyncio.run_coroutine_threadsafe(spawn(), loop).result(timeout=30)
    return loop, tasks


def stop_loop(loop: asyncio.AbstractEventLoop, tasks: list[Any]) -> None:
    async def cancel() -> None:
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    asyncio.run_coroutine_threadsafe(cancel(), loop).result(timeout=30)
    loop.call_soon_threadsafe(loop.stop)


def mean_tick_us(sampler: TaskSampler, ticks: int, forget: bool) -> float:
    spent = 0.0
    for _ in range(ticks):
        if forget:
            sampler._known.clear()  # every task moved since the last tick
        started = time.perf_counter()
        sampler.sample()
        spent += time.perf_counter() - started
        sampler.drain()
        time.sleep(0.001)
    return spent / ticks * 1e6


def mean_loop_read_us(sampler: TaskSampler, reads: int) -> float:
    started = time.perf_counter()
    for k in range(reads):
        sampler._read_loops(k)
    spent = time.perf_counter() - started
    sampler.drain()
    return spent / reads * 1e6


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--tasks", type=int, nargs="+", default=[10, 100, 1000])
    p.add_argument("--ticks", type=int, default=300)
    args = p.parse_args()
    server = socket.create_server(("127.0.0.1", 0), backlog=4096)
    print(
        f"{'tasks':>6}  {'steady tick':>12}  {'all moved':>10}  {'ticks at 1%':>16}  "
        f"{'loop read':>10}"
    )
    for n in args.tasks:
        loop, tasks = start_loop(n, server)
        stacks = StackSampler()
        stacks.sample()  # registers the loop's thread
        # unspaced (an infinite budget): the cost of every tick, as probe's budget sees it
        sampler = TaskSampler(
            stack_of=stacks.await_stack_id,
            thread_of=stacks.thread_id_of,
            budget_share=float("inf"),
        )
        sampler.sample()
        steady = mean_tick_us(sampler, args.ticks, forget=False)
        moved = mean_tick_us(sampler, args.ticks, forget=True)
        rate = min(100.0, 0.01 / (steady / 1e6))  # probe's budget: 1% of the time, <= 100 Hz
        read = mean_loop_read_us(sampler, args.ticks * 10)
        print(f"{n:>6}  {steady:>10.0f}us  {moved:>8.0f}us  {rate:>9.0f} a second  {read:>8.1f}us")
        stop_loop(loop, tasks)
    server.close()


if __name__ == "__main__":
    main()
