"""A stage that reads one stream its far end paces, told from one that makes calls, by
the kernel's counts on the connections its tasks awaited (``analyzers.streams``)."""

from __future__ import annotations

import pandas as pd

from probe.analyzers.streams import (
    calls_counted,
    reads_a_stream,
    shared_connections,
    stream_note,
    stream_reads,
)

LABELS = pd.DataFrame({"stack_id": [1, 2], "user_function": ["produce", "lookup"]})
MS = 1_000_000


def sightings(stack: int, connection: str, counts: list[tuple[int, int, int]], start: int = 0):
    """A connection seen at ticks 10 ms apart: (segments out, segments in, bytes in)."""
    return [
        (start + k * 10 * MS, 7, stack, connection, out, into, 10, received)
        for k, (out, into, received) in enumerate(counts)
    ]


def sockets(rows: list[tuple]) -> pd.DataFrame:
    columns = ["ts_ns", "thread_id", "stack_id", "connection", "segments_out", "segments_in"]
    return pd.DataFrame(rows, columns=[*columns, "bytes_out", "bytes_in"])


def network_ticks(stack: int, n: int, tasks: float = 1.0, start: int = 0) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "ts_ns": [start + k * 10 * MS for k in range(n)],
            "thread_id": 7,
            "stack_id": stack,
            "wait_reason": "network",
            "tasks": tasks,
            "wall_ns": 10 * MS,
        }
    )


def test_one_connection_that_receives_and_sends_nothing_is_a_stream():
    # consume_feed's producer: its feed sends a line every 8 ms, it asks nothing
    feed = sightings(1, "a>feed", [(1, k, 6 * k) for k in range(1, 11)])
    table = stream_reads(sockets(feed), network_ticks(1, 10), LABELS)
    row = table.loc["produce"]
    assert bool(row["stream"]) and row["segments_out"] == 0 and row["segments_in"] == 9
    assert row["bytes_in"] == 54 and abs(row["seen_s"] - 0.09) < 1e-9
    assert reads_a_stream(table, "produce")
    [note] = stream_note(table, "produce")
    assert note.startswith("`produce` reads one connection its far end paces: 0.1 KB in 9")
    assert "overlapping its reads cannot make it faster" in note


def test_calls_on_one_connection_send_a_request_before_each_answer_and_are_no_stream():
    asked = sightings(2, "a>upstream", [(k, k, 40 * k) for k in range(1, 11)])
    table = stream_reads(sockets(asked), network_ticks(2, 10), LABELS)
    assert not table.loc["lookup", "stream"] and table.loc["lookup", "segments_out"] == 9
    assert stream_note(table, "lookup") == []
    assert shared_connections(table, "lookup") == (1, 9)  # one connection, 9 requests seen sent


def test_a_connection_a_call_is_no_stream_though_each_sends_nothing_while_read():
    # one task streaming one answer after another, each over its own connection: more
    # connections than tasks, so the calls can overlap
    rows = []
    for n, name in enumerate(("a>one", "b>two", "c>three")):
        counts = [(1, k, 1_000 * k) for k in range(1, 5)]
        rows += sightings(2, name, counts, start=n * 40 * MS)
    table = stream_reads(sockets(rows), network_ticks(2, 12), LABELS)
    row = table.loc["lookup"]
    assert row["connections"] == 3 and row["tasks"] == 1 and row["segments_out"] == 0
    assert not row["stream"]
    assert calls_counted(table, "lookup") == 3  # a request, then its answer: a call each
    assert shared_connections(table, "lookup") is None


def test_calls_are_not_counted_where_a_connection_carries_several():
    # kept-alive connections send a request before each answer: their count is not the calls'
    rows = []
    for n, name in enumerate(("a>one", "b>two")):
        rows += sightings(2, name, [(k, k, 40 * k) for k in range(1, 7)], start=n * 60 * MS)
    table = stream_reads(sockets(rows), network_ticks(2, 12), LABELS)
    assert table.loc["lookup", "connections"] == 2 and calls_counted(table, "lookup") is None
    feed = sightings(1, "a>feed", [(1, k, 6 * k) for k in range(1, 11)])
    streamed = stream_reads(sockets(feed), network_ticks(1, 10), LABELS)
    assert calls_counted(streamed, "produce") is None  # one stream, read by one task
    assert shared_connections(streamed, "produce") is None  # it sends nothing: no calls


def test_calls_are_not_counted_from_connections_seen_at_few_of_the_stage_s_waits():
    # connections seen at 4 of 20 network ticks: others the sampler missed may have been calls
    rows = []
    for n, name in enumerate(("a>one", "b>two")):
        rows += sightings(2, name, [(1, k, 100 * k) for k in (1, 2)], start=n * 40 * MS)
    table = stream_reads(sockets(rows), network_ticks(2, 20), LABELS)
    assert calls_counted(table, "lookup") is None and calls_counted(table, "absent") is None


def test_a_stream_seen_at_few_of_the_stage_s_network_waits_does_not_speak_for_them():
    feed = sightings(1, "a>feed", [(1, k, 6 * k) for k in range(1, 4)])
    table = stream_reads(sockets(feed), network_ticks(1, 10), LABELS)
    assert table.loc["produce", "sightings"] == 3 and not table.loc["produce", "stream"]


def test_a_run_without_the_table_has_no_stream_evidence():
    table = stream_reads(None, network_ticks(1, 10), LABELS)
    assert table.empty and not reads_a_stream(table, "produce")
    assert calls_counted(table, "produce") is None
    assert stream_reads(sockets([]), network_ticks(1, 10), LABELS).empty
