"""Which spans probe's serving middleware made, told from their JSON attributes
(analyzers.breakdown.served_spans)."""

from __future__ import annotations

import json

import pandas as pd

from probe.analyzers.breakdown import served_spans


def test_the_middleware_s_spans_are_told_with_or_without_a_parse_and_others_are_not():
    request = {"served": True, "method": "POST", "route": "/predict", "status": 200}
    attrs = pd.Series(
        [
            json.dumps({"served": True}),  # a handler's span, as the journals write it
            json.dumps(request),  # a request's
            json.dumps({"kind": "cpu", "served": True}),  # served, not first: parsed
            json.dumps({"served": False, "note": "a user's own"}),
            json.dumps({"served_by": "nginx"}),
            '{"served":true}',  # written another way: parsed, still told
            None,
            json.dumps({"batch": 8}),
        ],
        index=range(10, 18),
    )
    told = served_spans(attrs)
    assert told.tolist() == [True, True, True, False, False, True, False, False]
    assert told.index.tolist() == list(range(10, 18))


def test_no_spans_have_no_served_ones():
    assert served_spans(pd.Series([], dtype="object")).tolist() == []
