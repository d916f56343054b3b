"""Perfetto renderer: the run on one timeline as a Perfetto protobuf trace.

``PerfettoTrace.from_analysis(analysis)`` takes the run's timeline
(``probe.analyzers.timeline``); ``render()`` writes it with the ``perfetto`` package's
trace builder and its protobuf definitions (``TracePacket``), never hand-packed bytes:

* a track per process, per thread (named as the threads were), and per extra lane;
  requests on their process's "requests" lanes, other spans nested on their thread's;
  span attributes (route, status, request id) as debug annotations;
* the stack samples as ``PerfSample`` packets with interned call stacks (a mapping per
  source file, a frame per function, line numbers): the UI draws them on their thread
  and as a flame graph of any selection. A sample taken while the thread waited ends in
  a frame that says on what (``[waiting: lock]``); an on-CPU one ends in the code;
* the counters (CPU in cores and RSS per process, host CPU %, each GPU's utilisation and
  memory) on counter tracks, in base units;
* the torch.profiler windows' events, when the run took any: the host's ops, ranges and
  CUDA runtime calls on a "torch" track under the thread that ran them, each GPU
  stream's kernels and copies on a track of its own under "GPU N", and each window as
  a slice on a "torch.profiler windows" track (where to zoom in);
* what the export left out (``Timeline.notes``) as instants on a "probe export" track.

Times are the run's sampling clock (CLOCK_MONOTONIC) as recorded. Every packet is on one
sequence whose interned names, frames and stacks are written once, in the first packets.
The file opens offline in ui.perfetto.dev and in trace_processor.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from probe import __version__
from probe.analyzers.spantree import span_attrs

if TYPE_CHECKING:
    from perfetto.protos.perfetto.trace.perfetto_trace_pb2 import TracePacket

    from probe.analyzers.analysis import Analysis
    from probe.analyzers.timeline import Timeline

__all__ = ["PerfettoTrace"]

_SEQUENCE = 1
# TracePacket.sequence_flags: the first packet clears the sequence's interning state,
# every packet reads it
_CLEARED, _NEEDS_STATE = 1, 2
# TrackEvent.Type
_BEGIN, _END, _INSTANT, _COUNTER = 1, 2, 3, 4
# CounterDescriptor.Unit (UNIT_SIZE_BYTES); other units go by name
_UNIT_BYTES = 3
# packets per serialised chunk: a chunk's Trace message lives in memory, not the file's
_CHUNK = 20_000
# span attributes written as debug annotations (the rest stay in the run directory)
_ANNOTATED = ("method", "route", "status", "error", "worker")


@dataclass(frozen=True)
class PerfettoTrace:
    format: ClassVar[str] = "perfetto"
    filename: ClassVar[str] = "trace.perfetto-trace"

    timeline: Timeline

    @classmethod
    def from_analysis(cls, analysis: Analysis) -> PerfettoTrace:
        return cls(analysis.timeline)

    def render(self) -> bytes:
        from perfetto.trace_builder.proto_builder import TraceProtoBuilder

        chunks: list[bytes] = []
        builder = TraceProtoBuilder()
        for count, fill in enumerate(_Packets(self.timeline).fillers(), start=1):
            packet = builder.add_packet()
            packet.trusted_packet_sequence_id = _SEQUENCE
            packet.sequence_flags = _CLEARED | _NEEDS_STATE if count == 1 else _NEEDS_STATE
            fill(packet)
            if count % _CHUNK == 0:
                chunks.append(builder.serialize())
                builder = TraceProtoBuilder()
        chunks.append(builder.serialize())
        return b"".join(chunks)  # concatenated Trace messages are one Trace


class _Packets:
    """The trace's packets, in order, as functions that fill a fresh packet."""

    def __init__(self, timeline: Timeline) -> None:
        self.t = timeline
        self.thread_uuid: dict[int, int] = {}
        self.process_uuid: dict[int, int] = {}
        self.gpu_uuid: dict[int, int] = {}
        self.names: dict[str, int] = {}
        # debug annotation name -> its interned id
        self.keys = {k: i for i, k in enumerate(("request_id", *_ANNOTATED), start=1)}
        self.uuids = iter(range(1, 1 << 62))

    def fillers(self) -> Any:
        yield from self._interned()
        yield from self._processes_and_threads()
        yield from self._spans()
        yield from self._torch()
        yield from self._samples()
        yield from self._counters()
        yield from self._notes()

    def _name_iid(self, name: str) -> int:
        return self.names.setdefault(name, len(self.names) + 1)

    def _interned(self) -> Any:
        t = self.t
        for name in t.spans["name"].astype(str).unique().tolist():
            self._name_iid(name)
        for name in t.torch["name"].astype(str).unique().tolist():
            self._name_iid(name)
        stacks = _Stacks(t)

        def fill(p: TracePacket) -> None:
            data = p.interned_data
            for name, iid in self.names.items():
                data.event_names.add(iid=iid, name=name)
            for key, iid in self.keys.items():
                data.debug_annotation_names.add(iid=iid, name=key)
            stacks.intern(data)

        self.callstack_of = stacks.callstack_of
        yield fill

    def _processes_and_threads(self) -> Any:
        for pid, name in zip(self.t.processes["pid"], self.t.processes["name"], strict=True):
            uuid = self.process_uuid[int(pid)] = next(self.uuids)
            yield _descriptor(uuid, process=(int(pid), str(name)))
        for tid, pid, name in self.t.threads[["thread_id", "pid", "name"]].itertuples(index=False):
            uuid = self.thread_uuid[int(tid)] = next(self.uuids)
            yield _descriptor(uuid, thread=(int(pid), int(tid), str(name)))

    def _lane_uuids(self) -> tuple[dict[tuple[int, int], int], list[Any]]:
        """(track key, lane) -> uuid, and the descriptors of the tracks made for them."""
        spans = self.t.spans
        uuids: dict[tuple[int, int], int] = {}
        made: list[Any] = []
        pairs = zip(spans["track"].tolist(), spans["lane"].tolist(), strict=True)
        for key, lane in sorted(set(pairs)):
            if key > 0 and lane == 0:
                uuids[(key, 0)] = self._thread_track(key, made)
                continue
            parent = self.process_uuid[-key] if key < 0 else self._thread_track(key, made)
            label = f"requests {lane + 1}" if key < 0 else f"thread {key} · overlapping {lane}"
            uuid = uuids[(key, lane)] = next(self.uuids)
            made.append(_descriptor(uuid, parent=parent, name=label))
        return uuids, made

    def _thread_track(self, tid: int, made: list[Any]) -> int:
        if tid not in self.thread_uuid:  # a span's thread the threads table missed
            uuid = self.thread_uuid[tid] = next(self.uuids)
            made.append(_descriptor(uuid, thread=(self._pid_of_thread(tid), tid, "")))
        return self.thread_uuid[tid]

    def _pid_of_thread(self, tid: int) -> int:
        rows = self.t.spans.loc[self.t.spans["thread_id"] == tid, "pid"]
        return int(rows.iloc[0]) if len(rows) else int(self.t.processes["pid"].iloc[0])

    def _spans(self) -> Any:
        spans = self.t.spans
        if spans.empty:
            return
        uuids, made = self._lane_uuids()
        yield from made
        pairs = zip(spans["track"].tolist(), spans["lane"].tolist(), strict=True)
        tracks = [uuids[k] for k in pairs]
        names = spans["name"].astype(str).tolist()
        args = [
            _annotations(s, self.keys)
            for s in spans[["category", "request_id", "attrs"]].itertuples(index=False)
        ]
        yield from self._slices(
            spans["start_ns"].to_numpy(), spans["end_ns"].to_numpy(), tracks, names, args
        )

    def _slices(
        self,
        starts: np.ndarray,
        ends: np.ndarray,
        tracks: list[int],
        names: list[str],
        args: list[list[tuple[int, str]]] | None = None,
    ) -> Any:
        """Begin and end packets of slices, in time order: ends before begins at one
        instant; inner ends first, outer begins first."""
        ends = np.maximum(ends, starts)
        n = len(starts)
        ts = np.concatenate([starts, ends])
        kind = np.concatenate([np.ones(n), np.zeros(n)])
        inner = np.concatenate([-ends, -starts])
        order = np.lexsort((inner, kind, ts))
        for i in order.tolist():
            row = i % n
            if i < n:
                extra = args[row] if args is not None else []
                yield _slice_begin(int(ts[i]), tracks[row], self.names[names[row]], extra)
            else:
                yield _slice_end(int(ts[i]), tracks[row])

    def _torch(self) -> Any:
        events = self.t.torch
        if events.empty:
            return
        made: list[Any] = []
        host = (events["device"] < 0).to_numpy()
        columns = [events[c].tolist() for c in ("pid", "thread_id", "device", "stream")]
        uuids: dict[tuple[int, int, int, int, bool], int] = {}
        tracks = []
        for key in zip(*columns, host.tolist(), strict=True):
            if key not in uuids:
                uuids[key] = self._torch_track(key, made)
            tracks.append(uuids[key])
        windows = events.groupby("window", sort=False).agg(
            start=("start_ns", "min"), end=("end_ns", "max")
        )
        root = self.process_uuid.get(int(self.t.processes["pid"].iloc[0]))
        uuid = next(self.uuids)
        made.append(_descriptor(uuid, parent=root, name="torch.profiler windows"))
        yield from made
        for window, (start, end) in windows.iterrows():
            yield from _named_slice(int(start), int(end), uuid, str(window))
        yield from self._slices(
            events["start_ns"].to_numpy(),
            events["end_ns"].to_numpy(),
            tracks,
            events["name"].astype(str).tolist(),
        )

    def _torch_track(self, key: tuple[int, int, int, int, bool], made: list[Any]) -> int:
        """A thread's "torch" track, or a GPU stream's (under its GPU's)."""
        pid, tid, device, stream, host = key
        uuid = next(self.uuids)
        if host:
            if tid not in self.thread_uuid:  # a thread the run's table missed
                self.thread_uuid[tid] = next(self.uuids)
                made.append(_descriptor(self.thread_uuid[tid], thread=(pid, tid, "")))
            made.append(_descriptor(uuid, parent=self.thread_uuid[tid], name="torch"))
            return uuid
        gpu = self.gpu_uuid.get(device)
        if gpu is None:
            gpu = self.gpu_uuid[device] = next(self.uuids)
            made.append(_descriptor(gpu, name=f"GPU {device}"))
        made.append(_descriptor(uuid, parent=gpu, name=f"stream {stream}"))
        return uuid

    def _samples(self) -> Any:
        s = self.t.samples
        columns = s[["ts_ns", "pid", "thread_id", "stack_id", "wait_reason"]]
        for ts, pid, tid, stack, reason in columns.itertuples(index=False):
            callstack = self.callstack_of.get((int(stack), str(reason or "")), 0)
            yield _sample(int(ts), int(pid), int(tid), callstack)

    def _counters(self) -> Any:
        for series in self.t.counters:
            parent = self.process_uuid.get(series.pid) if series.pid is not None else None
            uuid = next(self.uuids)
            yield _counter_descriptor(uuid, series.name, series.unit, parent)
            for ts, value in zip(series.ts_ns.tolist(), series.values.tolist(), strict=True):
                if value == value:  # NaN: no reading
                    yield _counter(int(ts), uuid, float(value))

    def _notes(self) -> Any:
        notes = [f"exported by probe {__version__}", *self.t.notes]
        root = self.process_uuid.get(int(self.t.processes["pid"].iloc[0]))
        uuid = next(self.uuids)
        yield _descriptor(uuid, parent=root, name="probe export")
        first = _first_ns(self.t)
        for note in notes:
            yield _instant(first, uuid, note)


