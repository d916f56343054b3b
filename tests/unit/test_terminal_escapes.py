"""What reaches a terminal: control characters and bidi formatting from a service's names
are shown escaped, in plain text and in JSON (where the escape keeps the document valid)."""

from __future__ import annotations

import json

from probe.printable import printable, printable_json

HOSTILE = "a\x1b[2Jb\x07c\x85d\u202ee\u2066f\u061cg\u2028h"


def test_control_and_bidi_characters_are_shown_escaped_and_text_is_kept():
    shown = printable(HOSTILE + "\tübersetzt\n日本")
    assert shown == "a\\x1b[2Jb\\x07c\\x85d\\u202ee\\u2066f\\u061cg\\u2028h\tübersetzt\n日本"


def test_json_for_the_terminal_parses_back_to_the_names_the_service_gave():
    document = {"stage": HOSTILE, "other": "日本 ü"}
    text = json.dumps(document, ensure_ascii=False)
    shown = printable_json(text)
    assert printable(shown) == shown  # nothing raw is left
    assert json.loads(shown) == document
