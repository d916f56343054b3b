"""WSGI middleware: one ``probe.request`` span per HTTP request (see the package doc).

The span opens when the server calls the app and ends when the server has taken the
whole response body (or closes it, as PEP 3333 has it do, whichever comes first), so a
streamed body's time is the request's. Same attributes as the ASGI one (``probe.serving.asgi``).

A WSGI request runs on one thread from the server's call to the body's end, so its CPU is
measured exactly: the thread's CPU clock (``time.thread_time_ns``, ~0.2 us a read) at both
ends, recorded as ``cpu_ns``. Stack samples cannot give it where a server starts a thread
per connection (Werkzeug's threaded server): such a thread lives a few milliseconds, and
a sampler at 100 Hz sees one now and then, and under CPU contention hardly any (a Flask
app's CPU-heavy route read as using less CPU than its light one). Not under gevent or
eventlet, whose greenlets share a thread and its clock, nor when the body ends on another
thread than the one the server called the app on.

Flask: the URL rule Flask matched is read in its ``request_started`` signal (sent once
Flask has matched the URL, before the view runs) and left in the request's environ, where
this middleware reads it when the request ends.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable, Iterator
from threading import get_ident
from time import thread_time_ns
from typing import Any

from probe.serving.routes import (
    ID_HEADER,
    Phases,
    code_location,
    end_request,
    start_request,
    werkzeug_template,
)
from probe.spans import Span, active_recorder

__all__ = ["RequestSpans"]

_ID_KEY = "HTTP_" + ID_HEADER.upper().replace("-", "_")  # as WSGI names a header
_ROUTE_KEY, _HANDLER_KEY = "probe.route", "probe.handler"

StartResponse = Callable[..., Any]


class RequestSpans:
    """Wraps a WSGI app (a Flask app has its URL rule read as well)."""

    def __init__(self, app: Callable[[dict[str, Any], StartResponse], Iterable[bytes]]) -> None:
        self.app = app
        _watch_flask_rules(app)

    def __getattr__(self, name: str) -> Any:  # a server asking the app for its attributes
        return getattr(self.app, name)

    def __call__(self, environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        if active_recorder() is None:
            return self.app(environ, start_response)
        span, attrs = start_request(
            str(environ.get("REQUEST_METHOD") or "GET"), environ.get(_ID_KEY)
        )
        clock = (get_ident(), thread_time_ns()) if _threads_are_real() else None
        phases = Phases()

        def start_seen(status: str, headers: Any, exc_info: Any = None) -> Any:
            phases.started()
            try:
                attrs["status"] = int(str(status).split(" ", 1)[0])
            except ValueError:
                pass
            if exc_info is None:
                return start_response(status, headers)
            return start_response(status, headers, exc_info)

        try:
            body = self.app(environ, start_seen)
        except BaseException:
            attrs["error"] = True
            _finish(span, attrs, environ, clock, phases)
            raise
        return _Body(body, span, attrs, environ, clock, phases)


class _Body:
    """The app's response body, passed through; closing it ends the request's span."""

    def __init__(
        self,
        body: Iterable[bytes],
        span: Span,
        attrs: dict[str, Any],
        environ: Any,
        clock: tuple[int, int] | None,
        phases: Phases,
    ):
        self._body, self._span, self._attrs, self._environ = body, span, attrs, environ
        self._clock, self._phases = clock, phases
        self._done = False

    def __iter__(self) -> Iterator[bytes]:
        try:
            yield from self._body
        except BaseException:
            self._attrs["error"] = True
            raise
        # The body is sent: the request is over for its client, who may stop the server
        # before the server gets to close() (a span ended only there was lost at Ctrl-C
        # right after the last answer: 79 requests of 80).
        self._phases.answered_now()
        self._end()

    def close(self) -> None:
        try:
            close = getattr(self._body, "close", None)
            if close is not None:
                close()
        finally:
            self._end()

    def _end(self) -> None:
        if not self._done:
            self._done = True
            _finish(self._span, self._attrs, self._environ, self._clock, self._phases)


def _finish(
    span: Span,
    attrs: dict[str, Any],
    environ: dict[str, Any],
    clock: tuple[int, int] | None,
    phases: Phases,
) -> None:
    if clock is not None and clock[0] == get_ident():
        attrs["cpu_ns"] = thread_time_ns() - clock[1]
    phases.into(attrs)
    end_request(span, attrs, environ.get(_ROUTE_KEY), environ.get(_HANDLER_KEY))


def _threads_are_real() -> bool:
    """False under gevent's or eventlet's monkey-patching: greenlets share a thread."""
    gevent = sys.modules.get("gevent.monkey")
    if gevent is not None and gevent.is_module_patched("threading"):
        return False
    eventlet = sys.modules.get("eventlet.patcher")
    return not (eventlet is not None and eventlet.is_monkey_patched("thread"))


def _watch_flask_rules(app: Any) -> None:
    """Have a Flask app leave its matched URL rule and view function in the environ."""
    if not hasattr(app, "url_map") or not hasattr(app, "view_functions"):
        return
    try:
        from flask import request, request_started
    except ImportError:
        return

    def remember_rule(sender: Any, **_: Any) -> None:
        rule = request.url_rule
        if rule is None:
            return
        request.environ[_ROUTE_KEY] = werkzeug_template(rule.rule)
        view = sender.view_functions.get(rule.endpoint)
        request.environ[_HANDLER_KEY] = code_location(view)

    request_started.connect(remember_rule, sender=app, weak=False)
