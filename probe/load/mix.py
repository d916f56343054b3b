"""The request mix ``probe load`` sends: a small TOML (or JSON) file of weighted requests.

.. code-block:: toml

    [[request]]
    method = "POST"
    path = "/predict"
    json = { text = "a short review" }   # or body_file = "payload.bin" (next to this file)
    weight = 3
    name = "predict"                     # optional: the label in the figures

    [[request]]
    path = "/items/7"                    # method GET, weight 1 by default

A JSON file holds the same as ``{"request": [...]}``. Without a file, the mix is one GET
of the URL's path.

For ``probe run --load SPEC``, the same file also says where and how hard to drive, at
its top level (``read_spec``)::

    url = "http://127.0.0.1:8000"
    concurrency = 8        # closed loop; or rate = 200 (requests a second, open loop)
    duration = 20          # seconds measured, after the warm-up
    warmup = 2
"""

from __future__ import annotations

import json
import math
import random
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from probe.errors import ProbeError

__all__ = ["Mix", "RequestSpec", "read_mix", "read_spec"]

_KNOWN = {"method", "path", "json", "body_file", "headers", "weight", "name"}


@dataclass(frozen=True)
class RequestSpec:
    method: str
    path: str
    body: bytes
    headers: tuple[tuple[str, str], ...]
    weight: float
    label: str  # what the figures call it: ``name``, else ``METHOD path``


@dataclass(frozen=True)
class Mix:
    requests: tuple[RequestSpec, ...]

    def pick(self, rng: random.Random) -> RequestSpec:
        if len(self.requests) == 1:
            return self.requests[0]
        return rng.choices(self.requests, weights=[r.weight for r in self.requests])[0]

    @classmethod
    def single(cls, path: str, method: str = "GET") -> Mix:
        return cls((RequestSpec(method, path, b"", (), 1.0, f"{method} {path}"),))


# top-level keys of a load spec (probe run --load) and their types
_SETTINGS: dict[str, type | tuple[type, ...]] = {
    "url": str,
    "concurrency": int,
    "rate": (int, float),
    "duration": (int, float),
    "warmup": (int, float),
    "timeout": (int, float),
    "max_connections": int,
    "seed": int,
    "wait": (int, float),  # seconds for the service to listen (probe.load.runner)
}


def read_spec(path: Path) -> tuple[Mix, dict[str, Any]]:
    """The mix and the top-level load settings of a ``probe run --load`` file."""
    document = _document(path)
    mix = _mix(path, document)
    settings = {k: v for k, v in document.items() if k != "request"}
    for key, value in settings.items():
        if key not in _SETTINGS:
            raise ProbeError(f"{path}: unknown setting {key!r}")
        if isinstance(value, bool) or not isinstance(value, _SETTINGS[key]):
            raise ProbeError(f"{path}: {key} must be a {_type_name(_SETTINGS[key])}")
        if key in ("url", "seed"):
            continue
        number = float(value)  # type: ignore[arg-type]  # an int or a float, checked above
        zero_ok = key in ("warmup", "wait")
        if not math.isfinite(number) or number < 0 or (number == 0 and not zero_ok):
            least = "0 or more" if zero_ok else "above 0"
            raise ProbeError(f"{path}: {key} must be a finite number {least}")
    if "url" not in settings:
        raise ProbeError(f'{path}: no url (url = "http://127.0.0.1:PORT" at the top)')
    if "concurrency" in settings and "rate" in settings:
        raise ProbeError(f"{path}: give concurrency (closed loop) or rate (open loop), not both")
    return mix, settings


def _type_name(t: type | tuple[type, ...]) -> str:
    return (
        "number" if isinstance(t, tuple) else {"str": "string", "int": "whole number"}[t.__name__]
    )


def _document(path: Path) -> dict[str, Any]:
    try:
        text = path.read_text()
    except OSError as e:
        raise ProbeError(f"{path}: cannot read the request mix ({e.strerror or e})") from None
    try:
        document = json.loads(text) if path.suffix == ".json" else tomllib.loads(text)
    except (ValueError, tomllib.TOMLDecodeError) as e:
        raise ProbeError(f"{path}: not a request mix ({e})") from None
    if not isinstance(document, dict):
        raise ProbeError(f"{path}: not a request mix (a table at the top)")
    return document


def read_mix(path: Path) -> Mix:
    """The mix in ``path``; a ProbeError (exit 2) naming the file and the entry at fault."""
    return _mix(path, _document(path))


def _mix(path: Path, document: dict[str, Any]) -> Mix:
    entries = document.get("request")
    if not isinstance(entries, list) or not entries:
        raise ProbeError(f"{path}: no [[request]] entries")
    return Mix(tuple(_spec(path, i, e) for i, e in enumerate(entries, 1)))


def _spec(path: Path, n: int, entry: Any) -> RequestSpec:
    where = f"{path}: request {n}"
    if not isinstance(entry, dict):
        raise ProbeError(f"{where}: not a table")
    unknown = set(entry) - _KNOWN
    if unknown:
        raise ProbeError(f"{where}: unknown key(s) {', '.join(sorted(unknown))}")
    method = str(entry.get("method", "GET")).upper()
    target = entry.get("path")
    if not isinstance(target, str) or not target.startswith("/"):
        raise ProbeError(f"{where}: path must be a string starting with '/'")
    weight = entry.get("weight", 1)
    if not isinstance(weight, int | float) or not weight > 0:
        raise ProbeError(f"{where}: weight must be a number above 0")
    headers = entry.get("headers", {})
    if not isinstance(headers, dict):
        raise ProbeError(f"{where}: headers must be a table of strings")
    body, content_type = b"", None
    if "json" in entry and "body_file" in entry:
        raise ProbeError(f"{where}: give json or body_file, not both")
    if "json" in entry:
        body, content_type = json.dumps(entry["json"]).encode(), "application/json"
    elif "body_file" in entry:
        file = path.parent / str(entry["body_file"])
        try:
            body = file.read_bytes()
        except OSError as e:
            raise ProbeError(f"{where}: body_file {file}: {e.strerror or e}") from None
    pairs = [(str(k).lower(), str(v)) for k, v in headers.items()]
    if content_type and not any(k == "content-type" for k, _ in pairs):
        pairs.append(("content-type", content_type))
    label = str(entry.get("name") or f"{method} {target}")
    return RequestSpec(method, target, body, tuple(pairs), float(weight), label)
