"""Text for a terminal: what probe prints names things the profiled service chose (stage
names, paths, routes), and a name holding ``"\\x1b[2J…"`` must not clear the user's
terminal, nor a right-to-left override reorder what they read.

A module of its own, importing only ``re`` and ``os``: the sidecar says its errors through it, and
it runs beside the target on the target's cores (``probe.reports.terminal``, where these
were, costs ~30 ms of CPU to import).
"""

from __future__ import annotations

import os
import re
from pathlib import Path

__all__ = ["printable", "printable_json", "shown_path"]

# C0 and C1 control characters but newline and tab, the bidirectional formatting
# characters (marks, embeddings, overrides, isolates: the "Trojan Source" set, with the
# Arabic letter mark) and the line and paragraph separators some terminals break on.
_UNPRINTABLE = re.compile(
    "[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069]"
)


def printable(text: str) -> str:
    """``text`` with control and bidi-override characters shown as escapes."""
    return _UNPRINTABLE.sub(lambda m: m.group().encode("unicode_escape").decode("ascii"), text)


def printable_json(text: str) -> str:
    """JSON ``text`` for a terminal: the same characters as ``printable`` escaped, as JSON
    ``\\uXXXX`` escapes, so the document still parses to the same strings. (They can
    only stand inside strings: JSON's own syntax is ASCII.)"""
    return _UNPRINTABLE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def shown_path(path: Path, start: str | None = None) -> str:
    """As the user would type it: relative to the working directory (``start``, else the
    current one) when inside it."""
    try:
        rel = os.path.relpath(path, start)
    except ValueError:
        return str(path)
    return str(path) if rel.startswith("..") else rel