class _Stacks:
    """The samples' call stacks interned: a mapping per file, a frame per function, a
    callstack per (stack, wait reason) -- the reason as a last frame when waiting."""

    def __init__(self, t: Timeline) -> None:
        self.files: dict[str, int] = {}
        self.functions: dict[str, int] = {}
        self.frames: dict[tuple[int, int], int] = {}  # (function iid, mapping iid) -> frame
        self.frame_of: dict[int, int] = {}  # the run's frame id -> frame iid
        self.callstacks: dict[tuple[int, ...], int] = {}
        self.callstack_of: dict[tuple[int, str], int] = {}
        self.lines: dict[int, int] = {}
        pairs = t.samples[["stack_id", "wait_reason"]].drop_duplicates()
        for stack, reason in pairs.itertuples(index=False):
            path = [self._frame(t, f) for f in t.stacks.get(int(stack), ())]
            if reason:
                path.append(self._pseudo(f"[waiting: {reason}]"))
            key = tuple(path)
            iid = self.callstacks.setdefault(key, len(self.callstacks) + 1)
            self.callstack_of[(int(stack), str(reason or ""))] = iid

    def _frame(self, t: Timeline, frame_id: int) -> int:
        if frame_id not in self.frame_of:
            function, filename, line = t.frame(frame_id)
            fn = self.functions.setdefault(function, len(self.functions) + 1)
            mapping = self.files.setdefault(filename or "<unknown>", len(self.files) + 1)
            iid = self.frames.setdefault((fn, mapping), len(self.frames) + 1)
            self.frame_of[frame_id] = iid
            if line > 0:
                self.lines[iid] = line
        return self.frame_of[frame_id]

    def _pseudo(self, name: str) -> int:
        fn = self.functions.setdefault(name, len(self.functions) + 1)
        mapping = self.files.setdefault("[probe]", len(self.files) + 1)
        return self.frames.setdefault((fn, mapping), len(self.frames) + 1)

    def intern(self, data: Any) -> None:
        for name, iid in self.functions.items():
            data.function_names.add(iid=iid, str=name.encode())
        for path, iid in self.files.items():
            data.mapping_paths.add(iid=iid, str=path.encode())
            data.mappings.add(iid=iid, path_string_ids=[iid])
        for (fn, mapping), iid in self.frames.items():
            frame = data.frames.add(iid=iid, function_name_id=fn, mapping_id=mapping)
            if iid in self.lines:
                frame.line_number = self.lines[iid]
        for frame_ids, iid in self.callstacks.items():
            data.callstacks.add(iid=iid, frame_ids=list(frame_ids))


