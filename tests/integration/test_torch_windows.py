"""probe run on real PyTorch (CPU): torch.profiler windows in the run directory, read back
into the diagnosis; nothing changes for a target without torch, or with the windows off.
Skipped where torch is not installed (the README's test command installs it)."""

from __future__ import annotations

import importlib.util
import itertools
import json
import statistics
import subprocess
import sys

import pandas as pd
import pytest
from perfetto.protos.perfetto.trace.perfetto_trace_pb2 import Trace

from probe.analyzers.analysis import analyze
from probe.analyzers.diff import held_error
from probe.analyzers.op_breakdown import profiler_op_cost_ns
from probe.analyzers.ops import growing_prefix
from probe.analyzers.timeline import TimelineLimits
from probe.analyzers.trace_diagnosis import diagnose_trace
from probe.rundir.kineto import read_kineto
from probe.rundir.reader import load

from .conftest import REPO, probe_cmd, write_script

pytest.importorskip("torch")

DECODER = REPO / "tests" / "torch_corpus" / "decoder.py"
STAGED = REPO / "tests" / "torch_corpus" / "staged_mlp.py"


def torch_figures(run_dir):
    return json.loads((run_dir / "meta.json").read_text())["collector"].get("torch")


def test_torch_s_profiler_lines_stay_off_the_target_s_stderr_and_the_target_s_own_do_not(
    run_probe, tmp_path
):
    # the decoder's model, and a line of the target's own on stderr after each request
    script = write_script(
        tmp_path,
        f"""
        import sys
        sys.path.insert(0, {str(DECODER.parent)!r})
        import torch, decoder
        model = decoder.built()
        prompt = torch.randint(0, decoder.VOCAB, (1, decoder.PROMPT))
        for n in range(150):
            decoder.generate(model, prompt, False)
            print(f"served {{n}}", file=sys.stderr, flush=True)
        """,
        "noisy_decoder.py",
    )
    r = run_probe(script, timeout=300)
    assert r.returncode == 0, r.stderr
    assert [w for w in torch_figures(r.run_dir)["windows"] if not w["cut"]]  # one closed
    assert "registerClient" not in r.stderr and "profiler_st" not in r.stderr, r.stderr
    served = [line for line in r.stderr.splitlines() if line.startswith("served ")]
    assert served == [f"served {n}" for n in range(150)]


def test_a_decoder_s_window_holds_its_main_thread_s_ops_with_the_growing_prefix(run_probe):
    r = run_probe(DECODER, "--requests", "150", timeout=300)
    assert r.returncode == 0, r.stderr
    figures = torch_figures(r.run_dir)
    assert figures["forward_at_s"] is not None and figures["unavailable"] == ""
    # a window the host stalled the decoder through (CI, once: its main thread in kernel
    # state D, page faults, 3.7 s of 4) is short of its work, and another takes its place
    retried = list(itertools.takewhile(lambda w: w["short_of_work"], figures["windows"]))
    first = figures["windows"][len(retried)]
    assert first["start_s"] >= figures["forward_at_s"] + figures["settings"]["warmup_s"] - 0.01
    assert not first["short_of_work"] and len(retried) < figures["settings"]["windows"]
    assert first["close_s"] > 0
    # closed without the GIL where probe._torchclose is built: the decoder ran on
    gil_free = importlib.util.find_spec("probe._torchclose") is not None
    assert first["stall_s"] == (0.0 if gil_free else first["close_s"]), first
    # a Kineto trace a reader outside probe opens: the file as torch wrote it
    trace = read_kineto(r.run_dir / first["file"])
    # read back with the run: the target's ops, with shapes (probe's thread runs none)
    [window] = [w for e, w in load(r.run_dir).torch_windows if e["file"] == first["file"]]
    target_ops = window.tables["ops"]
    assert len(target_ops) == len(trace.tables["ops"]) > 1000
    # the profiler's cost per op, read off the target's own ops: ~1-4 us an op on this
    # machine kind (benchmarks/profiler_op_cost.py), where the unprofiled op takes ~1 us
    op_cost_ns = profiler_op_cost_ns(target_ops)
    assert op_cost_ns is not None and 200 < op_cost_ns < 20_000
    linear = target_ops[target_ops["name"] == "aten::linear"]
    assert linear["input_dims"].str.startswith("[[1,").mean() > 0.9
    # the decoding steps re-run on a prefix one token longer each: what a KV cache saves
    found = growing_prefix(target_ops, op_cost_ns)
    assert found is not None and "T" in found.shape and found.steps >= 8
    d = json.loads((r.run_dir / "diagnosis.json").read_text())
    assert d["torch"]["window"] == first["file"]
    assert 0 < d["torch"]["steady_share"] < 1  # the import and the model's build are not
    assert f"PyTorch ops ({first['file']}" in r.stdout
    # the host's side: the linear layers' addmm among the top ops by self time, in FP32
    # (the model's weights), on the main thread, which also spends time between ops
    cpu = d["torch"]["cpu"]
    top = {o["name"]: o for o in cpu["ops"][:3]}
    assert "aten::addmm" in top and top["aten::addmm"]["dtype"] == "float32"
    assert cpu["threads"][0]["tid"] == linear["tid"].iloc[0]
    assert 0 < cpu["threads"][0]["gap_share"] < 1
    assert cpu["growing_prefix"]["steps"] == found.steps
    assert "ops by self time" in r.stdout and "aten::addmm" in r.stdout


