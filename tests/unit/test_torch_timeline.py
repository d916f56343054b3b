"""The torch.profiler windows on the run's timeline: real GPU traces recorded elsewhere
(``../shared/gpu_traces``, skipped where absent) placed on the run's clock and drawn on
Perfetto tracks -- host events under their threads, kernels and copies per GPU stream."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
from perfetto.protos.perfetto.trace.perfetto_trace_pb2 import Trace

from probe.analyzers.timeline import TimelineLimits, timeline
from probe.analyzers.torch_timeline import torch_events
from probe.reports.perfetto import PerfettoTrace
from probe.rundir.kineto import read_kineto
from probe.rundir.reader import load
from tests.synthetic import RunBuilder

TRACES = Path(__file__).resolve().parents[2].parent / "shared" / "gpu_traces"
BERT = TRACES / "tl_h100_bert-small_infer.json.gz"
ALEXNET = TRACES / "hta_a100_alexnet_warmup.json.gz"
CLOCK = {"unix_ns": 1_700_000_000_000_000_000, "perf_ns": 5_000_000_000}


def window(path: Path, n: int = 1) -> tuple[dict, object]:
    if not path.is_file():
        pytest.skip(f"{path} is not here")
    return {"file": f"torch/window-{n}.json"}, read_kineto(path)


def recorded(trace) -> Counter:
    t = trace.tables
    host_annotations = t["annotations"][t["annotations"]["side"].astype(str) != "gpu"]
    return Counter(op=len(t["ops"]), runtime=len(t["runtime"]), kernel=len(t["kernels"]),
                   copy=len(t["copies"]), annotation=len(host_annotations))  # fmt: skip


def test_a_gpu_traces_events_land_on_the_runs_clock_host_and_device_apart() -> None:
    entry, trace = window(BERT)
    shift = CLOCK["unix_ns"] - CLOCK["perf_ns"]
    events, (kept, total) = torch_events([(entry, trace)], shift_ns=shift, limit=None, notes=[])
    assert kept == total == len(events)
    assert Counter(events["kind"]) == +recorded(trace)
    base = int(trace.meta.get("baseTimeNanoseconds") or 0)
    first_kernel = trace.tables["kernels"]["ts_ns"].min()
    kernels = events[events["kind"] == "kernel"]
    assert kernels["start_ns"].min() == first_kernel + base - shift
    assert (kernels["device"] >= 0).all() and (kernels["stream"] >= 0).all()
    host = events[events["kind"].isin(["op", "runtime", "annotation"])]
    assert (host["device"] == -1).all() and (host["thread_id"] > 0).all()
    assert (events["end_ns"] >= events["start_ns"]).all()


def test_past_the_bound_whole_windows_are_kept_then_the_first_part_of_one() -> None:
    small, big = window(ALEXNET, 1), window(BERT, 2)
    sizes = [sum(recorded(w[1]).values()) for w in (small, big)]
    notes: list[str] = []
    events, (kept, total) = torch_events([small, big], shift_ns=0, limit=sizes[0] + 10,
                                         notes=notes)  # fmt: skip
    assert total == sum(sizes)
    # the windows in time order: whichever came first is whole, if it fits
    assert kept in (sizes[0], sizes[0] + 10) and notes
    events, (kept, _) = torch_events([big], shift_ns=0, limit=100, notes=[])
    assert kept == 100 and events["start_ns"].is_monotonic_increasing


def test_the_perfetto_file_has_every_event_on_its_thread_or_stream_track(tmp_path: Path) -> None:
    entry, trace = window(BERT)
    tables = load(RunBuilder(duration_s=1.0).write(tmp_path / "run")).tables
    t = timeline(tables, root_pid=1, torch_windows=[(entry, trace)], clock=CLOCK,
                 limits=TimelineLimits.unbounded())  # fmt: skip
    decoded = Trace.FromString(PerfettoTrace(t).render())
    names = {p.track_descriptor.uuid: p.track_descriptor.name for p in decoded.packet
             if p.HasField("track_descriptor")}  # fmt: skip
    parents = {p.track_descriptor.uuid: p.track_descriptor.parent_uuid for p in decoded.packet
               if p.HasField("track_descriptor")}  # fmt: skip
    begins = Counter(
        names.get(p.track_event.track_uuid, "")
        for p in decoded.packet
        if p.HasField("track_event") and p.track_event.type == 1
    )
    counts = recorded(trace)
    assert begins["torch"] == counts["op"] + counts["runtime"] + counts["annotation"]
    on_streams = sum(n for name, n in begins.items() if name.startswith("stream "))
    assert on_streams == counts["kernel"] + counts["copy"]
    streams = [u for u, name in names.items() if name.startswith("stream ")]
    assert streams and all(names[parents[u]].startswith("GPU ") for u in streams)
    windows = [p.track_event.name for p in decoded.packet if p.HasField("track_event")
               and names.get(p.track_event.track_uuid) == "torch.profiler windows"
               and p.track_event.type == 1]  # fmt: skip
    assert windows == ["torch/window-1.json"]  # the window, to zoom to


def test_a_window_stamped_before_the_run_began_is_left_out_and_said() -> None:
    entry, trace = window(ALEXNET)  # recorded in 2023: before this clock pair's run
    late = {"unix_ns": 1_800_000_000_000_000_000, "perf_ns": 0}
    notes: list[str] = []
    events, (kept, total) = torch_events(
        [(entry, trace)], shift_ns=late["unix_ns"] - late["perf_ns"], limit=None, notes=notes
    )
    assert kept == total == 0 and events.empty
    assert notes and "before the run's clock began" in notes[0]
