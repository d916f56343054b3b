"""Redaction of secrets from a command line before it is written anywhere.

Covers the forms secrets take on command lines: ``--token=abc``, ``--password abc``,
``API_KEY=abc`` / ``AWS_SECRET_ACCESS_KEY=abc`` assignments, credentials in URLs
(``https://user:pw@host``) and secret-looking query parameters (``?api_key=abc``).
A false positive (``--sort-key name`` loses its value) is the price of never writing a
real secret into a run directory that gets shared.
"""

from __future__ import annotations

import re
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

__all__ = ["REDACTED", "redact_argv", "redact_url"]

REDACTED = "***"

_SECRET_NAME = re.compile(
    r"(pass(word|wd|phrase)?|secret|token|api[-_]?key|credential|(^|[-_])auth($|[-_])|"
    r"authorization|cookie|session|"
    r"private[-_]?key|access[-_]?key|(^|[-_])key$|^key$|(^|[-_])pwd$|signature|sig$)",
    re.IGNORECASE,
)
_ASSIGNMENT = re.compile(r"^([A-Za-z_][A-Za-z0-9_.-]*)=(.*)$", re.DOTALL)
_URL = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://[^\s]+")


def _is_secret_name(name: str) -> bool:
    return bool(_SECRET_NAME.search(name.strip("-")))


def redact_url(url: str) -> str:
    """``url`` without its credentials and secret-looking query values."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return url
    netloc = parts.netloc
    if "@" in netloc:
        userinfo, host = netloc.rsplit("@", 1)
        user = userinfo.split(":", 1)[0]
        netloc = f"{user}:{REDACTED}@{host}" if ":" in userinfo else f"{REDACTED}@{host}"
    query = parts.query
    if query:
        pairs = parse_qsl(query, keep_blank_values=True)
        if any(_is_secret_name(k) for k, _ in pairs):
            query = urlencode(
                [(k, REDACTED if _is_secret_name(k) else v) for k, v in pairs], safe="*"
            )
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


def _redact_word(word: str) -> str:
    word = _URL.sub(lambda m: redact_url(m.group(0)), word)
    if word.startswith("-") and "=" in word:
        flag, _, _value = word.partition("=")
        return f"{flag}={REDACTED}" if _is_secret_name(flag) else word
    m = _ASSIGNMENT.match(word)
    if m and _is_secret_name(m.group(1)):
        return f"{m.group(1)}={REDACTED}"
    return word


def redact_argv(argv: list[str]) -> list[str]:
    """A copy of ``argv`` with secret values replaced by ``***``."""
    out: list[str] = []
    hide_next = False
    for word in argv:
        if hide_next and not word.startswith("-"):
            out.append(REDACTED)
            hide_next = False
            continue
        hide_next = False
        out.append(_redact_word(word))
        if word.startswith("-") and "=" not in word and _is_secret_name(word):
            hide_next = True
    return out