# A service under light load: bursts of forward passes with sleeps between. Truth from
# the script's own clocks: its thread's CPU (thread_time) over the wall time of the loop,
# written at the end. A window timed by the wall clock alone held a quarter of its
# length's work here; sized in the target's CPU, it stays open for a full tenth of a
# second of the target's work. The loop runs 8 s: the first forward pass is seen by a poll
# at a random point every ~0.2 s, and a poll hits a burst about one time in four (10 ms
# of each 40); seen 1.3-2.9 s after the run's start in 12 runs (2026-12-06; the loop
# starts ~1 s in, once torch is imported), it was seen at 6.0 s once, and the window then
# opened after a 6-s loop had ended (cut, the test failing)
BURSTY = """
import json, sys, time
import torch

model = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.ReLU())
x = torch.randn(8, 64)
wall0, cpu0 = time.monotonic(), time.thread_time()
with torch.no_grad():
    while time.monotonic() < wall0 + 8.0:
        burst_end = time.monotonic() + 0.01
        while time.monotonic() < burst_end:
            model(x)
        time.sleep(0.03)
duty = (time.thread_time() - cpu0) / (time.monotonic() - wall0)
json.dump({"duty": duty}, open(sys.argv[1], "w"))
"""


def test_a_window_on_a_lightly_loaded_target_stays_open_for_its_length_of_the_target_s_cpu(
    run_probe, tmp_path
):
    truth = tmp_path / "truth.json"
    r = run_probe(write_script(tmp_path, BURSTY), truth, timeout=180)
    assert r.returncode == 0, r.stderr
    duty = json.loads(truth.read_text())["duty"]
    assert 0.1 < duty < 0.5  # the target runs a part of a core, as designed
    figures = torch_figures(r.run_dir)
    assert len(figures["windows"]) == 1, figures
    [window] = figures["windows"]
    length = figures["settings"]["window_s"]
    assert not window["cut"] and window["target_cpu_s"] >= length
    # its length of CPU takes ~length / duty of wall (the window also slows its ops)
    held_open = window["end_s"] - window["start_s"]
    assert 0.5 * length / duty < held_open <= length * figures["settings"]["longest"] + 0.05
    [(_, trace)] = load(r.run_dir).torch_windows
    ops = trace.tables["ops"]
    assert (ops["ts_ns"].max() - ops["ts_ns"].min()) / 1e9 > 0.5 * held_open


