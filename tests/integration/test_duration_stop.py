"""``--duration`` always stops the target, and ``meta.json`` says how: the deadline's
Ctrl-C, SIGTERM when that was ignored, the process ended when both were; non-daemon
threads that outlive the deadline are cut short after the grace. The run directory is
complete and the verdict printed in every case."""

from __future__ import annotations

import json
import signal
import subprocess
import textwrap
import time

import pytest

from .conftest import probe_cmd

pytestmark = pytest.mark.integration

BUSY = "while True:\n    sum(range(10000)); time.sleep(0.01)\n"
TARGETS = {
    "ignores_sigint": "import signal, time\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\n" + BUSY,
    "ignores_both": "import signal, time\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\n"
    "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n" + BUSY,
    "worker_thread": textwrap.dedent(
        """\
        import threading, time
        def work():
            while True:
                sum(range(10000)); time.sleep(0.01)
        threading.Thread(target=work, name="forever-worker").start()
        time.sleep(60)
        """
    ),
}
EXPECTED = {
    "ignores_sigint": ("duration-sigterm", 128 + signal.SIGTERM),
    "ignores_both": ("duration-kill", 128 + signal.SIGKILL),
    "worker_thread": ("duration-kill", 128 + signal.SIGKILL),
}


@pytest.mark.parametrize("name", sorted(TARGETS))
def test_duration_stops_a_target_that_resists_and_says_how(run_probe, tmp_path, name):
    script = tmp_path / f"{name}.py"
    script.write_text(TARGETS[name])
    started = time.monotonic()
    result = run_probe("--duration", "1", "--stop-grace", "1", script, timeout=60)
    took = time.monotonic() - started
    ended_by, status = EXPECTED[name]
    meta = json.loads((result.run_dir / "meta.json").read_text())
    assert meta["exit"] == {"status": status, "ended_by": ended_by}, result.stderr[-2000:]
    assert result.returncode == status
    assert (result.run_dir / "diagnosis.json").is_file() and "probe:" in result.stdout
    if name == "worker_thread":
        assert meta["threads_cut_short"] == ["forever-worker"]
    # a hang guard, not a timing: the deadline, two graces, start-up and the report
    assert took < 1 + 2 * 1 + 30


def test_a_target_that_inherited_an_ignored_sigint_is_still_stopped(run_probe, tmp_path):
    script = tmp_path / "plain.py"
    script.write_text("import time\n" + BUSY)
    cmd = ["bash", "-c", 'trap "" INT; exec "$@"', "bash", *probe_cmd(
        "run", "--duration", "1", "--stop-grace", "1", "-o", tmp_path / "run", script
    )]  # fmt: skip
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    meta = json.loads((tmp_path / "run" / "meta.json").read_text())
    assert meta["exit"]["ended_by"] in ("duration", "duration-sigterm"), proc.stderr[-2000:]
