"""Patches applied to servers as the target imports them (see the package docstring).

Each patch runs right after the module's own code (``probe.afterimport``); a module
already imported when ``install`` is called is patched at once. A patch that fails (a
server version whose internals moved) costs the run its request spans, never the
target: the failure is kept in ``failures`` for meta.json.
"""

from __future__ import annotations

import functools
from types import ModuleType
from typing import Any

from probe.afterimport import AfterImport, Patch

__all__ = ["SERVERS", "UNRECOGNISED", "failures", "install", "limits", "patched", "uninstall"]

# What went wrong patching a server, by module name (said in meta.json).
failures: dict[str, str] = {}
# The modules patched in this process.
patched: list[str] = []
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


def _patch_werkzeug(module: ModuleType) -> None:
    from probe.serving.wsgi import RequestSpans

    run_simple = module.run_simple

    @functools.wraps(run_simple)
    def run_simple_with_request_spans(
        hostname: str, port: int, application: Any, *args: Any, **kwargs: Any
    ) -> Any:
        if not isinstance(application, RequestSpans):
            application = RequestSpans(application)
        return run_simple(hostname, port, application, *args, **kwargs)

    setattr(module, "run_simple", run_simple_with_request_spans)  # noqa: B010 - typed module


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


# module name -> the patch applied right after it is imported
SERVERS: dict[str, Patch] = {
    "uvicorn.config": _patch_uvicorn,
    "werkzeug.serving": _patch_werkzeug,
    # each worker loads the app after the fork (or gets it from the arbiter, --preload)
    "gunicorn.workers.base": _patch_gunicorn,
    # the arbiter knows the workers and how many requests each takes at once
    "gunicorn.arbiter": _patch_gunicorn_arbiter,
    # Starlette's run_in_threadpool (sync routes, sync dependencies) goes through it
    "anyio.to_thread": _patch_anyio,
}


# Servers probe does not wrap, seen imported at the run's end: said in meta.json, and the
# diagnosis says how to get request spans without them. Servers only: a framework that is
# also a client (aiohttp) or an ORM (Django) says nothing of serving when imported.
UNRECOGNISED = ("hypercorn", "waitress")


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
