"""pytest plugin: run a service under ``probe run`` inside a test and gate it as
``probe check`` does; every gate's table shows in pytest's summary.

Installed with probe (entry point ``pytest11``), it adds one fixture, ``probe_run``::

    def test_predict_stays_fast(probe_run):
        gate = probe_run("service.py", "--requests", "300",
                         asserts=["p99(request) < 50ms", "no leak"],
                         baseline="benchmarks/baseline-run")
        assert gate.passed, gate.text

``probe_run(target, *args, asserts=(), baseline=None, max_regression="10%",
module=False, timeout=600)`` runs ``probe run --no-report`` on the script (or, with
``module=True``, ``-m target``) in a subprocess -- the service runs as in production, not
inside pytest's process -- into a run directory under the test's ``tmp_path``, then
judges it (``probe.reports.checking.check``). It returns the verdict (``.passed``,
``.text``, ``.run_dir``, ``.gate``) and does not fail the test itself: the test asserts
what it means. A service that exits non-zero fails the test with its stderr.

Importing this module imports nothing heavy: pytest loads it in every session.
"""

from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

__all__ = ["ProbeGate", "probe_run"]

_GATES = pytest.StashKey[list[tuple[str, "ProbeGate"]]]()


@dataclass(frozen=True)
class ProbeGate:
    passed: bool
    text: str  # the table ``probe check`` prints
    run_dir: Path
    gate: Any  # probe.reports.gate.GateText


def pytest_configure(config: pytest.Config) -> None:
    config.stash[_GATES] = []


@pytest.fixture
def probe_run(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    """Run a service under ``probe run`` and gate it (module docstring)."""
    count = 0

    def run(
        target: str | Path,
        *args: str | Path,
        asserts: tuple[str, ...] | list[str] = (),
        baseline: str | Path | list[str | Path] | None = None,
        max_regression: str = "10%",
        module: bool = False,
        timeout: float = 600,
    ) -> ProbeGate:
        nonlocal count
        from probe.reports.checking import check, parse_fraction

        count += 1
        run_dir = tmp_path / f"probe-run-{count}"
        command = [sys.executable, "-m", "probe.cli", "run", "--no-report", "--out", run_dir,
                   *(["-m"] if module else []), target, *args]  # fmt: skip
        done = subprocess.run(
            [str(c) for c in command], capture_output=True, text=True, timeout=timeout
        )
        if done.returncode != 0:
            pytest.fail(f"probe run {target} exited {done.returncode}:\n{done.stderr[-3000:]}")
        given = baseline if isinstance(baseline, list) else [baseline]
        baselines = [Path(b) for b in given if b is not None]
        gate = check(
            [run_dir],
            baselines=baselines,
            assertions=list(asserts),
            max_regression=parse_fraction(max_regression),
        )
        result = ProbeGate(gate.passed, gate.render(), run_dir, gate)
        request.config.stash[_GATES].append((request.node.nodeid, result))
        return result

    return run


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    gates = config.stash.get(_GATES, [])
    if not gates:
        return
    terminalreporter.section("probe check")
    for nodeid, result in gates:
        terminalreporter.write_line(f"{nodeid}  ({result.run_dir})")
        for line in result.text.splitlines():
            terminalreporter.write_line(f"  {line}")