def test_a_torch_script_with_no_module_call_takes_no_window_and_says_why(run_probe, tmp_path):
    script = write_script(
        tmp_path,
        """
        import time
        import torch
        x = torch.ones(64, 64)
        deadline = time.monotonic() + 2.0
        while time.monotonic() < deadline:
            x = (x @ x).clamp(-1, 1)
        """,
    )
    r = run_probe(script, timeout=180)
    assert r.returncode == 0, r.stderr
    figures = torch_figures(r.run_dir)
    assert figures["windows"] == [] and "no nn.Module call" in figures["unavailable"]
    assert not (r.run_dir / "torch").exists()
    d = json.loads((r.run_dir / "diagnosis.json").read_text())
    assert "torch" not in d
    assert any("no torch.profiler window was taken" in n for n in d["notes"])


def test_windows_off_leave_the_run_as_it_was_without_torch(run_probe):
    r = run_probe("--torch-windows", "0", DECODER, "--requests", "60", timeout=300)
    assert r.returncode == 0, r.stderr
    assert torch_figures(r.run_dir) is None and not (r.run_dir / "torch").exists()
    d = json.loads((r.run_dir / "diagnosis.json").read_text())
    assert "torch" not in d and not any("torch.profiler" in n for n in d["notes"])


# Ground truth from the script's own clock (perf_counter_ns: CLOCK_MONOTONIC, the run's
# clock): each marker op runs between two reads it logs, so on the timeline it must lie
# between them. Kineto stamps ops in Unix time; only the run's clock pair can put them
# there (analyzers.torch_timeline).
# One intra-op thread, as the corpus' services run: with torch's default (one thread a
# core) its OpenMP team spins at each op's barrier while a core is taken by anything
# else, and beside two CPU hogs this loop ran 19 iterations in 3 s where one thread ran
# 6,757 (1 of 6 runs of this file under load caught 1 marker; /tmp experiment,
# 2026-11-27): what the window holds is then that spinning, not the markers.
MARKED = """
import json, sys, time
import torch

torch.set_num_threads(1)
model = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.ReLU())
x, marker = torch.randn(8, 64), torch.randn(333)
log = open(sys.argv[1], "w")
deadline = time.monotonic() + 3.0
with torch.no_grad():
    while time.monotonic() < deadline:
        for _ in range(20):
            model(x)
        before = time.perf_counter_ns()
        torch.cumsum(marker, 0)
        log.write(json.dumps([before, time.perf_counter_ns()]) + "\\n")
"""


def test_a_window_s_ops_land_on_the_perfetto_and_chrome_timelines_when_they_ran(
    run_probe, tmp_path
):
    script = write_script(tmp_path, MARKED)
    marks = tmp_path / "marks.jsonl"
    r = run_probe(script, marks, timeout=300)
    assert r.returncode == 0, r.stderr
    intervals = [json.loads(line) for line in marks.read_text().splitlines()]
    events = analyze(load(r.run_dir), limits=TimelineLimits.unbounded()).timeline.torch
    cumsums = events[events["name"] == "aten::cumsum"]
    assert len(cumsums) >= 3  # the window caught a few markers
    for start, end in zip(cumsums["start_ns"], cumsums["end_ns"], strict=True):
        # within its logged interval (1 ms for the wall clock's slew since the run began)
        assert any(b - 1e6 <= start and end <= a + 1e6 for b, a in intervals), (start, end)

    perfetto, chrome = tmp_path / "trace.perfetto-trace", tmp_path / "trace.json"
    for fmt, out in (("perfetto", perfetto), ("chrome", chrome)):
        done = subprocess.run(probe_cmd("export", r.run_dir, "--format", fmt, "--full", "-o", out),
                              capture_output=True, text=True, timeout=300)  # fmt: skip
        assert done.returncode == 0, done.stderr
    trace = Trace.FromString(perfetto.read_bytes())
    torch_tracks = {
        p.track_descriptor.uuid
        for p in trace.packet
        if p.HasField("track_descriptor") and p.track_descriptor.name == "torch"
    }
    begins = [p for p in trace.packet if p.HasField("track_event") and p.track_event.type == 1]
    on_torch = [p for p in begins if p.track_event.track_uuid in torch_tracks]
    assert len(on_torch) == len(events)  # every event of the windows, once
    chrome_begins = [
        e for e in json.loads(chrome.read_text())["traceEvents"]
        if e["ph"] == "b" and e.get("id2", {}).get("local", "").startswith("torch ")
    ]  # fmt: skip
    assert len(chrome_begins) == len(events)
    marker_us = sorted(e["ts"] for e in chrome_begins if e["name"] == "aten::cumsum")
    assert marker_us == pytest.approx(sorted(cumsums["start_ns"] / 1e3), abs=1)


