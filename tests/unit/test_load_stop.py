"""probe.load.runner.stop: how the load's runner ends the service it drove, on real
processes (``sleep`` and ``bash``), its wait injected so that no test waits a grace."""

from __future__ import annotations

import json
import signal
import subprocess

from probe.load.runner import stop


def ignoring_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # as `cmd &` from a script leaves it


def test_a_service_that_ends_on_sigint_is_stopped_with_it_and_nothing_is_written(tmp_path):
    figures = tmp_path / "figures.json"
    figures.write_text('{"requests": 10}')
    service = subprocess.Popen(["sleep", "30"])
    waited: list[float] = []

    def wait_it_out(seconds: float) -> None:
        waited.append(seconds)
        service.wait(timeout=10)  # reaped: a zombie still answers kill(pid, 0)

    stop(service.pid, figures, grace_s=7.0, sleep=wait_it_out)
    assert service.returncode == -signal.SIGINT and waited == [7.0]
    assert json.loads(figures.read_text()) == {"requests": 10}


def test_a_service_that_ignores_sigint_gets_sigterm_at_once_without_waiting(tmp_path):
    figures = tmp_path / "figures.json"
    figures.write_text('{"requests": 10}')
    service = subprocess.Popen(["sleep", "30"], preexec_fn=ignoring_sigint)
    waited: list[float] = []
    stop(service.pid, figures, grace_s=7.0, sleep=waited.append)
    assert service.wait(timeout=10) == -signal.SIGTERM and waited == []
    assert json.loads(figures.read_text()) == {"requests": 10, "stopped_with": "SIGTERM"}


def test_a_service_still_there_after_the_grace_gets_sigterm(tmp_path):
    figures = tmp_path / "figures.json"  # not written yet: the driver failed before
    script = 'trap "echo caught" INT; echo ready; while :; do sleep 0.05; done'
    service = subprocess.Popen(["bash", "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        assert service.stdout is not None and service.stdout.readline() == "ready\n"
        waited: list[float] = []
        stop(service.pid, figures, grace_s=7.0, sleep=waited.append)
        assert service.wait(timeout=10) == -signal.SIGTERM and waited == [7.0]
        assert json.loads(figures.read_text()) == {"stopped_with": "SIGTERM"}
    finally:
        service.kill()
        service.communicate()  # reaps it and closes its pipe
