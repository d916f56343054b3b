"""One keep-alive HTTP/1.1 connection of the load driver: h11 (the sans-I/O HTTP/1.1
library uvicorn and httpx build on) over asyncio streams.

A request sent on a connection the server had already closed (uvicorn closes one after
an unhandled exception's 500 without a ``Connection: close``) is sent once more on a
fresh connection, as HTTP clients do for a stale keep-alive connection, when nothing of
an answer had come back: the server never read it. Anything else is the request's error.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

import h11

from probe.load.mix import RequestSpec
from probe.serving.routes import ID_HEADER

__all__ = ["Answer", "Connection", "ID_HEADER"]


_READ = 65536


@dataclass(frozen=True)
class Answer:
    status: int  # 0: no answer
    error: str  # "" when an answer came back
    resent: bool  # sent again on a fresh connection (module doc)


class Connection:
    def __init__(self, host: str, port: int, timeout_s: float) -> None:
        self.host, self.port, self.timeout_s = host, port, timeout_s
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._h11 = h11.Connection(h11.CLIENT)
        self.used = False  # a request has gone out on the current socket
        self._answering = False  # the current request's answer has begun to come back

    async def _open(self) -> None:
        self.close()
        self._reader, self._writer = await asyncio.wait_for(
            asyncio.open_connection(self.host, self.port), self.timeout_s
        )
        self._h11 = h11.Connection(h11.CLIENT)
        self.used = False

    def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
        self._reader = self._writer = None

    async def send(self, spec: RequestSpec, request_id: str) -> Answer:
        stale = self._writer is not None and self.used
        for resent in (False, True):
            try:
                status = await self._exchange(spec, request_id)
            except TimeoutError:  # before OSError, of which it is a subclass
                self.close()
                return Answer(0, f"no answer in {self.timeout_s:g} s", resent)
            except (OSError, h11.ProtocolError, asyncio.IncompleteReadError) as e:
                again = stale and not resent and not self._answering
                self.close()
                if not again:
                    return Answer(0, f"{type(e).__name__}: {e}", resent)
            else:
                return Answer(status, "", resent)
        raise AssertionError("unreachable: the second try always answers")

    async def _exchange(self, spec: RequestSpec, request_id: str) -> int:
        """The answer's status."""
        if self._writer is None:
            await self._open()
        assert self._reader is not None and self._writer is not None
        headers = [
            ("host", f"{self.host}:{self.port}"),
            ("content-length", str(len(spec.body))),
            (ID_HEADER, request_id),
            *spec.headers,
        ]
        conn = self._h11
        data = conn.send(h11.Request(method=spec.method, target=spec.path, headers=headers))
        if spec.body:
            data = (data or b"") + (conn.send(h11.Data(data=spec.body)) or b"")
        data = (data or b"") + (conn.send(h11.EndOfMessage()) or b"")
        self._answering = False
        self._writer.write(data)
        self.used = True
        status = await asyncio.wait_for(self._response(), self.timeout_s)
        if conn.our_state is h11.DONE and conn.their_state is h11.DONE:
            conn.start_next_cycle()
        else:  # the server closes it (Connection: close) or the exchange broke off
            self.close()
        return status

    async def _response(self) -> int:
        assert self._reader is not None and self._writer is not None
        await self._writer.drain()
        status = 0
        while True:
            event = self._h11.next_event()
            if event is h11.NEED_DATA:
                chunk = await self._reader.read(_READ)
                self._answering = self._answering or bool(chunk)
                self._h11.receive_data(chunk)
            elif isinstance(event, h11.Response):
                status = event.status_code
            elif isinstance(event, h11.EndOfMessage):
                return status
            elif isinstance(event, h11.ConnectionClosed):
                raise ConnectionResetError("the server closed the connection")
