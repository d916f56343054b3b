"""ASGI middleware: one ``probe.request`` span per HTTP request (see the package doc).

The span is opened in the request's own task before the app runs, so everything the app
does for the request -- its awaits, the tasks it starts, the work it sends to a worker
thread -- runs in the request's context. It is named when the app is done, from the
route the router matched. Its attributes: ``method``, ``route`` (the template, or None),
``status`` (the response's, None if none was started), ``error`` (an exception escaped
the app, or a 5xx), ``handler`` (``filename:first_line`` of the endpoint function, which
the per-endpoint analysis finds in stack samples) and ``handler_name``.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable, MutableMapping
from contextvars import ContextVar
from typing import Any

from probe.serving.loop_lag import LoopLag
from probe.serving.routes import (
    ID_HEADER,
    RECEIVED_KEY,
    Phases,
    code_location,
    end_request,
    start_request,
)
from probe.spans import Span, active_recorder, current_request_id

__all__ = ["RequestSpans", "route_of", "worker_thread_spans"]

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]

_ID_KEY = ID_HEADER.encode()  # ASGI headers: lower-case bytes

# The scope of the request the caller runs in: a worker-thread span is named after the
# route's endpoint when it runs it (FastAPI hands the worker a runner with the endpoint
# as an argument). Held through a _ScopeRef emptied when the request ends, never as the
# scope itself: what the app calls while it runs copies the request's context and may
# keep the copy long after -- uvicorn schedules its keep-alive timer from inside the last
# send, and a cancelled timer stays in the loop's heap, its context with it, until the
# loop purges it. A scope held there kept everything the app hung on it (FastAPI's exit
# stacks, the request) alive for ~100 requests: on a no-op FastAPI route under uvicorn,
# ~10x plain's gen-0 collections, two full collections of ~48 ms in 6 s, and 381 against
# 322 us of the server's CPU a request (2026-12-02, /proc, 5 alternated rounds).
_scope: ContextVar[_ScopeRef | None] = ContextVar("probe_request_scope", default=None)


class _ScopeRef:
    """The request's scope while it runs; None once it has ended."""

    __slots__ = ("scope",)

    def __init__(self, scope: Scope) -> None:
        self.scope: Scope | None = scope


def route_of(scope: Scope) -> str | None:
    """The route template the app's router matched: Starlette's (and FastAPI's) router
    leaves the route in ``scope["route"]``; under a ``Mount`` the scope's ``root_path``
    holds the mount's prefix. Django's (``hooks._patch_django_routes``) is in
    ``scope["probe.route"]``."""
    if isinstance(scope.get("probe.route"), str):
        return str(scope["probe.route"])
    route = scope.get("route")
    template = getattr(route, "path_format", None) or getattr(route, "path", None)
    if not isinstance(template, str):
        return None
    return f"{scope.get('root_path') or ''}{template}"


class RequestSpans:
    """Wraps an ASGI app; anything but an HTTP request passes through untouched."""

    def __init__(self, app: Callable[..., Awaitable[None]]) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope.get("type") != "http" or active_recorder() is None:
            await self.app(scope, receive, send)
            return
        sent_id = None
        for name, value in scope.get("headers") or ():
            if name == _ID_KEY:
                sent_id = value
                break
        span, attrs = start_request(str(scope.get("method") or "GET"), sent_id)
        phases = Phases(scope.get(RECEIVED_KEY))
        lag = LoopLag.of_running_loop()
        opened = lag.opened() if lag is not None else 0

        async def send_seen(message: Message) -> None:
            kind = message.get("type")
            if kind == "http.response.start":
                attrs["status"] = int(message.get("status") or 0)
                phases.started()
            await send(message)
            if kind == "http.response.body" and not message.get("more_body"):
                phases.answered_now()

        ref = _ScopeRef(scope)
        token = _scope.set(ref)
        try:
            await self.app(scope, receive, send_seen)
        except BaseException:
            attrs["error"] = True
            raise
        finally:
            ref.scope = None
            _scope.reset(token)
            handler = scope.get("probe.handler") or code_location(scope.get("endpoint"))
            phases.into(attrs)
            if lag is not None:
                attrs["loop_lag_ns"] = lag.closed(opened)
            end_request(span, attrs, route_of(scope), handler)


def worker_thread_spans(run_sync: Callable[..., Awaitable[Any]]) -> Callable[..., Awaitable[Any]]:
    """``anyio.to_thread.run_sync`` that, inside a request, runs the function in a span
    of its own on the worker thread (named after the function): AnyIO hands the worker
    the caller's context, so the span is the request's, and the worker's stack samples
    fall in it. Outside a request, the call is left as it was."""

    @functools.wraps(run_sync)
    async def run_sync_in_request(func: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        if current_request_id() is None:
            return await run_sync(func, *args, **kwargs)
        return await run_sync(_in_span(func), *args, **kwargs)

    return run_sync_in_request


def _in_span(func: Callable[..., Any]) -> Callable[..., Any]:
    ref = _scope.get()
    scope = ref.scope if ref is not None else None
    span = Span(_worker_name(func, scope), "span", {"served": True})

    def in_span(*args: Any) -> Any:
        with span:
            return func(*args)

    return in_span


def _worker_name(func: Callable[..., Any], scope: Scope | None) -> str:
    """The route's endpoint's name when the call runs it (as the function, or as an
    argument of a partial: FastAPI's runner), else the function's own."""
    endpoint = scope.get("endpoint") if scope is not None else None
    inner: Any = func
    while isinstance(inner, functools.partial):
        if endpoint is not None and (
            inner.func is endpoint
            or any(a is endpoint for a in inner.args)
            or any(v is endpoint for v in inner.keywords.values())
        ):
            inner = endpoint
            break
        inner = inner.func
    name = getattr(inner, "__qualname__", None) or getattr(inner, "__name__", None) or "worker"
    return str(name).rsplit("<locals>.", 1)[-1]
