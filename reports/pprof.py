"""pprof renderer: the stack samples as a gzipped ``perftools.profiles.Profile``.

The message is pprof's ``profile.proto`` (github.com/google/pprof/proto/profile.proto),
declared here field by field as a protobuf descriptor and built with the protobuf
runtime, never hand-packed bytes: ``go tool pprof``, Pyroscope, Grafana and Cloud
Profiler read it. From the run's timeline (``probe.analyzers.timeline``):

* three values a sample: ``samples`` (count: the ticks a row stands for), ``cpu`` and
  ``wait`` (nanoseconds, as the analysis attributes them: ``analyzers.attribution``);
  ``cpu`` is the default, ``-sample_index=wait`` shows where the threads waited;
* labels: ``thread``; ``stage`` and ``route`` (the span open on the thread and the
  request it belongs to), ``wait`` (what a waiting sample waited on) -- so
  ``pprof -tagfocus=route=POST /predict`` is one endpoint's profile;
* a function per (name, file), a location per (function, line), leaf first as pprof
  wants; one mapping standing for the Python code.
"""

from __future__ import annotations

import functools
import gzip
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

if TYPE_CHECKING:
    from probe.analyzers.analysis import Analysis
    from probe.analyzers.timeline import Timeline

__all__ = ["PprofProfile", "profile_message"]

# (message, [(field, number, type, repeated, message type)]); types as descriptor_pb2
# names them (int64, uint64, string, bool, message)
_PROTO = [
    ("ValueType", [("type", 1, "int64", False, ""), ("unit", 2, "int64", False, "")]),
    ("Label", [("key", 1, "int64", False, ""), ("str", 2, "int64", False, ""),
               ("num", 3, "int64", False, ""), ("num_unit", 4, "int64", False, "")]),
    ("Sample", [("location_id", 1, "uint64", True, ""), ("value", 2, "int64", True, ""),
                ("label", 3, "message", True, "Label")]),
    ("Mapping", [("id", 1, "uint64", False, ""), ("memory_start", 2, "uint64", False, ""),
                 ("memory_limit", 3, "uint64", False, ""), ("file_offset", 4, "uint64", False, ""),
                 ("filename", 5, "int64", False, ""), ("build_id", 6, "int64", False, ""),
                 ("has_functions", 7, "bool", False, ""), ("has_filenames", 8, "bool", False, ""),
                 ("has_line_numbers", 9, "bool", False, ""),
                 ("has_inline_frames", 10, "bool", False, "")]),
    ("Line", [("function_id", 1, "uint64", False, ""), ("line", 2, "int64", False, "")]),
    ("Location", [("id", 1, "uint64", False, ""), ("mapping_id", 2, "uint64", False, ""),
                  ("address", 3, "uint64", False, ""), ("line", 4, "message", True, "Line"),
                  ("is_folded", 5, "bool", False, "")]),
    ("Function", [("id", 1, "uint64", False, ""), ("name", 2, "int64", False, ""),
                  ("system_name", 3, "int64", False, ""), ("filename", 4, "int64", False, ""),
                  ("start_line", 5, "int64", False, "")]),
    ("Profile", [("sample_type", 1, "message", True, "ValueType"),
                 ("sample", 2, "message", True, "Sample"),
                 ("mapping", 3, "message", True, "Mapping"),
                 ("location", 4, "message", True, "Location"),
                 ("function", 5, "message", True, "Function"),
                 ("string_table", 6, "string", True, ""),
                 ("drop_frames", 7, "int64", False, ""), ("keep_frames", 8, "int64", False, ""),
                 ("time_nanos", 9, "int64", False, ""), ("duration_nanos", 10, "int64", False, ""),
                 ("period_type", 11, "message", False, "ValueType"),
                 ("period", 12, "int64", False, ""), ("comment", 13, "int64", True, ""),
                 ("default_sample_type", 14, "int64", False, "")]),
]  # fmt: skip


