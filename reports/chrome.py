"""Chrome trace JSON renderer: the run's timeline in the Trace Event Format.

The no-dependency fallback to the Perfetto file (``probe.reports.perfetto``), from the
same model (``probe.analyzers.timeline``): it opens in ui.perfetto.dev, chrome://tracing
and most trace viewers. Spans on a thread's own lane are complete events (``X``) on the
thread; requests, and spans on a thread's extra lanes, are async slices (``b``/``e``) with
one id per lane, so each lane is a track. Stack samples go as the format's
``stackFrames``/``samples`` (a waiting sample's last frame says on what), counters as
``C`` events, the export's notes under ``otherData``. The torch.profiler windows' host
events (ops, ranges, runtime calls) are async slices on a "torch" track of their thread,
each GPU's kernels and copies complete events in a "GPU N" process, a thread per stream.
Times are microseconds on the run's sampling clock.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from probe import __version__
from probe.analyzers.timeline import TimelineLimits

if TYPE_CHECKING:
    from probe.analyzers.analysis import Analysis
    from probe.analyzers.timeline import Timeline

__all__ = ["ChromeTrace"]


def _us(ns: int) -> float:
    return ns / 1000.0


@dataclass(frozen=True)
class ChromeTrace:
    format: ClassVar[str] = "chrome"
    filename: ClassVar[str] = "trace.json"
    # JSON spends ~3x the bytes of Perfetto's protobuf on each event (measured on the
    # hour-long synthetic run, benchmarks/export_bounds.py): a third of its limits keeps
    # the file under 10 MB (7.9 MB); a torch event takes 250-300 bytes
    # (benchmarks/torch_event_bytes.py), so 7,000 add ~2 MB at most
    limits: ClassVar[TimelineLimits] = TimelineLimits(
        spans=27_000, samples=33_000, counter_points=1_700, torch_events=7_000
    )

    timeline: Timeline

    @classmethod
    def from_analysis(cls, analysis: Analysis) -> ChromeTrace:
        return cls(analysis.timeline)

    def render(self) -> str:
        t = self.timeline
        frames, samples = _samples(t)
        doc = {
            "traceEvents": [*_names(t), *_spans(t), *_torch(t), *_counters(t)],
            "stackFrames": frames,
            "samples": samples,
            "displayTimeUnit": "ms",
            "otherData": {
                "exporter": f"probe {__version__}",
                "kept": {k: {"kept": a, "recorded": b} for k, (a, b) in t.kept.items()},
                "notes": t.notes,
            },
        }
        return json.dumps(doc, separators=(",", ":"))


def _names(t: Timeline) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for pid, name in zip(t.processes["pid"], t.processes["name"], strict=True):
        out.append({"ph": "M", "name": "process_name", "pid": int(pid), "args": {"name": name}})
    for tid, pid, name in t.threads[["thread_id", "pid", "name"]].itertuples(index=False):
        args = {"name": str(name)}
        out.append({"ph": "M", "name": "thread_name", "pid": int(pid), "tid": int(tid),
                    "args": args})  # fmt: skip
    return out


def _spans(t: Timeline) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    columns = ["name", "category", "pid", "thread_id", "start_ns", "end_ns", "lane",
               "request_id", "attrs"]  # fmt: skip
    for name, cat, pid, tid, start, end, lane, rid, attrs in t.spans[columns].itertuples(
        index=False
    ):
        args = {"request_id": rid} if isinstance(rid, str) and rid else {}
        if isinstance(attrs, str) and attrs:
            args["attrs"] = attrs
        base = {"name": str(name), "cat": str(cat), "pid": int(pid), "tid": int(tid)}
        if cat != "request" and lane == 0:
            dur = _us(max(int(end) - int(start), 0))
            out.append({**base, "ph": "X", "ts": _us(int(start)), "dur": dur, "args": args})
            continue
        track = f"requests {lane + 1}" if cat == "request" else f"thread {tid} lane {lane}"
        out.append({**base, "ph": "b", "id2": {"local": track}, "ts": _us(int(start)),
                    "args": args})  # fmt: skip
        out.append({**base, "ph": "e", "id2": {"local": track}, "ts": _us(max(end, start))})
    return out


# GPU N's "process" in the file: above any pid Linux gives (pid_max is at most 2**22)
_GPU_PID = 1 << 23


def _torch(t: Timeline) -> list[dict[str, Any]]:
    events = t.torch
    out: list[dict[str, Any]] = [
        {"ph": "M", "name": "process_name", "pid": _GPU_PID + int(device),
         "args": {"name": f"GPU {device}"}}
        for device in sorted(set(events.loc[events["device"] >= 0, "device"].tolist()))
    ]  # fmt: skip
    columns = ["name", "kind", "pid", "thread_id", "device", "stream", "start_ns", "end_ns"]
    for name, kind, pid, tid, device, stream, start, end in events[columns].itertuples(index=False):
        ts, dur = _us(int(start)), _us(max(int(end) - int(start), 0))
        if device >= 0:
            out.append({"ph": "X", "name": str(name), "cat": str(kind), "ts": ts, "dur": dur,
                        "pid": _GPU_PID + int(device), "tid": int(stream)})  # fmt: skip
            continue
        base = {"name": str(name), "cat": str(kind), "pid": int(pid), "tid": int(tid),
                "id2": {"local": f"torch {tid}"}}  # fmt: skip
        out.append({**base, "ph": "b", "ts": ts})
        out.append({**base, "ph": "e", "ts": ts + dur})
    return out


def _samples(t: Timeline) -> tuple[dict[str, dict[str, Any]], list[dict[str, Any]]]:
    """The format's stack-frame tree (a node per distinct path) and one sample a row."""
    nodes: dict[tuple[str, str], str] = {}  # (parent node, frame name) -> node id
    frames: dict[str, dict[str, Any]] = {}

    def node(parent: str, name: str) -> str:
        key = (parent, name)
        if key not in nodes:
            nid = nodes[key] = str(len(nodes) + 1)
            frames[nid] = {"name": name, **({"parent": parent} if parent else {})}
        return nodes[key]

    leaf_of: dict[tuple[int, str], str] = {}
    samples: list[dict[str, Any]] = []
    columns = ["ts_ns", "pid", "thread_id", "stack_id", "wait_reason", "samples"]
    for ts, pid, tid, stack, reason, ticks in t.samples[columns].itertuples(index=False):
        key = (int(stack), str(reason or ""))
        if key not in leaf_of:
            at = ""
            for f in t.stacks.get(key[0], ()):
                at = node(at, t.frame(f)[0])
            leaf_of[key] = node(at, f"[waiting: {reason}]") if reason else at
        sample = {"ts": _us(int(ts)), "pid": int(pid), "tid": int(tid), "weight": int(ticks),
                  "name": "waiting" if reason else "on-CPU"}  # fmt: skip
        if leaf_of[key]:
            sample["sf"] = leaf_of[key]
        samples.append(sample)
    return frames, samples


def _counters(t: Timeline) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    root = int(t.processes["pid"].iloc[0]) if len(t.processes) else 0
    for s in t.counters:
        pid = s.pid if s.pid is not None else root
        label = f"{s.name} ({s.unit})"
        for ts, value in zip(s.ts_ns.tolist(), s.values.tolist(), strict=True):
            if value == value:  # NaN: no reading
                out.append({"ph": "C", "name": label, "pid": pid, "ts": _us(ts),
                            "args": {s.unit: value}})  # fmt: skip
    return out
