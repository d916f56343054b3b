"""Request spans for served HTTP apps, with no change to the app's code.

``probe run`` calls ``install()`` before the target runs. When the target then imports a
server this package knows, the server is patched so that the app it serves is wrapped in
probe's middleware (``asgi.RequestSpans`` / ``wsgi.RequestSpans``): each HTTP request
becomes a ``probe.request`` span named ``METHOD route-template`` (``POST /predict``,
``GET /items/{item_id}``: the template the app's router matched, never the raw path, so
the names stay few), with the status code, an error flag and the handler's code location
in its attributes.

Servers recognised (``hooks.SERVERS``):

* **uvicorn**, however it is started -- ``python -m uvicorn app:app``, ``uvicorn.run(app)``
  in a script, or a ``uvicorn.Server(Config(...))``: every path loads the app through
  ``uvicorn.Config.load``.
* **Werkzeug's server** (``flask run``'s and ``app.run()``'s development server):
  ``werkzeug.serving.run_simple``.
* **gunicorn**'s own workers (sync, gthread, ...): ``Worker.load_wsgi``, in each worker
  process (``probe.workers`` records every worker into a shard of the run directory);
  its uvicorn workers go through ``uvicorn.Config.load`` as above.
* **hypercorn**, ASGI or WSGI, its CLI or ``serve()``: its ``ASGIWrapper`` and
  ``WSGIWrapper`` (it serves from spawned worker processes, recorded as shards).
* **waitress** (``waitress-serve``, ``waitress.serve``): ``waitress.server.create_server``.
* **Django's development server** (``manage.py runserver --noreload``):
  ``django.core.servers.basehttp.run``. With the autoreloader on, the server is a child
  process probe does not record, and the run says so.

Route templates come from Starlette's router (FastAPI's too: ``scope["route"]``), from
Flask's URL rule and from Django's URL resolver (``BaseHandler.resolve_request``: under
any server, WSGI or ASGI); an app whose router probe does not know gives ``METHOD (no
route)``.

Phases (``routes.Phases``): each request's span carries when its response started and
when the last of it was handed over (its latency ends there; an app's clean-up after it
is the request's time, not its latency), and under uvicorn how long the parsed request
waited for the event loop to start its handler. On an asyncio loop, the longest the loop
kept the request waiting at once (``loop_lag``).

Sync routes: Starlette runs a sync handler on AnyIO's worker threads, which inherit the
request's context; the work sent there while a request is open becomes a span of that
request on the worker thread (``asgi.worker_thread_spans``), so the worker's stack
samples are the request's.

Not recognised (the run proceeds without request spans and says so; ``@probe.request``
still works): aiohttp's server, Tornado, Twisted, CherryPy's cheroot (``hooks.UNRECOGNISED``).

Nothing here imports a web framework: patches are applied as the target imports them.
"""

from __future__ import annotations

from probe.serving.hooks import install, uninstall

__all__ = ["install", "uninstall"]