def _first_ns(t: Timeline) -> int:
    starts = [int(t.spans["start_ns"].min())] if not t.spans.empty else []
    if not t.samples.empty:
        starts.append(int(t.samples["ts_ns"].min()))
    starts.extend(int(s.ts_ns[0]) for s in t.counters if len(s.ts_ns))
    return min(starts) if starts else 0


def _annotations(row: Any, keys: dict[str, int]) -> list[tuple[int, str]]:
    """A span's debug annotations, (interned name, value): a request's id and attributes
    (its stages are drawn inside it and carry neither), a stage's attributes."""
    category, request_id, attrs = row
    out: list[tuple[int, str]] = []
    if category == "request" and isinstance(request_id, str) and request_id:
        out.append((keys["request_id"], request_id))
    values = span_attrs(attrs)
    out.extend((keys[k], str(values[k])) for k in _ANNOTATED if k in values)
    return out


def _descriptor(
    uuid: int,
    *,
    process: tuple[int, str] | None = None,
    thread: tuple[int, int, str] | None = None,
    parent: int | None = None,
    name: str | None = None,
) -> Any:
    def fill(p: TracePacket) -> None:
        d = p.track_descriptor
        d.uuid = uuid
        if process is not None:
            d.process.pid, d.process.process_name = process
        if thread is not None:
            d.thread.pid, d.thread.tid, d.thread.thread_name = thread
        if parent is not None:
            d.parent_uuid = parent
        if name is not None:
            d.name = name

    return fill


