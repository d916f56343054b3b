"""The same two routes as ``shop_api.py`` in Django, one file (settings, views, URLs),
unmodified for probe (no probe import): ``POST /predict`` computes (``crunch``, ~2 ms of
CPU), ``GET /items/<int:item_id>`` sleeps 10 ms, then answers 200, or 404 for item 13
(``Http404``), or raises for item 666 (Django answers 500). A class-based view serves
the items, as Django projects often do.

Served by Django's development server (threaded, a request per thread), with the
autoreloader off so that the server is this process:

    python tests/serving_corpus/shop_django.py runserver 127.0.0.1:PORT --noreload

or by any WSGI server (``shop_django:application``: gunicorn, waitress), or an ASGI one
(``shop_django:asgi_application``: uvicorn; Django runs the sync views on a thread). Truth, measured
without probe: ``shop_api.truth.md``.
"""

from __future__ import annotations

import json
import sys
import time

import django
from django.conf import settings

settings.configure(
    DEBUG=False,
    ROOT_URLCONF=__name__,
    ALLOWED_HOSTS=["127.0.0.1", "localhost"],
    SECRET_KEY="shop-django-corpus",  # a test app's: nothing is signed
    MIDDLEWARE=[],  # no CSRF check on the JSON POST, no sessions
    INSTALLED_APPS=[],
    LOGGING_CONFIG=None,  # the 500s' tracebacks would fill the server's stderr
)
django.setup()

from django.core.asgi import get_asgi_application  # noqa: E402
from django.core.wsgi import get_wsgi_application  # noqa: E402
from django.http import Http404, HttpRequest, JsonResponse  # noqa: E402
from django.urls import path  # noqa: E402
from django.views import View  # noqa: E402


def crunch(n: int) -> int:
    total = 0
    for i in range(n):
        total += i * i % 7
    return total


def predict(request: HttpRequest) -> JsonResponse:
    payload = json.loads(request.body or b"{}")
    return JsonResponse({"score": crunch(int(payload.get("n", 40_000)))})


class Item(View):
    def get(self, request: HttpRequest, item_id: int) -> JsonResponse:
        time.sleep(0.01)
        if item_id == 13:
            raise Http404("no such item")
        if item_id == 666:
            raise RuntimeError("item 666 is cursed")
        return JsonResponse({"id": item_id})


urlpatterns = [path("predict", predict), path("items/<int:item_id>", Item.as_view())]
application = get_wsgi_application()
asgi_application = get_asgi_application()  # for an ASGI server: uvicorn, hypercorn

if __name__ == "__main__":
    from django.core.management import execute_from_command_line

    execute_from_command_line(sys.argv)
