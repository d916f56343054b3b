"""probe.serving on real apps called in-process: the request span each HTTP request
becomes (name from the route template, status, error, handler), the worker-thread span
of a sync route, and the import hook that applies the patches."""

from __future__ import annotations

import asyncio
import gc
import json
import sys
import textwrap
import threading
import weakref

import pytest

from probe import spans
from probe.serving import hooks
from probe.serving.asgi import RequestSpans as AsgiSpans
from probe.serving.asgi import worker_thread_spans
from probe.serving.routes import django_route, werkzeug_template
from probe.serving.wsgi import RequestSpans as WsgiSpans


def recorded(rec: spans.SpanRecorder) -> list[dict]:
    keys = ("span_id", "parent_id", "name", "category", "start", "end", "request_id", "attrs")
    return [
        {**dict(zip(keys, row, strict=True)), "thread": buf.ident}
        for buf, rows in rec.drain()
        for row in rows
    ]


def call_asgi(app, method: str, path: str, body: bytes = b"", headers=()) -> list[dict]:
    """One HTTP request through an ASGI app, as a server would make it; the messages sent."""
    scope = {
        "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": method,
        "scheme": "http", "path": path, "raw_path": path.encode(), "query_string": b"",
        "root_path": "", "headers": [(b"content-type", b"application/json"), *headers],
        "client": ("127.0.0.1", 5000), "server": ("127.0.0.1", 8000),
    }  # fmt: skip
    sent: list[dict] = []

    async def receive() -> dict:
        return {"type": "http.request", "body": body, "more_body": False}

    async def send(message: dict) -> None:
        sent.append(message)

    asyncio.run(app(scope, receive, send))
    return sent


@pytest.fixture
def shop():
    fastapi = pytest.importorskip("fastapi")
    app = fastapi.FastAPI()

    @app.post("/predict")
    def predict(payload: dict) -> dict:
        return {"thread": threading.get_ident()}

    @app.get("/items/{item_id}")
    async def item(item_id: int) -> dict:
        if item_id == 13:
            raise fastapi.HTTPException(status_code=404)
        if item_id == 666:
            raise RuntimeError("cursed")
        return {"id": item_id}

    return app


def test_an_asgi_request_is_a_span_named_by_its_route_template_with_its_status(recorder, shop):
    sent = call_asgi(AsgiSpans(shop), "GET", "/items/7")
    assert sent[0]["status"] == 200
    [span] = recorded(recorder)
    assert span["name"] == "GET /items/{item_id}" and span["category"] == "request"
    attrs = span["attrs"]
    assert attrs["route"] == "/items/{item_id}" and attrs["status"] == 200
    assert attrs["error"] is False and attrs["served"] is True
    where, name = attrs["handler"], attrs["handler_name"]
    assert where.startswith(__file__) and name.endswith("item")


def test_a_client_error_is_not_an_error_and_an_escaping_exception_is(recorder, shop):
    call_asgi(AsgiSpans(shop), "GET", "/items/13")
    with pytest.raises(RuntimeError, match="cursed"):
        call_asgi(AsgiSpans(shop), "GET", "/items/666")
    not_found, cursed = recorded(recorder)
    assert not_found["attrs"]["status"] == 404 and not_found["attrs"]["error"] is False
    assert cursed["attrs"]["error"] is True and cursed["name"] == "GET /items/{item_id}"


def test_a_path_no_route_matched_is_named_no_route_never_by_the_raw_path(recorder, shop):
    call_asgi(AsgiSpans(shop), "GET", "/secret/user-4711")
    [span] = recorded(recorder)
    assert span["name"] == "GET (no route)" and span["attrs"]["status"] == 404


def test_a_sync_route_s_work_on_a_worker_thread_is_a_span_of_its_request(
    recorder, shop, monkeypatch
):
    import anyio.to_thread

    monkeypatch.setattr(anyio.to_thread, "run_sync", worker_thread_spans(anyio.to_thread.run_sync))
    sent = call_asgi(AsgiSpans(shop), "POST", "/predict", b"{}")
    worker_thread = json.loads(sent[1]["body"])["thread"]
    by_name = {s["name"]: s for s in recorded(recorder)}
    request, work = by_name["POST /predict"], by_name["predict"]
    # named after the endpoint (FastAPI hands the worker a runner with it as argument)
    assert work["thread"] == worker_thread != request["thread"]
    assert work["request_id"] == request["request_id"] and work["parent_id"] == request["span_id"]
    assert work["attrs"] == {"served": True}


def test_outside_a_request_the_worker_call_is_left_as_it_was(recorder):
    import anyio
    import anyio.to_thread

    run_sync = worker_thread_spans(anyio.to_thread.run_sync)
    assert anyio.run(run_sync, threading.get_ident) != threading.get_ident()
    assert recorded(recorder) == []


