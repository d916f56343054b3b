"""The target's stacks start at its own first frame: probe runs it in-process, so its
main thread's stacks begin with probe's command line, click's and runpy's frames, which
a profile of ``python service.py`` never shows. Stacks without the launcher stay whole.
Samples in probe's own code around the target (its session starting or closing) are not
the target's time."""

from __future__ import annotations

import pandas as pd

from probe.rundir import SCHEMA_NAME, SCHEMA_VERSION
from probe.rundir.reader import load, probe_s_own_stacks, without_the_launcher
from probe.rundir.writer import RunWriter, prepare_run_dir

FRAMES = pd.DataFrame(
    [
        (1, "<module>", "/site/probe/cli/__main__.py"),
        (2, "Command.main", "/site/click/core.py"),
        (3, "run", "/site/probe/launcher.py"),
        (4, "run_path", "<frozen runpy>"),
        (5, "_run_code", "<frozen runpy>"),
        (6, "<module>", "/srv/service.py"),
        (7, "handle", "/srv/service.py"),
        (8, "_run_code", "/usr/lib/python3.11/runpy.py"),
        (9, "<module>", "/srv/plugin.py"),
        (10, "worker", "/srv/service.py"),
        (11, "Session.stop", "/site/probe/session.py"),
        (12, "get_data", "<frozen importlib._bootstrap_external>"),
    ],
    columns=["frame_id", "function", "filename"],
)


def stacks(*paths: str) -> pd.DataFrame:
    return pd.DataFrame({"stack_id": range(len(paths)), "frame_ids": list(paths)})


def test_the_main_thread_s_stacks_start_at_the_target_s_module():
    out = without_the_launcher(stacks("1;2;3;4;5;6;7", "1;2;3;4;5;6"), FRAMES)
    assert list(out["frame_ids"]) == ["6;7", "6"]


def test_the_service_s_own_runpy_and_its_other_threads_are_left_whole():
    # the service runs a plugin through runpy itself: only the launcher's runpy is cut
    own = "1;2;3;4;5;6;8;9"
    out = without_the_launcher(stacks(own, "10", "", "6;8;9"), FRAMES)
    assert list(out["frame_ids"]) == ["6;8;9", "10", "", "6;8;9"]


def test_a_stack_caught_inside_the_launcher_before_the_target_keeps_its_frames():
    out = without_the_launcher(stacks("1;2;3;4", "1;2;3;4;5"), FRAMES)
    assert list(out["frame_ids"]) == ["1;2;3;4", "1;2;3;4;5"]


def test_stacks_in_probe_s_own_code_around_the_target_are_probe_s():
    # closing the session after the target returned (an import it made there read as the
    # target's "<library>, disk 100%"), and before the target's first frame; not the
    # target's frames, its other threads, or the launcher's runpy on its way in
    paths = ("1;2;3;11;12", "1;2;3", "1;2;3;4;5;6;7", "10", "1;2;3;4;5", "6;8;9")
    assert probe_s_own_stacks(stacks(*paths), FRAMES) == {0, 1}


def test_a_run_s_samples_in_probe_s_own_code_are_left_out_when_it_loads(tmp_path):
    w = RunWriter(prepare_run_dir(tmp_path / "run"))
    w.write_meta({"schema": SCHEMA_NAME, "schema_version": SCHEMA_VERSION, "start_unix_ns": 0})
    w.append("frames", [list(r) + [1] for r in FRAMES.itertuples(index=False)])
    w.append("stacks", [[0, "1;2;3;4;5;6;7", 9, ""], [1, "1;2;3;11;12", 9, "file.read"]])
    w.append("samples", [[100, 7, 0, 10_000_000, 9_000_000, "", 1],
                         [200, 7, 1, 10_000_000, 600_000, "disk", 1]])  # fmt: skip
    w.close()
    run = load(w.path)
    assert list(run.tables["samples"]["stack_id"]) == [0]
    assert list(load(w.path, tables=["samples"]).tables["samples"]["stack_id"]) == [0, 1]
