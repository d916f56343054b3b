"""Patches applied to servers as the target imports them (see the package docstring).

Each patch runs right after the module's own code (``probe.afterimport``); a module
already imported when ``install`` is called is patched at once. A patch that fails (a
server version whose internals moved) costs the run its request spans, never the
target: the failure is kept in ``failures`` for meta.json.
"""

from __future__ import annotations

import functools
import os
import time
from types import ModuleType
from typing import Any

from probe.afterimport import AfterImport, Patch

__all__ = [
    "SERVERS",
    "UNRECOGNISED",
    "failures",
    "install",
    "limits",
    "notes",
    "patched",
    "uninstall",
]

# What went wrong patching a server, by module name (said in meta.json).
failures: dict[str, str] = {}
# The modules patched in this process.
patched: list[str] = []
# What the run should say about how the app was served (said in meta.json).
notes: list[str] = []
# How many requests the server in this process takes at once, as configured (said in
# meta.json; ``analyzers.capacity``'s server slots): ``server``, ``workers`` (processes),
# ``requests_at_once`` (None: no fixed limit, an async server's), and what set it.
limits: dict[str, Any] = {}


def _patch_uvicorn(module: ModuleType) -> None:
    from probe.serving.asgi import RequestSpans

    config = module.Config
    load = config.load
    init = config.__init__

    @functools.wraps(init)
    def init_and_note_limits(self: Any, *args: Any, **kwargs: Any) -> None:
        init(self, *args, **kwargs)
        # the parent of uvicorn --workers N builds the Config; its workers load the app
        if limits.get("server") in (None, "uvicorn"):
            workers = max(1, int(getattr(self, "workers", None) or 1))
            at_once = getattr(self, "limit_concurrency", None)
            limits.update(
                server="uvicorn",
                workers=workers,
                limit_concurrency=at_once,
                requests_at_once=None if at_once is None else int(at_once) * workers,
            )

    config.__init__ = init_and_note_limits

    @functools.wraps(load)
    def load_with_request_spans(self: Any) -> None:
        load(self)
        if not isinstance(self.loaded_app, RequestSpans):
            self.loaded_app = RequestSpans(self.loaded_app)

    config.load = load_with_request_spans


def _patch_uvicorn_cycle(module: ModuleType) -> None:
    """uvicorn's h11 and httptools protocols make a request's cycle once they have parsed
    its head, then start its task on the event loop: the instant goes in the scope, and
    the middleware counts the wait for the task's first step (``routes.Phases``).

    The cycle's task is also where an app loaded before ``install`` gets its request
    spans: ``probe.watchdog.start()`` called from the app's lifespan (loaded by then; each
    connection's protocol holds it as loaded), or from its module where the server loads
    it once, while the patch of ``Config.load`` comes too late for that load (uvicorn
    0.54's ``python -m uvicorn`` loads it twice: to check it, then through ``load``)."""
    from probe.serving.asgi import RequestSpans
    from probe.serving.routes import RECEIVED_KEY

    cycle = module.RequestResponseCycle
    init = cycle.__init__
    run_asgi = cycle.run_asgi

    @functools.wraps(run_asgi)
    def run_asgi_with_request_spans(self: Any, app: Any) -> Any:
        if not isinstance(app, RequestSpans):
            app = RequestSpans(app)
        return run_asgi(self, app)

    cycle.run_asgi = run_asgi_with_request_spans

    @functools.wraps(init)
    def init_and_stamp(self: Any, *args: Any, **kwargs: Any) -> None:
        init(self, *args, **kwargs)
        scope = getattr(self, "scope", None)
        if isinstance(scope, dict):
            scope[RECEIVED_KEY] = time.perf_counter_ns()

    cycle.__init__ = init_and_stamp


def _patch_werkzeug(module: ModuleType) -> None:
    from probe.serving.wsgi import RequestSpans

    # run_simple(hostname, port, application, ...)
    wrapped = _serving_wrapped(module.run_simple, "application", RequestSpans)
    setattr(module, "run_simple", wrapped)  # noqa: B010 - typed module


