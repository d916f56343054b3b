"""The same two routes as ``shop_api.py`` in Flask, served by Werkzeug's development
server from the script itself (``app.run``), threaded: a request per thread.

    python tests/serving_corpus/shop_flask.py PORT
"""

from __future__ import annotations

import sys
import time

from flask import Flask, abort, request

app = Flask(__name__)


def crunch(n: int) -> int:
    total = 0
    for i in range(n):
        total += i * i % 7
    return total


@app.post("/predict")
def predict() -> dict:
    payload = request.get_json(force=True) or {}
    return {"score": crunch(int(payload.get("n", 40_000)))}


@app.get("/items/<int:item_id>")
def item(item_id: int) -> dict:
    time.sleep(0.01)
    if item_id == 13:
        abort(404)
    if item_id == 666:
        raise RuntimeError("item 666 is cursed")
    return {"id": item_id}


if __name__ == "__main__":
    app.run(host="127.0.0.1", port=int(sys.argv[1]), threaded=True)
