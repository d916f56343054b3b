"""What the verbs print shows a target's control and bidi characters escaped: a stage
named to clear the screen and paint a fake verdict, a command named with a
right-to-left override, never reach the terminal raw."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from .conftest import probe_cmd, write_script

pytestmark = pytest.mark.integration

HOSTILE = "\x1b[2J\x1b[31mFAKE VERDICT\u202e"


def raw(text: str) -> bool:
    return "\x1b" in text or "\u202e" in text


def test_probe_run_prints_a_hostile_stage_name_escaped(tmp_path, run_probe):
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
    assert not raw(result.stdout) and not raw(result.stderr)
    assert "\\x1b[2J\\x1b[31mFAKE VERDICT\\u202e" in result.stdout


def test_probe_watch_prints_a_hostile_command_name_escaped(tmp_path):
    # the watch's status lines and verdict name the command by its argv[0]
    hostile = tmp_path / f"py{HOSTILE}"
    os.symlink(sys.executable, hostile)
    cmd = probe_cmd("watch", "--duration", "2s", "--status-every", "1s", "--", hostile, "-c",
                    "import time; time.sleep(10)")  # fmt: skip
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    assert "probe watch" in done.stderr, done.stderr
    assert not raw(done.stdout) and not raw(done.stderr), done.stderr
    assert "\\x1b[2J\\x1b[31mFAKE VERDICT\\u202e" in done.stderr  # named, escaped
