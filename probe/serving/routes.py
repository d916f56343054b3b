"""What the ASGI and WSGI middlewares share: a request span's start and end, the
template's display form, and where the handler's code is."""

from __future__ import annotations

import inspect
import re
import time
from typing import Any

from probe.spans import Span

__all__ = [
    "ID_HEADER",
    "NO_ROUTE",
    "code_location",
    "end_request",
    "start_request",
    "wait_for_open_requests",
    "werkzeug_template",
]

NO_ROUTE = "(no route)"

# The request spans open now (set.add and set.discard are single calls under the GIL).
_open: set[Span] = set()

# The header ``probe load`` puts on each request (probe.load.client): the request span
# takes it as its id, so a client's latency and the server's span join on it.
ID_HEADER = "x-probe-request-id"
# longer is not an id of ours: a header is the client's to write
_ID_MAX = 64

# <name>, <int:name>, <any(a,b):name>: Werkzeug's converters
_CONVERTER = re.compile(r"<(?:[^<>:]+:)?([^<>:]+)>")


def werkzeug_template(rule: str) -> str:
    """``/items/<int:item_id>`` as ``/items/{item_id}``: one spelling of a path parameter
    for every framework, the one Starlette and OpenAPI use."""
    return _CONVERTER.sub(r"{\1}", rule)


def code_location(handler: Any) -> tuple[str, str] | None:
    """``("filename:first_line", qualname)`` of a handler function (through decorators
    that kept ``__wrapped__``), or None for what is not a Python function."""
    if handler is None:
        return None
    try:
        function = inspect.unwrap(handler)
    except ValueError:  # a __wrapped__ cycle
        function = handler
    code = getattr(function, "__code__", None)
    if code is None:
        call = getattr(function, "__call__", None)  # noqa: B004 - a class-based endpoint
        code = getattr(getattr(call, "__func__", None), "__code__", None)
    if code is None:
        return None
    name = getattr(function, "__qualname__", code.co_name)
    return f"{code.co_filename}:{code.co_firstlineno}", str(name)


def start_request(method: str, sent_id: object) -> tuple[Span, dict[str, Any]]:
    """A request span, entered, and its attributes, filled in by ``end_request``. Its id
    is the one the client sent in ``ID_HEADER`` when that looks like one of ours, else
    probe's own. ``served`` marks the spans the middlewares make (the analysis tells them
    from the user's)."""
    attrs: dict[str, Any] = {
        "served": True,
        "method": method,
        "route": None,
        "status": None,
        "error": False,
    }
    span = Span(f"{method} {NO_ROUTE}", "request", attrs, _client_request_id(sent_id))
    span.__enter__()
    _open.add(span)
    return span, attrs


def end_request(
    span: Span, attrs: dict[str, Any], route: str | None, handler: tuple[str, str] | None
) -> None:
    """Name the request by the route its app matched, mark a 5xx an error, and end it."""
    attrs["route"] = route
    span.name = f"{attrs['method']} {route or NO_ROUTE}"
    status = attrs["status"]
    attrs["error"] = attrs["error"] or (status is not None and status >= 500)
    if handler is not None:
        attrs["handler"], attrs["handler_name"] = handler
    span.__exit__(None, None, None)
    _open.discard(span)


def wait_for_open_requests(timeout_s: float) -> int:
    """Give the requests still open up to ``timeout_s`` to end; how many did not.

    At a stop (Ctrl-C right after the last answer) a request whose response is sent has
    its span end a moment later, on its own thread, once that thread gets the GIL back:
    the run stopped recording first and lost it (199 spans for 200 answered requests,
    under CPU contention)."""
    deadline = time.monotonic() + timeout_s
    while _open and time.monotonic() < deadline:
        time.sleep(0.005)  # the GIL released: the request threads run
    return len(_open)


def _client_request_id(value: object) -> str | None:
    """The id the client sent in ``ID_HEADER`` (bytes or text), if it looks like one."""
    if isinstance(value, bytes):
        value = value.decode("latin-1")
    if not isinstance(value, str) or not value or len(value) > _ID_MAX or not value.isprintable():
        return None
    return value