@functools.cache
def profile_message() -> Any:
    """The ``perftools.profiles.Profile`` message class, from the descriptor above."""
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

    f = descriptor_pb2.FileDescriptorProto(
        name="probe/pprof/profile.proto", package="perftools.profiles", syntax="proto3"
    )
    kinds = descriptor_pb2.FieldDescriptorProto
    for name, fields in _PROTO:
        message = f.message_type.add(name=name)
        for field_name, number, kind, repeated, type_name in fields:
            entry = message.field.add(name=field_name, number=number)
            entry.type = getattr(kinds, f"TYPE_{kind.upper()}")
            entry.label = kinds.LABEL_REPEATED if repeated else kinds.LABEL_OPTIONAL
            if type_name:
                entry.type_name = f".perftools.profiles.{type_name}"
    pool = descriptor_pool.DescriptorPool()
    pool.Add(f)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("perftools.profiles.Profile"))


@dataclass(frozen=True)
class PprofProfile:
    format: ClassVar[str] = "pprof"
    filename: ClassVar[str] = "profile.pb.gz"

    timeline: Timeline

    @classmethod
    def from_analysis(cls, analysis: Analysis) -> PprofProfile:
        return cls(analysis.timeline)

    def render(self) -> bytes:
        return gzip.compress(_Builder(self.timeline).profile().SerializeToString(), mtime=0)


class _Builder:
    def __init__(self, t: Timeline) -> None:
        self.t = t
        self.p = profile_message()()
        self.strings: dict[str, int] = {"": 0}
        self.functions: dict[tuple[str, str], int] = {}
        self.locations: dict[tuple[int, int], int] = {}
        self.paths: dict[tuple[int, str], list[int]] = {}

    def s(self, text: str) -> int:
        return self.strings.setdefault(text, len(self.strings))

    def profile(self) -> Any:
        p, t = self.p, self.t
        for kind, unit in (("samples", "count"), ("cpu", "nanoseconds"), ("wait", "nanoseconds")):
            p.sample_type.add(type=self.s(kind), unit=self.s(unit))
        p.default_sample_type = self.s("cpu")
        p.period_type.type, p.period_type.unit = self.s("cpu"), self.s("nanoseconds")
        p.mapping.add(id=1, filename=self.s("python"), has_functions=True, has_filenames=True,
                      has_line_numbers=True)  # fmt: skip
        names = dict(zip(t.threads["thread_id"], t.threads["name"], strict=True))
        columns = ["thread_id", "stack_id", "samples", "on_cpu_ns", "waited_ns", "waited_on",
                   "stage", "route"]  # fmt: skip
        for tid, stack, ticks, cpu, wait, on, stage, route in t.samples[columns].itertuples(
            index=False
        ):
            sample = p.sample.add(location_id=self._path(int(stack), str(on or "") if wait else ""))
            sample.value.extend([int(ticks), round(cpu), round(wait)])
            labels = [("thread", f"{names.get(tid) or 'thread'} ({tid})"), ("stage", stage),
                      ("route", route), ("wait", on if wait else "")]  # fmt: skip
            for key, value in labels:
                if value:
                    sample.label.add(key=self.s(key), str=self.s(str(value)))
        for note in t.notes:
            p.comment.append(self.s(note))
        if len(t.samples):
            first = int(t.samples["ts_ns"].min() - t.samples["wall_ns"].iloc[0])
            p.duration_nanos = int(t.samples["ts_ns"].max()) - first
        p.string_table.extend(self.strings)
        return p

    def _path(self, stack: int, waited_on: str) -> list[int]:
        """Location ids, leaf first; a waiting sample's leaf says on what."""
        key = (stack, waited_on)
        if key not in self.paths:
            ids = [self._location(*self.t.frame(f)) for f in self.t.stacks.get(stack, ())]
            if waited_on:
                ids.append(self._location(f"[waiting: {waited_on}]", "", 0))
            self.paths[key] = ids[::-1]
        return self.paths[key]

    def _location(self, name: str, file: str, line: int) -> int:
        fid = self.functions.get((name, file))
        if fid is None:
            fid = self.functions[(name, file)] = len(self.functions) + 1
            self.p.function.add(id=fid, name=self.s(name), system_name=self.s(name),
                                filename=self.s(file), start_line=max(line, 0))  # fmt: skip
        lid = self.locations.get((fid, line))
        if lid is None:
            lid = self.locations[(fid, line)] = len(self.locations) + 1
            self.p.location.add(id=lid, mapping_id=1, line=[{"function_id": fid,
                                                               "line": max(line, 0)}])  # fmt: skip
        return lid
