"""What the verbs print shows a target's control and bidi characters escaped: a stage
named to clear the screen and paint a fake verdict, a command named with a
right-to-left override, never reach the terminal raw."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from .conftest import probe_cmd, write_script

pytestmark = pytest.mark.integration

HOSTILE = "\x1b[2J\x1b[31mFAKE VERDICT\u202e"
ESCAPED = "\\x1b[2J\\x1b[31mFAKE VERDICT\\u202e"  # as the terminal shows it


def raw(text: str) -> bool:
    return "\x1b" in text or "\u202e" in text


def test_every_verb_on_a_run_prints_a_hostile_stage_name_escaped(tmp_path, run_probe):
    # run, analyze (verdict and --json), report (text and json to stdout), diff: each
    # shows the name escaped, and the JSON still parses to the name the service gave
    script = write_script(
        tmp_path,
        f"""
        import time
        import probe

        @probe.stage({HOSTILE!r})
        def work():
            t = time.perf_counter()
            while time.perf_counter() - t < 0.01:
                pass

        for _ in range(60):
            with probe.request():
                work()
        """,
    )
    result = run_probe(script)
    assert result.returncode == 0, result.stderr
    printed = {"run": (result.stdout, result.stderr)}
    run_dir = str(result.run_dir)
    verbs = {
        "analyze": ["analyze", run_dir],
        "analyze --json": ["analyze", "--json", run_dir],
        "report text": ["report", "--format", "text", run_dir],
        "report json": ["report", "--format", "json", run_dir],
        "report html": ["report", run_dir],
        "diff": ["diff", run_dir, run_dir],
        "diff --json": ["diff", "--json", run_dir, run_dir],
    }
    for label, args in verbs.items():
        done = subprocess.run(probe_cmd(*args), capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, (label, done.stderr)
        printed[label] = (done.stdout, done.stderr)
    for label, (stdout, stderr) in printed.items():
        assert not raw(stdout) and not raw(stderr), label
    for label in ("run", "analyze", "report text", "diff"):
        assert ESCAPED in printed[label][0], label
    for label in ("analyze --json", "report json"):
        stages = [s["name"] for s in json.loads(printed[label][0])["stages"]]
        assert HOSTILE in stages, label


def test_probe_watch_prints_a_hostile_command_name_escaped(tmp_path):
    # the watch's status lines and verdict name the command by its argv[0]
    hostile = tmp_path / f"py{HOSTILE}"
    os.symlink(sys.executable, hostile)
    cmd = probe_cmd("watch", "--duration", "2s", "--status-every", "1s", "--", hostile, "-c",
                    "import time; time.sleep(10)")  # fmt: skip
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    assert "probe watch" in done.stderr, done.stderr
    assert not raw(done.stdout) and not raw(done.stderr), done.stderr
    assert ESCAPED in done.stderr  # named, escaped