def test_a_window_holds_each_stage_as_a_range_timed_as_its_span_and_in_the_span_table(run_probe):
    r = run_probe(STAGED, timeout=180)
    assert r.returncode == 0, r.stderr
    run = load(r.run_dir)
    [(entry, window)] = run.torch_windows[:1]
    ranges = window.tables["annotations"]
    assert not window.tables["ops"]["name"].astype(str).str.startswith("probe: ").any()
    stages = ("preprocess", "infer", "postprocess", "request")
    assert set(stages) <= set(ranges["name"].astype(str))
    # torch's clock and the journal's, the same spans: Kineto's Unix time onto the run's
    clock = run.meta["clock"]
    shift = int(clock["unix_ns"]) - int(clock["perf_ns"])
    start = ranges["ts_ns"] + int(window.meta.get("baseTimeNanoseconds") or 0) - shift
    first, last = int(start.min()), int((start + ranges["dur_ns"]).max())
    spans = run.spans[(run.spans["start_ns"] >= first) & (run.spans["end_ns"] <= last)]
    for name in stages:
        traced = ranges[ranges["name"].astype(str) == name]["dur_ns"]
        journal = spans[spans["name"] == name]
        journal = journal["end_ns"] - journal["start_ns"]
        assert abs(len(traced) - len(journal)) <= 1, name  # a span cut at either edge
        # the range opens before the span's first clock read and closes after its last
        # (it also holds the ranges nested in it, ~0.6 us each): never shorter, and
        # within 10% (+10 us) on the median
        assert journal.median() - 2_000 <= traced.median() <= 1.1 * journal.median() + 10_000
    # a request still open when the window closed is dropped, not read as ending at the
    # stop (before, one read 49 ms): each request range is a request of the journal, paired
    # on its start, and no longer than it. Against the journal's own span, not a fixed
    # bound: on a busy 2-core machine a preempted request can take 11 ms (a CI run read one)
    is_request = ranges["name"].astype(str) == "request"
    traced = pd.DataFrame({"start_ns": start[is_request], "dur_ns": ranges["dur_ns"][is_request]})
    journal = spans[spans["name"] == "request"]
    journal = pd.DataFrame(
        {"j_start_ns": journal["start_ns"], "j_dur_ns": journal["end_ns"] - journal["start_ns"]}
    )
    typical = journal["j_dur_ns"].median()
    paired = pd.merge_asof(
        traced.sort_values("start_ns").astype("int64"), journal.sort_values("j_start_ns"),
        left_on="start_ns", right_on="j_start_ns", direction="nearest",
    )  # fmt: skip
    astray = paired[
        ((paired["start_ns"] - paired["j_start_ns"]).abs() > typical / 2)
        | (paired["dur_ns"] > paired["j_dur_ns"] + typical / 2)
    ]
    assert astray.empty, (astray, entry["cut_ranges"])
    d = json.loads((r.run_dir / "diagnosis.json").read_text())
    table = {s["name"]: s for s in d["torch"]["stages"]}
    assert set(stages) <= set(table) and table["infer"]["device_ns"] == 0  # CPU: no GPU
    assert abs(table["infer"]["spans"] - len(spans[spans["name"] == "infer"])) <= 1