def _serving_wrapped(serve: Any, name: str, spans: type) -> Any:
    """``serve`` (a function taking host, port, then the app as ``name``) serving the app
    wrapped in ``spans``."""

    @functools.wraps(serve)
    def serve_with_request_spans(*args: Any, **kwargs: Any) -> Any:
        if len(args) > 2 and not isinstance(args[2], spans):
            args = (*args[:2], spans(args[2]), *args[3:])
        elif name in kwargs and not isinstance(kwargs[name], spans):
            kwargs[name] = spans(kwargs[name])
        return serve(*args, **kwargs)

    return serve_with_request_spans


def _patch_gunicorn(module: ModuleType) -> None:
    from probe.serving.wsgi import RequestSpans

    worker = module.Worker
    load_wsgi = worker.load_wsgi

    @functools.wraps(load_wsgi)
    def load_wsgi_with_request_spans(self: Any) -> None:
        load_wsgi(self)
        # gunicorn's own workers serve WSGI; an ASGI worker class (uvicorn's) hands the
        # app to uvicorn.Config, whose patch wraps it as ASGI
        own = type(self).__module__.startswith("gunicorn.workers")
        if own and self.wsgi is not None and not isinstance(self.wsgi, RequestSpans):
            self.wsgi = RequestSpans(self.wsgi)

    worker.load_wsgi = load_wsgi_with_request_spans


def _patch_gunicorn_arbiter(module: ModuleType) -> None:
    arbiter = module.Arbiter
    setup = arbiter.setup

    @functools.wraps(setup)
    def setup_and_note_limits(self: Any, app: Any) -> None:
        setup(self, app)
        cfg = self.cfg
        worker_class = getattr(cfg, "worker_class", None)
        name = getattr(worker_class, "__name__", str(worker_class))
        workers, threads = int(cfg.workers), max(1, int(cfg.threads))
        # gunicorn's sync worker serves one request at a time, gthread one per thread;
        # the others (gevent, eventlet, uvicorn's) take whatever arrives
        at_once = workers * threads if name in ("SyncWorker", "ThreadWorker") else None
        limits.clear()
        limits.update(
            server="gunicorn",
            workers=workers,
            threads=threads,
            worker_class=name,
            requests_at_once=at_once,
        )

    arbiter.setup = setup_and_note_limits


def _patch_anyio(module: ModuleType) -> None:
    from probe.serving.asgi import worker_thread_spans

    setattr(module, "run_sync", worker_thread_spans(module.run_sync))  # noqa: B010


def _patch_hypercorn(module: ModuleType) -> None:
    from probe.serving import asgi, wsgi

    # every way of starting hypercorn (its CLI, hypercorn.asyncio.serve, trio's) hands the
    # app to one of these two wrappers, once it has told ASGI from WSGI
    for wrapper, spans in (
        (module.ASGIWrapper, asgi.RequestSpans),
        (module.WSGIWrapper, wsgi.RequestSpans),
    ):
        setattr(wrapper, "__init__", _wrapping_init(wrapper.__init__, spans))  # noqa: B010


def _wrapping_init(init: Any, spans: type) -> Any:
    @functools.wraps(init)
    def init_with_request_spans(self: Any, app: Any, *args: Any, **kwargs: Any) -> None:
        init(self, app if isinstance(app, spans) else spans(app), *args, **kwargs)

    return init_with_request_spans


def _patch_waitress(module: ModuleType) -> None:
    from probe.serving.wsgi import RequestSpans

    # waitress.serve and waitress-serve both build the server here (waitress/__init__
    # imports the name after this patch)
    create_server = module.create_server

    @functools.wraps(create_server)
    def create_server_with_request_spans(application: Any, *args: Any, **kwargs: Any) -> Any:
        if application is not None and not isinstance(application, RequestSpans):
            application = RequestSpans(application)
        server = create_server(application, *args, **kwargs)
        # waitress serves from one pool of threads, one request each
        threads = int(getattr(getattr(server, "adj", None), "threads", 0) or 0)
        if threads:
            limits.update(server="waitress", workers=1, threads=threads, requests_at_once=threads)
        return server

    setattr(module, "create_server", create_server_with_request_spans)  # noqa: B010


