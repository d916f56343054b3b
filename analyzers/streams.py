"""Stages that read one stream its far end paces, told from stages that make calls.

``concurrent_io`` proposes overlapping a stage's waits on the network: calls made one
after another, each a request and its answer, can be in flight together. A stage that
reads a stream -- a feed, a message queue's push, a long download, server-sent events --
waits on the network as much, but its reads cannot overlap: the far end sends the next
item when it has it. consume_feed.py (``tests/threads_corpus``) read "make the produce
calls concurrent, about 8.4x faster" where its feed sends a line every 8 ms: plain
pairs, the feed 4x faster bought 2.8x; nothing on the service's side can.

The kernel tells the two apart: a call sends its request on the connection before each
answer; a stream sends nothing while it receives. ``probe.samplers.tasks`` reads, for
each TCP connection a suspended task awaits, the kernel's counts of data segments each
way (``awaited_sockets``, from ``TCP_INFO``). A stage reads a stream where, between
their first and last sightings, its connections received data and sent none, the
connections were no more than its tasks awaiting the network at once (a stage that
opens a connection per call -- one stream after another, each paced by its far end --
goes through more connections than tasks, and overlapping those calls does help), and
those sightings are most of the stage's network waits. Threads' blocking sockets are not
read: only asyncio's tasks (the sampler's), so a threaded stream reader keeps the
proposal.

The same reading counts a stage's calls where it opens a connection a call: more
connections than tasks, none of them sending between its first and last sighting (a
request, then its answer read to the end). Calls are whole: ``w`` in flight finish ``n``
of them in ``ceil(n / w)`` rounds, not ``n / w`` (stream_prompts.py: 24 prompts, 16 in
flight, two rounds; read as 16-fold its fix said 8.9-12.4x against 9.1x measured).
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from probe.analyzers.constants import constant

__all__ = [
    *("STREAMS", "Streams", "STREAM_COLUMNS", "reads_a_stream", "stream_note"),
    *("stream_reads", "stream_words", "calls_counted", "shared_connections"),
]

_COUNTS = ("segments_out", "segments_in", "bytes_in")  # the kernel's, cumulative
STREAM_COLUMNS = [
    *("connections", "tasks", "sightings", "network_ticks", "seen_s"),
    *("segments_out", "segments_in", "bytes_in", "stream", "calls", "kept_open"),
]


@dataclass(frozen=True)
class Streams:
    covered_share: float = constant(
        0.5,
        "the share of a stage's ticks awaiting the network that saw a connection of it: "
        "at half or more, most of the stage's network time is the connections read, so "
        "what they show is what the stage's waits are (the rest: connecting, name "
        "lookups, a client library whose socket is not found)",
    )


STREAMS = Streams()


def stream_reads(
    sockets: pd.DataFrame, tasks: pd.DataFrame, labels: pd.DataFrame, settings: Streams = STREAMS
) -> pd.DataFrame:
    """Per stage (``labels``' ``user_function``, the index) whose tasks awaited TCP
    connections (``awaited_sockets``): the ``connections`` it awaited, the most ``tasks``
    of it awaiting the network at one tick (``task_samples``), the ticks that saw one of
    its connections (``sightings``) and those it awaited the network at
    (``network_ticks``), the seconds between
    each connection's first and last sighting (``seen_s``, summed), the data segments
    sent and received and bytes received on them in those spans, and whether it reads a
    ``stream``, the ``calls`` it made where it opened a connection a call (module
    docstring; NaN elsewhere), and whether its calls went over connections ``kept_open``
    (no more connections than tasks, requests sent on them). Empty without the table
    (runs before 2026-12-05)."""
    if sockets is None or sockets.empty or tasks is None or tasks.empty:
        return pd.DataFrame(columns=STREAM_COLUMNS)
    stage_of = labels.set_index("stack_id")["user_function"]
    seen = sockets.assign(stage=sockets["stack_id"].map(stage_of)).dropna(subset=["stage"])
    per = seen.groupby(["stage", "connection"]).agg(
        first=("ts_ns", "min"),
        last=("ts_ns", "max"),
        **{f"{c}_{e}": (c, e) for c in _COUNTS for e in ("min", "max")},
    )
    moved = pd.DataFrame({c: per[f"{c}_max"] - per[f"{c}_min"] for c in _COUNTS}).assign(
        seen_s=(per["last"] - per["first"]) / 1e9
    )
    table = moved.groupby(level="stage").agg(
        connections=("seen_s", "size"),
        seen_s=("seen_s", "sum"),
        segments_out=("segments_out", "sum"),
        segments_in=("segments_in", "sum"),
        bytes_in=("bytes_in", "sum"),
    )
    table["sightings"] = seen.groupby("stage")["ts_ns"].nunique().reindex(table.index)
    network = tasks[tasks["wait_reason"] == "network"]
    on = network.assign(stage=network["stack_id"].map(stage_of))
    at_once = on.groupby(["stage", "ts_ns"])["tasks"].sum().groupby(level="stage")
    table["tasks"] = at_once.max().reindex(table.index).fillna(0.0)
    table["network_ticks"] = at_once.size().reindex(table.index).fillna(0).astype(int)
    read_only = (table["segments_out"] == 0) & (table["segments_in"] > 0)
    covered = table["sightings"] >= settings.covered_share * table["network_ticks"]
    one_each = table["connections"] <= table["tasks"].round()
    table["stream"] = read_only & one_each & covered
    table["calls"] = table["connections"].where(read_only & ~one_each & covered).astype("float64")
    table["kept_open"] = (table["segments_out"] > 0) & one_each
    return table[STREAM_COLUMNS]


def stream_words(row: pd.Series) -> str:
    """What a stage that reads a stream (a ``stream_reads`` row) did, as the fix's
    absence and the note say it."""
    connections = int(row["connections"])
    over = "one connection" if connections == 1 else f"{connections} connections"
    return (
        f"reads {over} its far end paces: {row['bytes_in'] / 1e3:,.1f} KB in "
        f"{int(row['segments_in'])} data segments over {row['seen_s']:.1f} s, sending "
        "nothing on it"
    )


def reads_a_stream(streams: pd.DataFrame, stage: str) -> bool:
    """Whether ``stage`` reads a stream its far end paces (a ``stream_reads`` table)."""
    return bool(not streams.empty and stage in streams.index and streams.loc[stage, "stream"])


def calls_counted(streams: pd.DataFrame, stage: str) -> int | None:
    """The calls ``stage`` made where it opened a connection a call (a ``stream_reads``
    table); None where the run does not count them."""
    if streams.empty or stage not in streams.index or pd.isna(streams.loc[stage, "calls"]):
        return None
    return int(streams.loc[stage, "calls"])


def shared_connections(streams: pd.DataFrame, stage: str) -> tuple[int, int] | None:
    """Where ``stage``'s calls went over connections kept open (``stream_reads``'
    ``kept_open``: no more connections than its tasks, requests sent on them) the
    connections and
    the data segments sent on them while seen (each call's request, one or more); None
    elsewhere. Calls in flight at once need a connection each unless the protocol
    multiplexes them (stream_prompts.py --keep-alive: one connection, 24 prompts)."""
    if streams.empty or stage not in streams.index or not streams.loc[stage, "kept_open"]:
        return None
    row = streams.loc[stage]
    return int(row["connections"]), int(row["segments_out"])


def stream_note(streams: pd.DataFrame, stage: str) -> list[str]:
    """The line that says why a stage waiting on the network gets no ``concurrent_io``
    where it reads a stream, and what would make it faster; [] where it does not."""
    if not reads_a_stream(streams, stage):
        return []
    return [
        f"`{stage}` {stream_words(streams.loc[stage])}: overlapping its reads cannot make "
        "it faster -- the far end sends the next item when it has it. What can: the "
        "source sending faster or more at a time (a larger batch or page, a higher "
        "rate), or more streams read at once where it has them (a message queue's "
        "partitions, one consumer each)"
    ]