def _counter_descriptor(uuid: int, name: str, unit: str, parent: int | None) -> Any:
    def fill(p: TracePacket) -> None:
        d = p.track_descriptor
        d.uuid, d.name = uuid, name
        if parent is not None:
            d.parent_uuid = parent
        if unit == "bytes":
            d.counter.unit = _UNIT_BYTES
        else:
            d.counter.unit_name = unit

    return fill


def _slice_begin(ts: int, track: int, name_iid: int, args: list[tuple[int, str]]) -> Any:
    def fill(p: TracePacket) -> None:
        p.timestamp = ts
        e = p.track_event
        e.type, e.track_uuid, e.name_iid = _BEGIN, track, name_iid
        for key, value in args:
            e.debug_annotations.add(name_iid=key, string_value=value)

    return fill


def _named_slice(start: int, end: int, track: int, name: str) -> Any:
    """A slice by name (not interned: a handful), begin and end in one filler pair."""

    def begin(p: TracePacket) -> None:
        p.timestamp = start
        e = p.track_event
        e.type, e.track_uuid, e.name = _BEGIN, track, name

    def end_(p: TracePacket) -> None:
        p.timestamp = end
        p.track_event.type, p.track_event.track_uuid = _END, track

    return begin, end_


def _slice_end(ts: int, track: int) -> Any:
    def fill(p: TracePacket) -> None:
        p.timestamp = ts
        p.track_event.type, p.track_event.track_uuid = _END, track

    return fill


def _instant(ts: int, track: int, name: str) -> Any:
    def fill(p: TracePacket) -> None:
        p.timestamp = ts
        e = p.track_event
        e.type, e.track_uuid, e.name = _INSTANT, track, name

    return fill


def _counter(ts: int, track: int, value: float) -> Any:
    def fill(p: TracePacket) -> None:
        p.timestamp = ts
        e = p.track_event
        e.type, e.track_uuid, e.double_counter_value = _COUNTER, track, value

    return fill


def _sample(ts: int, pid: int, tid: int, callstack: int) -> Any:
    def fill(p: TracePacket) -> None:
        p.timestamp = ts
        s = p.perf_sample
        s.pid, s.tid, s.callstack_iid = pid, tid, callstack

    return fill
