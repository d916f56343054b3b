"""The target's stacks start at its own first frame: probe runs it in-process, so its
main thread's stacks begin with probe's command line, click's and runpy's frames, which
a profile of ``python service.py`` never shows. Stacks without the launcher stay whole."""

from __future__ import annotations

import pandas as pd

from probe.rundir.reader import without_the_launcher

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
