"""The client/server split of probe run --load, on tables built by hand."""

from __future__ import annotations

import pandas as pd
import pytest

from probe.analyzers.load_split import client_server_split

MS = 1_000_000


def test_each_client_request_meets_its_server_span_by_id_and_the_rest_is_the_difference():
    requests = pd.DataFrame(
        {
            "label": ["GET /a", "GET /a", "GET /a", "POST /b"],
            "request_id": ["L1", "L2", "L3", "L4"],
            "intended_ns": [0, 0, 0, 0],
            "sent_ns": [0, 100 * MS, 200 * MS, 0],
            "done_ns": [12 * MS, 112 * MS, 210 * MS, 5 * MS],
            "status": [200, 200, 0, 200],  # L3 got no answer: not in the figures
            "warmup": [False, False, False, False],
        }
    )
    spans = pd.DataFrame(
        {
            "request_id": ["L1", "L2", "L9"],
            "category": ["request"] * 3,
            "start_ns": [1 * MS, 101 * MS, 0],
            "end_ns": [11 * MS, 111 * MS, 1],
        }
    )
    t = client_server_split(requests, spans)
    assert t.loc["GET /a", "sent"] == 2 and t.loc["GET /a", "matched"] == 2
    assert t.loc["GET /a", "client_p50_ms"] == pytest.approx(12.0)
    assert t.loc["GET /a", "server_p50_ms"] == pytest.approx(10.0)
    assert t.loc["GET /a", "rest_p50_ms"] == pytest.approx(2.0)
    assert t.loc["POST /b", "matched"] == 0  # no span took its id
