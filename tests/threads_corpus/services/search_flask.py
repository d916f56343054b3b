"""A Flask app on werkzeug's threaded server (a thread per request): ``POST /predict``
counts the rows of a SQLite table whose text holds the request's first word
(``count_matches``: a ``LIKE '%word%'`` scan of 20,000 rows, in SQLite's C code, which
releases the GIL while it steps).

Driven by 8 clients on 127.0.0.1 (``tests/threads_corpus/drive.py``), its one bottleneck
is the CPU in native code: the scans run in parallel on both cores. Truth, measured from
outside: ``search_flask.truth.json``
(``python tests/threads_corpus/measure.py --serve-script search_flask``: 1.7 of 2 cores,
py-spy's hottest on-CPU function ``count_matches``).

Its memory is no leak, though RSS climbs for tens of seconds: each request's connection
(``with sqlite3.connect(...)`` commits, it does not close) sits in a reference cycle once
it has run a statement, so it and its page cache are freed only when the cyclic
collector reaches it -- for the ones that lived into the oldest generation, at a full
collection; and glibc's per-thread arenas keep much of what is freed. Measured without
probe under the same load for 150 s (RSS from /proc every 0.5 s): 297 MB at 7 s, then a
saw-tooth between ~380 and ~490 MB, falling at 45, 97 and 142 s; the bytes malloc held
(``mallinfo2``) went up and down between 114 and 298 MB over 40 s, with no trend.

Under ``probe run`` (100 Hz) this server died of SIGSEGV in most runs on CPython 3.11.7
until probe's samplers held the cyclic collector off while reading frames
(``probe.samplers.collection``).

    python search_flask.py --port 8000
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import tempfile

from flask import Flask, jsonify, request

app = Flask(__name__)
DATABASE = ""  # set by main(): a file in a temporary folder removed when the server stops
WORDS = "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda".split()


def build(path: str, rows: int = 20_000) -> None:
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE items (id INTEGER PRIMARY KEY, body TEXT)")
        db.executemany(
            "INSERT INTO items (body) VALUES (?)",
            ((" ".join(WORDS[i * k % 11] for k in range(1, 30)) + f" #{i}",) for i in range(rows)),
        )


def count_matches(db: sqlite3.Connection, word: str) -> int:
    query = "SELECT count(*) FROM items WHERE body LIKE ?"
    return int(db.execute(query, (f"%{word}%",)).fetchone()[0])


@app.post("/predict")
def predict():
    text = str((request.get_json(silent=True) or {}).get("text", ""))
    word = (text.split() or ["alpha"])[0].strip(",.!").lower()
    with sqlite3.connect(DATABASE) as db:
        return jsonify({"word": word, "matches": count_matches(db, word + "x")})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=8000)
    args = parser.parse_args()
    global DATABASE
    # removed on the way out (SIGINT's KeyboardInterrupt included): one folder a run was
    # left in /tmp before
    with tempfile.TemporaryDirectory(prefix="search_flask-") as folder:
        DATABASE = os.path.join(folder, "items.db")
        build(DATABASE)
        app.run(host="127.0.0.1", port=args.port, threaded=True)


if __name__ == "__main__":
    main()