def _paired_speedup(*args: str) -> float:
    """staged_mlp's own figure, unprofiled: eager over frozen graph, the median ratio of
    alternated turns in one process (``--paired``)."""
    done = subprocess.run(
        [sys.executable, str(STAGED), "--paired", "--seconds", "6", *args],
        capture_output=True, text=True, timeout=120, check=True,
    )  # fmt: skip
    return float(done.stdout.split("ratio ")[1].split()[0])


def test_a_compiled_graph_s_estimate_meets_its_realisation_where_python_between_ops_holds_the_time(
    run_probe,
):
    # 16 blocks of width 64 at batch 1: small ops, the Python between them a large share
    small = ("--blocks", "16", "--width", "64", "--batch", "1")
    # 2,500 requests: the run's own estimate scales the window's by the stage's share of
    # the whole run, torch's import and the model's build included. A loop of fixed
    # seconds is a smaller share on a slower host, where the import takes longer: after
    # 4 s the run read 1.41x on a host at full speed and 1.23x (steady share 0.47, under
    # the 1.25x bar, a clean-clone CI failure) on one at half speed, 2026-11-28. A count
    # of requests slows with the import: 0.63 of the run and 1.34x on that same host
    r = run_probe(STAGED, "--requests", "2500", *small, timeout=240)
    assert r.returncode == 0, r.stderr
    d = json.loads((r.run_dir / "diagnosis.json").read_text())
    [window] = [x for x in d["torch"]["recommendations"] if x["id"] == "inference_runtime"]
    assert window["evidence"]["stage"] == "infer"  # the model's stage, not the request
    # the same stage frozen into a TorchScript graph, against eager, both unprofiled:
    # the steady loop, which is what the window sees. Paired in one process: timed as
    # separate processes, each side's least of two alternated runs, the pair read up to
    # 2.21-2.89x within an hour on one idle host (eager 831-1,098 us, graph 376-508 us)
    # and put a 1.63-1.69x estimate out of the bar in 3 of 14 tries; paired, 1.77-1.96x
    # in 4 of 4 (staged_mlp.truth.md)
    # the median of three such measures: one read 3.01x between 2.36x and 2.51x on a
    # host at half speed (2026-11-28)
    realised = statistics.median(_paired_speedup(*small) for _ in range(3))
    # The estimate counts the Python between the ops only: a graph also runs small ops
    # faster, by a part that grows on a slower host (here 1.77-1.96x realised against
    # 1.62-1.72x, 2026-11-27; on a host of this kind at half speed 2.36-2.46x against
    # 1.58-1.64x, 2026-11-28, and a clean-clone CI run failed on it), so the figure
    # states the range six other models realised of theirs (TraceModel.graph_realised_*):
    # held as a conservative figure is, within 25% from above and the realisation in it
    said, stated = window["estimated_speedup"], window["evidence"]["speedup_range"]
    assert held_error(said, realised, stated) <= 0.25, (window, realised)
    assert any(x["id"] == "inference_runtime" for x in d["recommendations"])  # the run's


