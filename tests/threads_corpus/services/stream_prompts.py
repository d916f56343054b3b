"""An asyncio job that asks a model server for completions, streamed token by token,
nothing decorated: the server (a separate process on 127.0.0.1, a thread per
connection) answers each prompt with its tokens one line at a time, a token every
~10 ms, as an LLM server's streamed response would, then ``[DONE]``. The job asks its
prompts one after another and reads each answer to its end (``complete``).

    python stream_prompts.py [--prompts 24] [--tokens 16] [--keep-alive] [--concurrent N]

``--keep-alive``: one connection for every prompt (a request line, then the answer)
instead of a connection each. ``--concurrent N``: N prompts in flight at once
(``asyncio.gather`` behind a semaphore).

Truth, measured from outside (``stream_prompts.truth.json``: ``python
tests/threads_corpus/measure.py stream_prompts``, 2026-12-05): 4.19 s; the one thread
asleep in its selector (``do_epoll_wait``) at 93% of the readings, 0.05 cores. Plain
runs, alternated three times (``/usr/bin/time``'s wall, written and measured before
probe ran on it): 24 prompts of 16 tokens, a connection each, 4.08-4.14 s one at a time
against 0.63-0.67 s with ``--concurrent 8`` (6.4x); over one kept-alive connection
4.06-4.09 s. One prompt of 300 tokens (``--prompts 1 --tokens 300``): 3.21 s, and
3.17-3.24 s with ``--concurrent 8``: the server's pace is the answer's, nothing the job
does changes it.
"""

from __future__ import annotations

import argparse
import asyncio
import subprocess
import sys

SERVER = """
import socketserver, sys, time

class Complete(socketserver.StreamRequestHandler):
    def handle(self):
        for line in self.rfile:
            tokens = int(line.split()[0])
            for i in range(tokens):
                time.sleep(0.01)
                self.wfile.write(f"data: token-{i}\\n".encode())
                self.wfile.flush()
            self.wfile.write(b"data: [DONE]\\n")
            self.wfile.flush()

class Server(socketserver.ThreadingTCPServer):
    daemon_threads = True
    request_queue_size = 128  # socketserver's 5 drops connects made together

with Server(("127.0.0.1", 0), Complete) as server:
    print(server.server_address[1], flush=True)
    server.serve_forever()
"""


async def read_answer(reader: asyncio.StreamReader) -> list[str]:
    tokens = []
    while (line := await reader.readline()) and line != b"data: [DONE]\n":
        tokens.append(line.decode()[6:].strip())
    return tokens


async def complete(port: int, prompt: int, tokens: int, connection=None) -> str:
    reader, writer = connection or await asyncio.open_connection("127.0.0.1", port)
    writer.write(f"{tokens} prompt-{prompt}\n".encode())
    await writer.drain()
    answer = " ".join(await read_answer(reader))
    if connection is None:
        writer.close()
        await writer.wait_closed()
    return answer


async def run(port: int, args: argparse.Namespace) -> int:
    if args.concurrent:
        limit = asyncio.Semaphore(args.concurrent)

        async def bounded(prompt: int) -> str:
            async with limit:
                return await complete(port, prompt, args.tokens)

        answers = await asyncio.gather(*(bounded(p) for p in range(args.prompts)))
        return len(answers)
    connection = await asyncio.open_connection("127.0.0.1", port) if args.keep_alive else None
    answers = [await complete(port, p, args.tokens, connection) for p in range(args.prompts)]
    if connection is not None:
        connection[1].close()
        await connection[1].wait_closed()
    return len(answers)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--prompts", type=int, default=24)
    parser.add_argument("--tokens", type=int, default=16)
    parser.add_argument("--keep-alive", action="store_true")
    parser.add_argument("--concurrent", type=int, default=0)
    args = parser.parse_args()
    server = subprocess.Popen([sys.executable, "-c", SERVER], stdout=subprocess.PIPE, text=True)
    try:
        port = int(server.stdout.readline())  # type: ignore[union-attr]
        print(asyncio.run(run(port, args)), "answers")
    finally:
        server.terminate()
        server.wait()


if __name__ == "__main__":
    main()
