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

Route templates come from Starlette's router (FastAPI's too: ``scope["route"]``) and from
Flask's URL rule; an app whose router probe does not know gives ``METHOD (no route)``.

Sync routes: Starlette runs a sync handler on AnyIO's worker threads, which inherit the
request's context; the work sent there while a request is open becomes a span of that
request on the worker thread (``asgi.worker_thread_spans``), so the worker's stack
samples are the request's.

Not recognised yet (the run proceeds without request spans; ``@probe.request`` still
works): hypercorn, waitress, Django's server.

Nothing here imports a web framework: patches are applied as the target imports them.
"""

from __future__ import annotations

from probe.serving.hooks import install, uninstall

__all__ = ["install", "uninstall"]
