"""What the ASGI and WSGI middlewares share: a request span's start and end, the
template's display form, and where the handler's code is."""

from __future__ import annotations

import functools
import inspect
import re
import time
from typing import Any

from probe.spans import Span

__all__ = [
    "ID_HEADER",
    "NO_ROUTE",
    "RECEIVED_KEY",
    "Phases",
    "code_location",
    "django_route",
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


# Where a server that knows when it parsed a request leaves that instant in the ASGI
# scope (perf_counter_ns; uvicorn: ``hooks._patch_uvicorn_cycles``)
RECEIVED_KEY = "probe.received_ns"


class Phases:
    """A request's phases, as offsets in ns from its span's start (read right after it):
    ``first_byte_ns`` when the app started its response (ASGI's ``http.response.start``,
    WSGI's ``start_response``), ``answered_ns`` when it handed over the last of the body
    -- the client's answer; what runs after it (an app's clean-up) is the request's time
    but not its latency -- and ``queued_ns``, before the start, where the server says
    when it had parsed the request: the time it waited for the event loop to start its
    handler (the loop's lag as this request saw it)."""

    __slots__ = ("first_byte", "answered", "queued", "t0")

    def __init__(self, received_ns: object = None) -> None:
        self.t0 = time.perf_counter_ns()
        self.first_byte: int | None = None
        self.answered: int | None = None
        self.queued = max(0, self.t0 - received_ns) if isinstance(received_ns, int) else None

    def started(self) -> None:
        if self.first_byte is None:
            self.first_byte = time.perf_counter_ns() - self.t0

    def answered_now(self) -> None:
        if self.answered is None:
            self.answered = time.perf_counter_ns() - self.t0

    def into(self, attrs: dict[str, Any]) -> None:
        measured = {
            "queued_ns": self.queued,
            "first_byte_ns": self.first_byte,
            "answered_ns": self.answered,
        }
        attrs.update({k: v for k, v in measured.items() if v is not None})


def werkzeug_template(rule: str) -> str:
    """``/items/<int:item_id>`` as ``/items/{item_id}``: one spelling of a path parameter
    for every framework, the one Starlette and OpenAPI use."""
    return _CONVERTER.sub(r"{\1}", rule)


# (?P<name>...) in a regular-expression route (Django's re_path)
_NAMED_GROUP = re.compile(r"\(\?P<([^<>]+)>(?:[^()]|\([^()]*\))*\)")


def django_route(match: Any, method: str) -> tuple[str | None, tuple[str, str] | None]:
    """The template and handler of a Django ``ResolverMatch``: ``/items/{item_id}/`` for
    ``path("items/<int:item_id>/", ...)`` under any ``include()`` (its ``route`` is the
    whole route), a regular-expression route's named groups as ``{name}``; the view
    function, or a class-based view's method for the request's verb (``get``...)."""
    route = getattr(match, "route", None)
    template = None
    if isinstance(route, str):
        named = _NAMED_GROUP.sub(r"{\1}", route).lstrip("^").rstrip("$")
        template = "/" + werkzeug_template(named)
    view = getattr(match, "func", None)
    view_class = getattr(view, "view_class", None)
    if view_class is not None:
        view = getattr(view_class, method.lower(), None) or getattr(view_class, "dispatch", view)
    return template, code_location(view)


def code_location(handler: Any) -> tuple[str, str] | None:
    """``("filename:first_line", qualname)`` of a handler function (through decorators
    that kept ``__wrapped__``), or None for what is not a Python function.

    Read once a handler: every request asks for its endpoint's, and unwrapping it and
    formatting the location took ~12% of the ASGI middleware's time a request (cProfile
    of 5,000 requests to a do-nothing FastAPI route, 2026-12-02). The cache holds the
    handlers it saw (a server's endpoints, which live as long as its app), at most
    ``_LOCATIONS_KEPT``; an unhashable callable is read each time."""
    if handler is None:
        return None
    try:
        return _cached_location(handler)
    except TypeError:  # unhashable: a callable object defining __eq__ without __hash__
        return _location(handler)


# A server's distinct endpoints: hundreds at most; a bound on what the cache keeps alive
_LOCATIONS_KEPT = 1024


def _location(handler: Any) -> tuple[str, str] | None:
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


_cached_location = functools.lru_cache(maxsize=_LOCATIONS_KEPT)(_location)


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
