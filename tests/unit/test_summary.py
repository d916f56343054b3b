"""The interim summary on a synthetic run: figures computed from the tables, not guessed."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from analyzers.summary import summarize
from probe.rundir.reader import Run
from probe.rundir.schema import COLUMNS
from reports.terminal import render_summary


def table(name: str, rows: list[tuple]) -> pd.DataFrame:
    cols = [c for c, _ in COLUMNS[name]]
    df = pd.DataFrame(rows, columns=cols)
    for c, dtype in COLUMNS[name]:
        df[c] = df[c].astype(dtype)
    return df


def synthetic_run() -> Run:
    ms = 1_000_000
    tables = {name: table(name, []) for name in COLUMNS}
    tables["threads"] = table("threads", [(101, 1, "MainThread", 0), (102, 2, "fetcher", 0)])
    tables["frames"] = table(
        "frames",
        [
            (1, "main", "/srv/app.py", 1),
            (2, "postprocess", "/srv/app.py", 10),
            (3, "fetch", "/srv/net.py", 5),
        ],
    )
    tables["stacks"] = table("stacks", [(1, "1;2", 12, ""), (2, "1;3", 7, "sock.recv")])
    # main thread: 800 ms on-CPU in postprocess; fetcher: 600 ms waiting on the network
    tables["samples"] = table(
        "samples",
        [
            (800 * ms, 101, 1, 800 * ms, 800 * ms, "", 80),
            (600 * ms, 102, 2, 600 * ms, 0, "network", 60),
        ],
    )
    tables["spans"] = table(
        "spans",
        [
            (101, 1, None, "postprocess", "stage", 0, 300 * ms, "r1", None),
            (101, 2, None, "postprocess", "stage", 300 * ms, 800 * ms, "r2", None),
        ],
    )
    tables["resources"] = table(
        "resources",
        [
            (0, 42, 1, True, 1.0, 0.1, 100 << 20, float("nan"), 0.0, 0.0, 0, 0, 3, 0.0, 0.0, 0.0),
            (1, 42, 1, True, 1.9, 0.2, 300 << 20, float("nan"), 0.0, 0.0, 0, 0, 3, 0.0, 0.0, 0.0),
        ],
    )
    meta = {
        "duration_s": 1.0,
        "exit": {"status": 0, "ended_by": "completed"},
        "pid": 42,
        "target": {"argv": ["app.py", "--port", "1"]},
        "gpus": {"available": False, "reason": "no driver"},
    }
    return Run(path=Path("/runs/x"), meta=meta, tables=tables, notes=["a note"])


def test_summary_splits_thread_time_into_on_cpu_and_wait_reasons():
    s = summarize(synthetic_run())
    states = {st.state: st for st in s.states}
    assert abs(states["on-cpu"].share - 800 / 1400) < 1e-9
    assert abs(states["network"].share - 600 / 1400) < 1e-9
    assert states["network"].top_call == "sock.recv in fetch (net.py:7)"
    assert [t.name for t in s.threads] == ["MainThread", "fetcher"]
    assert s.threads[1].cpu_s == 0 and s.threads[1].sampled_s == 0.6


def test_summary_ranks_functions_and_stages_and_reads_resources():
    s = summarize(synthetic_run())
    assert [(f.function, f.location) for f in s.top_functions] == [("postprocess", "app.py:12")]
    assert s.top_functions[0].cpu_share == 1.0
    [stage] = s.stages
    assert (stage.name, stage.count, stage.total_s) == ("postprocess", 2, 0.8)
    assert s.process_cpu_s == 2.1  # cumulative counters, from each process's own start
    assert s.peak_rss_bytes == 300 << 20
    assert "no driver" in s.gpu


def test_terminal_rendering_names_the_run_dir_and_every_section():
    text = render_summary(summarize(synthetic_run()))
    assert "Run directory: /runs/x" in text
    assert "network" in text and "sock.recv in fetch" in text
    assert "postprocess" in text and "peak RSS 300.0 MiB" in text
    assert "note: a note" in text


def test_a_child_found_late_counts_all_its_cpu():
    run = synthetic_run()
    child = table(
        "resources",
        [
            (1, 43, 42, False, 3.0, 0.5, 10 << 20, float("nan"), 0.0, 0.0, 0, 0, 1, 0.0, 0.0, 0.0),
            (2, 43, 42, False, 3.5, 0.5, 10 << 20, float("nan"), 0.0, 0.0, 0, 0, 1, 0.0, 0.0, 0.0),
        ],
    )
    run.tables["resources"] = pd.concat([run.tables["resources"], child], ignore_index=True)
    assert summarize(run).process_cpu_s == 2.1 + 4.0  # not 0.5: it had run before we saw it


def test_empty_run_summarises_without_crashing():
    run = synthetic_run()
    empty = Run(path=run.path, meta={}, tables={n: table(n, []) for n in COLUMNS})
    s = summarize(empty)
    assert s.states == [] and s.top_functions == [] and s.stages == []
    assert "No stack samples" in render_summary(s)