def test_without_a_recorder_or_for_lifespan_the_app_runs_untouched(shop):
    sent = call_asgi(AsgiSpans(shop), "GET", "/items/7")  # no recorder active
    assert sent[0]["status"] == 200


def test_a_context_copied_during_a_request_does_not_keep_its_scope_alive(recorder):
    """uvicorn schedules its keep-alive timer from inside the request's last send: the
    timer copies the request's context and, cancelled, stays in the loop's heap until a
    purge. What the middleware puts in the context must not hold the scope (and all the
    app hung on it) there; gc is off, so only reference counts free it."""

    class Marker:
        pass

    kept: list[asyncio.TimerHandle] = []

    async def app(scope, receive, send):
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"ok"})

    async def send(message):
        if message["type"] == "http.response.body":  # as uvicorn's on_response_complete
            timer = asyncio.get_running_loop().call_later(60, lambda: None)
            timer.cancel()
            kept.append(timer)

    async def receive():
        return {"type": "http.request", "body": b"", "more_body": False}

    async def one_request() -> weakref.ref:
        scope = {"type": "http", "method": "GET", "path": "/", "headers": [], "app_state": Marker()}
        marker = weakref.ref(scope["app_state"])
        await AsgiSpans(app)(scope, receive, send)
        return marker

    gc.disable()
    try:
        marker = asyncio.run(one_request())
        assert kept and kept[0]._context is not None  # the copy is still held
        assert marker() is None
    finally:
        gc.enable()
    [span] = recorded(recorder)
    assert span["attrs"]["status"] == 200


@pytest.fixture
def flask_app():
    flask = pytest.importorskip("flask")
    app = flask.Flask("shop")

    @app.get("/items/<int:item_id>")
    def item(item_id: int):
        if item_id == 13:
            flask.abort(404)
        if item_id == 666:
            raise RuntimeError("cursed")
        return {"id": item_id}

    return app


def test_a_wsgi_request_is_a_span_named_by_flask_s_rule_spelled_as_a_template(recorder, flask_app):
    from werkzeug.test import Client

    client = Client(WsgiSpans(flask_app))  # buffered: the body taken, as a server does
    assert client.get("/items/7", buffered=True).status_code == 200
    assert client.get("/items/13", buffered=True).status_code == 404
    assert client.get("/items/666", buffered=True).status_code == 500  # Flask answers it itself
    assert client.get("/nowhere", buffered=True).status_code == 404
    ok, missing, cursed, nowhere = recorded(recorder)
    assert ok["name"] == missing["name"] == cursed["name"] == "GET /items/{item_id}"
    assert ok["attrs"]["status"] == 200 and ok["attrs"]["handler_name"].endswith("item")
    assert missing["attrs"]["error"] is False and cursed["attrs"]["error"] is True
    assert nowhere["name"] == "GET (no route)"
    assert ok["category"] == "request" and ok["end"] >= ok["start"]


@pytest.mark.parametrize(
    ("rule", "template"),
    [
        ("/items/<int:item_id>", "/items/{item_id}"),
        ("/u/<name>/posts/<path:rest>", "/u/{name}/posts/{rest}"),
        ("/static", "/static"),
    ],
)
def test_werkzeug_rules_are_spelled_as_starlette_templates(rule, template):
    assert werkzeug_template(rule) == template