def _patch_django_server(module: ModuleType) -> None:
    from probe.serving.wsgi import RequestSpans

    # run(addr, port, wsgi_handler, ...): what manage.py runserver serves with (it
    # imports the name after this patch)
    wrapped = _serving_wrapped(module.run, "wsgi_handler", RequestSpans)
    setattr(module, "run", wrapped)  # noqa: B010


def _patch_django_routes(module: ModuleType) -> None:
    from probe.serving.routes import django_route

    handler = module.BaseHandler
    resolve_request = handler.resolve_request

    @functools.wraps(resolve_request)
    def resolve_and_note_the_route(self: Any, request: Any) -> Any:
        match = resolve_request(self, request)
        try:
            template, view = django_route(match, str(getattr(request, "method", "") or "GET"))
            # where the request's middleware reads them: a WSGI request's environ, an
            # ASGI request's scope
            where = getattr(request, "environ", None)
            if where is None:
                where = getattr(request, "scope", None)
            if isinstance(where, dict):
                where["probe.route"], where["probe.handler"] = template, view
        except Exception:  # the route is for the span's name: never the request's failure
            pass
        return match

    handler.resolve_request = resolve_and_note_the_route


def _patch_django_autoreload(module: ModuleType) -> None:
    run_with_reloader = module.run_with_reloader

    @functools.wraps(run_with_reloader)
    def run_noting_the_reloader(*args: Any, **kwargs: Any) -> Any:
        if os.environ.get(module.DJANGO_AUTORELOAD_ENV) != "true":
            notes.append(
                "Django's autoreloader serves from a child process that probe does not "
                "record (this one only watches files): run `manage.py runserver --noreload` "
                "under probe run"
            )
        return run_with_reloader(*args, **kwargs)

    setattr(module, "run_with_reloader", run_noting_the_reloader)  # noqa: B010


# module name -> the patch applied right after it is imported
SERVERS: dict[str, Patch] = {
    "uvicorn.config": _patch_uvicorn,
    "uvicorn.protocols.http.h11_impl": _patch_uvicorn_cycle,
    "uvicorn.protocols.http.httptools_impl": _patch_uvicorn_cycle,
    "werkzeug.serving": _patch_werkzeug,
    # each worker loads the app after the fork (or gets it from the arbiter, --preload)
    "gunicorn.workers.base": _patch_gunicorn,
    # the arbiter knows the workers and how many requests each takes at once
    "gunicorn.arbiter": _patch_gunicorn_arbiter,
    # Starlette's run_in_threadpool (sync routes, sync dependencies) goes through it
    "anyio.to_thread": _patch_anyio,
    "hypercorn.app_wrappers": _patch_hypercorn,
    "waitress.server": _patch_waitress,
    # manage.py runserver's server; the route Django's URL resolver matched, under any
    # server (runserver, gunicorn, uvicorn with Django's ASGI handler)
    "django.core.servers.basehttp": _patch_django_server,
    "django.core.handlers.base": _patch_django_routes,
    "django.utils.autoreload": _patch_django_autoreload,
}


# Servers probe does not wrap, seen imported at the run's end: said in meta.json, and the
# diagnosis says how to get request spans without them. Servers only: a framework that is
# also a client (aiohttp) says nothing of serving when imported.
UNRECOGNISED = ("aiohttp.web", "tornado.httpserver", "twisted.web.server", "cheroot.wsgi")


def _apply(name: str, module: ModuleType, patch: Patch) -> None:
    try:
        patch(module)
    except Exception as e:  # never the target's failure: the run goes on without spans
        failures[name] = f"{type(e).__name__}: {e}"
    else:
        patched.append(name)


_finder: AfterImport | None = None


def install(servers: dict[str, Patch] | None = None) -> None:
    """Patch each server in ``servers`` (default ``SERVERS``) when it is imported, or now
    if it already is. Once per process: a second call does nothing."""
    global _finder
    if _finder is not None:
        return
    _finder = AfterImport(SERVERS if servers is None else servers, _apply)
    _finder.install()


def uninstall() -> None:
    """Stop patching modules imported from now on (the ones patched stay patched)."""
    global _finder
    if _finder is not None:
        _finder.uninstall()
    _finder = None
