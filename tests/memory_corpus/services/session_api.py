"""A login API served by uvicorn whose session store keeps every session it ever issued.

``POST /login`` checks the caller's credentials (a PBKDF2 hash, ~1 ms of CPU), then
issues a session: a token and a profile (the user's id, roles, and 120 recent item ids:
9.0 KB of Python objects, by tracemalloc over 2,000 sessions) stored in a module-level
dict under a fresh ``uuid4`` token. ``app`` never expires a session, so the store grows
by one entry a login for as long as the process lives (a leak); ``app_ttl`` drops
sessions older than ``SESSION_TTL_S`` on each login, so the store holds about that many
seconds of logins and then holds steady (warm-up, then churn: not a leak). Undecorated:
under ``probe run -m uvicorn`` the requests are known only from probe's own middleware.

    python -m uvicorn session_api:app --app-dir tests/memory_corpus/services --port PORT
    python -m uvicorn session_api:app_ttl ...

Truth, measured from outside without probe (``record.py session_api session_api_ttl
--verify``: uvicorn serving the app plain, driven by ``probe load`` with 4 clients for
40 s, its RSS read from /proc at 10 Hz, 2026-12-01): ``app``'s floors by quarter 1.8,
160.0, 275.3, 397.2 MiB (a leak, ~2.9 MB/s: every quarter climbs as much as the one
before); ``app_ttl``'s 7.8, 75.2, 75.2, 75.2 MiB (filled in its first quarter, then flat:
no leak). Written after the leak detectors, as a case they were not designed for: a
served app, its requests counted by probe's middleware, not by spans of its own.

Two settings from the environment, for ``benchmarks/watch_ramp.py`` (a store under a
rising request rate): ``SESSION_TTL_S`` (default 2) and ``SESSION_KEPT_EVERY`` (default
0: none), under which ``app_ttl`` never expires one session in that many -- a leak of
~9 KB / N a login beside the store. The corpus was recorded with neither set.
"""

from __future__ import annotations

import hashlib
import itertools
import os
import threading
import time
import uuid

from fastapi import FastAPI

SESSION_TTL_S = float(os.environ.get("SESSION_TTL_S", "2"))
KEPT_EVERY = int(os.environ.get("SESSION_KEPT_EVERY", "0"))  # one session in N never expires
_SALT = b"probe-corpus"
_SESSIONS: dict[str, dict[str, object]] = {}
_ISSUED: list[tuple[float, str]] = []  # (issued at, token), oldest first: app_ttl's expiry
_LOGINS = itertools.count(1)  # app_ttl's, for SESSION_KEPT_EVERY
_EXPIRY = threading.Lock()  # the routes run on several of the server's threads at once


def _issue(user: str) -> dict[str, object]:
    hashlib.pbkdf2_hmac("sha256", user.encode(), _SALT, 200)  # the credential check
    token = uuid.uuid4().hex
    session = {
        "user": user,
        "roles": ["reader", "buyer"],
        "recent": [f"item-{user}-{k:05d}" for k in range(120)],
        "issued": time.time(),
    }
    _SESSIONS[token] = session
    return {"token": token}


def _expire(now: float) -> None:
    while _ISSUED and now - _ISSUED[0][0] > SESSION_TTL_S:
        _SESSIONS.pop(_ISSUED.pop(0)[1], None)


app = FastAPI()
app_ttl = FastAPI()


@app.post("/login")
def login(body: dict) -> dict:  # a sync route: runs on the server's thread pool
    return _issue(str(body.get("user", "anonymous")))


@app_ttl.post("/login")
def login_ttl(body: dict) -> dict:
    issued = _issue(str(body.get("user", "anonymous")))
    with _EXPIRY:
        now = time.monotonic()
        _expire(now)
        if not KEPT_EVERY or next(_LOGINS) % KEPT_EVERY:
            _ISSUED.append((now, str(issued["token"])))
    return issued


@app.get("/health")
@app_ttl.get("/health")
def health() -> dict:
    return {"sessions": len(_SESSIONS)}