def test_a_server_imported_later_is_patched_right_after_its_own_code(tmp_path, monkeypatch):
    (tmp_path / "fake_server.py").write_text(
        textwrap.dedent("""
        VALUE = "as imported"
    """)
    )
    (tmp_path / "broken_server.py").write_text("X = 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    seen = []

    def patch(module):
        seen.append(module.VALUE)
        module.VALUE = "patched"

    def broken(module):
        raise KeyError("internals moved")

    hooks.uninstall()
    hooks.install({"fake_server": patch, "broken_server": broken})
    try:
        import broken_server  # noqa: F401 - a failed patch must not fail the import
        import fake_server
    finally:
        hooks.uninstall()
        sys.modules.pop("fake_server", None)
        sys.modules.pop("broken_server", None)
    assert seen == ["as imported"] and fake_server.VALUE == "patched"
    assert fake_server.__spec__.loader.__class__.__name__ != "_PatchingLoader"
    assert "internals moved" in hooks.failures.pop("broken_server")
    hooks.patched.remove("fake_server")


def test_the_id_a_load_client_sent_is_the_request_span_s_id_and_a_foreign_one_is_not(
    recorder, shop
):
    call_asgi(AsgiSpans(shop), "GET", "/items/7", headers=[(b"x-probe-request-id", b"L42")])
    call_asgi(AsgiSpans(shop), "GET", "/items/7", headers=[(b"x-probe-request-id", b"x" * 500)])
    sent, foreign = recorded(recorder)
    assert sent["request_id"] == "L42"
    assert foreign["request_id"] == f"r{foreign['span_id']}"  # probe's own, not the header


def test_a_wsgi_request_takes_the_load_client_s_id_too(recorder, flask_app):
    from werkzeug.test import Client

    Client(WsgiSpans(flask_app)).get(
        "/items/7", headers={"X-Probe-Request-Id": "L7"}, buffered=True
    )
    [span] = recorded(recorder)
    assert span["request_id"] == "L7"


def test_a_wsgi_request_carries_the_cpu_its_thread_spent_on_it(recorder):
    import time

    def burn(environ, start_response):
        start = time.thread_time_ns()
        while time.thread_time_ns() - start < 20 * 1_000_000:  # 20 ms of this thread's CPU
            pass
        start_response("200 OK", [("Content-Type", "text/plain")])
        return [b"done"]

    def idle(environ, start_response):
        time.sleep(0.05)  # waits, spends no CPU
        start_response("200 OK", [("Content-Type", "text/plain")])
        return [b"done"]

    from werkzeug.test import Client

    Client(WsgiSpans(burn)).get("/", buffered=True)
    Client(WsgiSpans(idle)).get("/", buffered=True)
    busy, sleepy = recorded(recorder)
    assert 20e6 <= busy["attrs"]["cpu_ns"] < busy["end"] - busy["start"] + 1e6
    assert sleepy["attrs"]["cpu_ns"] < 0.5 * 50e6


def test_a_stop_waits_briefly_for_a_request_whose_answer_is_sent(recorder):
    import threading
    import time

    from probe.serving.routes import end_request, start_request, wait_for_open_requests

    started = threading.Event()

    def request_thread() -> None:  # its answer is sent; its span ends a moment later
        span, attrs = start_request("GET", None)
        attrs["status"] = 200
        started.set()
        time.sleep(0.02)
        end_request(span, attrs, "/late", None)

    worker = threading.Thread(target=request_thread)
    worker.start()
    started.wait()
    assert wait_for_open_requests(5.0) == 0  # it ended within the grace: recorded
    worker.join()
    [late] = recorded(recorder)
    assert late["name"] == "GET /late"
    stuck, attrs = start_request("GET", None)  # never ends: the wait is bounded
    assert wait_for_open_requests(0.01) == 1
    end_request(stuck, attrs, "/stuck", None)


class _Match:
    """A Django ResolverMatch's two fields the route is read from."""

    def __init__(self, route: str, func: object) -> None:
        self.route, self.func = route, func


def _view(request: object) -> None: ...


class _ClassView:
    def get(self, request: object) -> None: ...

    def dispatch(self, request: object) -> None: ...


def _as_view() -> object:
    def view(request: object) -> None: ...

    view.view_class = _ClassView  # type: ignore[attr-defined]  # as View.as_view does
    return view


@pytest.mark.parametrize(
    ("route", "template"),
    [
        ("items/<int:item_id>", "/items/{item_id}"),
        ("shop/items/<slug:slug>/reviews/", "/shop/items/{slug}/reviews/"),
        (r"^re/(?P<slug>[a-z]+)/(?P<n>[0-9]{2})$", "/re/{slug}/{n}"),
        ("", "/"),
    ],
)
def test_django_routes_are_spelled_as_templates(route, template):
    assert django_route(_Match(route, _view), "GET")[0] == template


def test_a_django_class_based_view_is_found_by_the_request_s_verb():
    _, handler = django_route(_Match("v/", _as_view()), "GET")
    assert handler is not None and handler[1].endswith("_ClassView.get")
    _, fallback = django_route(_Match("v/", _as_view()), "DELETE")
    assert fallback is not None and fallback[1].endswith("_ClassView.dispatch")


def test_a_handler_s_location_is_read_once_and_an_unhashable_one_each_time(monkeypatch):
    from probe.serving import routes

    unwrapped = []

    def counting_unwrap(function):
        unwrapped.append(function)
        return function

    monkeypatch.setattr(routes.inspect, "unwrap", counting_unwrap)

    def endpoint():  # a fresh function: no earlier request has read it
        pass

    class Unhashable:  # __eq__ without __hash__: a callable the cache cannot key
        def __eq__(self, other):
            return False

        def __call__(self):
            pass

    first_line = endpoint.__code__.co_firstlineno
    for _ in range(3):
        assert routes.code_location(endpoint) == (f"{__file__}:{first_line}", endpoint.__qualname__)
    assert unwrapped == [endpoint]
    handler = Unhashable()
    for _ in range(2):
        assert routes.code_location(handler)[0].startswith(f"{__file__}:")
    assert unwrapped == [endpoint, handler, handler]