def test_full_collections_inside_the_model_s_stage_are_not_read_as_python_a_graph_removes(
    run_probe,
):
    # the small-ops model with a full collection inside every 10th infer call: ~70 ms
    # each over torch's heap, ~90% of the loop. A frozen graph realised 0.82-0.91x here
    # (its jit objects lengthen every walk; staged_mlp.truth.md): the collections held
    # inside the window's infer spans read as Python between ops put it at 2.22x
    small = ("--blocks", "16", "--width", "64", "--batch", "1")
    # a 0.3-s window and 800 requests: at the default 0.1 s and 400, 5 runs in 25
    # (2026-12-07: 17 of this test, 8 of its command) had no collection inside a kept
    # infer span -- the window held 9 infer calls
    # between two collections, or the one that filled it ran while it closed (its span
    # still open, dropped), or the forward pass was seen late (1.5-3.9 s: the poll waits
    # out collections) and the window opened as 400 requests ended. At these settings
    # the command's 10 runs held 166-221 ms of collections, the window whole, the run
    # 7-9 s, and the test passed 7 of 7
    r = run_probe(
        "--torch-window", "0.3", STAGED, "--requests", "800", "--collect-every", "10", *small,
        timeout=240,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    d = json.loads((r.run_dir / "diagnosis.json").read_text())
    [window] = [x for x in d["torch"]["recommendations"] if x["id"] == "inference_runtime"]
    # the run's timing of its collections found the ones inside the window's spans (its
    # clock and Kineto's lined up), and they are the run's share, not the window's
    assert window["evidence"]["stage"] == "infer" and window["evidence"]["collections_ms"] > 0
    assert d["torch"]["steady_share"] < 0.5, d["torch"]["steady_share"]
    assert not any(x["id"] == "inference_runtime" for x in d["recommendations"]), d[
        "recommendations"
    ]


def test_a_trace_recorded_with_its_collections_reads_them_apart_from_the_stage_s_python(
    tmp_path,
):
    # the same loop recorded three times by torch.profiler alone (no probe run): plain;
    # a gc.collect() inside every 20th infer range, recorded (record_python_gc_info);
    # the same collections not recorded
    small = ("--blocks", "16", "--width", "64", "--batch", "1", "--requests", "60")
    collect = ("--collect-every", "20")
    glue = {}
    for name, extra in (("plain", ()), ("told", (*collect, "--gc-info")), ("untold", collect)):
        out = tmp_path / f"{name}.json"
        subprocess.run(
            [sys.executable, str(STAGED), *small, "--trace", str(out), *extra],
            capture_output=True, timeout=120, check=True,
        )  # fmt: skip
        d = diagnose_trace(read_kineto(out))
        every = d.recommendations + d.minor_recommendations
        [r] = [r for r in every if r.id == "inference_runtime"]
        glue[name] = (r.evidence["glue_share"], r.evidence["collections_ms"])
    # three collections of ~130 ms over torch's heap in a ~0.45-s trace: read as the
    # stage's Python, its share doubled (0.42 -> 0.83, 2026-12-07); recorded, they come
    # off it and the share is the plain loop's (0.43)
    assert glue["told"][1] > 0 and glue["untold"][1] == 0, glue
    assert glue["untold"][0] > glue["plain"][0] + 0.2, glue  # the collections weigh here
    assert abs(glue["told"][0] - glue["plain"][0]) < 0.1, glue


def test_no_compiled_graph_is_advised_where_the_ops_hold_the_time(run_probe):
    # the default: six blocks of width 256 at batch 16; a graph buys 1.09-1.19x here
    # (staged_mlp.truth.md), under the bar of a recommendation
    r = run_probe(STAGED, "--seconds", "2", timeout=180)
    assert r.returncode == 0, r.stderr
    d = json.loads((r.run_dir / "diagnosis.json").read_text())
    assert not any(x["id"] == "inference_runtime" for x in d["recommendations"])


def test_a_torch_without_ranges_still_gets_its_window_and_the_profiler_goes_off(
    tmp_path, monkeypatch
):
    import torch

    from probe import spans
    from probe.samplers import torch_windows

    def no_ranges():
        raise AttributeError("this torch has neither range")

    monkeypatch.setattr(torch_windows, "_torch_ranges", no_ranges)
    before = spans.range_domain()
    window = torch_windows.start_kineto_window()
    assert spans.range_domain() is before  # spans unranged, as before the window
    (torch.ones(8) + 1).sum()
    window.save(tmp_path / "w.json")
    assert not torch.autograd.profiler._is_profiler_enabled  # off again
    assert "aten::add" in (tmp_path / "w.json").read_text()
