"""A load run's client latency split into the server's time and the rest, per request
label: each request ``probe load`` sent carries its id (``x-probe-request-id``), and the
served app's request span took it as its ``request_id`` (``probe.serving``), so the two
join exactly. The rest is what the client waited beyond the server's span: the network
and the kernel's accept queue, the server's HTTP parsing before the app and after it,
and the client's own delays."""

from __future__ import annotations

import pandas as pd

__all__ = ["client_server_split"]


def client_server_split(requests: pd.DataFrame, spans: pd.DataFrame) -> pd.DataFrame:
    """Per label (measured requests only): ``matched`` (of ``sent``), and the medians of
    the client's time on the wire (sent to answered), the server's span and the rest."""
    measured = requests[~requests["warmup"].astype(bool) & (requests["status"] > 0)]
    served = spans[spans["category"] == "request"][["request_id", "start_ns", "end_ns"]]
    joined = measured.merge(served, on="request_id", how="left")
    client_ms = (joined["done_ns"] - joined["sent_ns"]) / 1e6
    server_ms = (joined["end_ns"] - joined["start_ns"]) / 1e6
    frame = pd.DataFrame(
        {
            "label": joined["label"],
            "client_ms": client_ms,
            "server_ms": server_ms,
            "rest_ms": client_ms - server_ms,
            "matched": server_ms.notna(),
        }
    )
    by = frame.groupby("label")
    table = pd.DataFrame(
        {
            "sent": by.size(),
            "matched": by["matched"].sum(),
            "client_p50_ms": by["client_ms"].median(),
            "server_p50_ms": by["server_ms"].median(),
            "rest_p50_ms": by["rest_ms"].median(),
        }
    )
    return table
