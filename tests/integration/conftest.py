"""Helpers for running real scripts under `probe run` in subprocesses."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from dataclasses import dataclass
from pathlib import Path

import psutil
import pytest

REPO = Path(__file__).resolve().parents[2]


@dataclass
class Result:
    returncode: int
    stdout: str
    stderr: str
    run_dir: Path


def write_script(tmp_path: Path, source: str, name: str = "target.py") -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(source))
    return path


def probe_cmd(*args: str | os.PathLike[str]) -> list[str]:
    """The `probe` console script users run (its sys.path differs from `python -m`)."""
    script = Path(sys.executable).parent / "probe"
    entry = [str(script)] if script.is_file() else [sys.executable, "-m", "probe.cli"]
    return [*entry, *map(str, args)]


def sidecar_alive(run_dir: Path) -> bool:
    for p in psutil.process_iter(["cmdline"]):
        cmd = p.info["cmdline"] or []
        if "probe.cli.sidecar" in cmd and str(run_dir) in cmd:
            return True
    return False


def _python_stacks(pid: int) -> dict[int, str]:
    """py-spy's dump of ``pid``: each thread's innermost frames, by native thread id
    (nothing where py-spy is not installed)."""
    py_spy = shutil.which("py-spy")
    if py_spy is None:
        return {}
    try:
        dump = subprocess.run(
            [py_spy, "dump", "--pid", str(pid)], capture_output=True, text=True, timeout=20
        ).stdout
    except subprocess.TimeoutExpired:
        return {}
    stacks: dict[int, list[str]] = {}
    frames: list[str] = []
    for line in dump.splitlines():
        if line.startswith("Thread "):  # Thread 15590 (idle): "probe-collector"
            frames = stacks.setdefault(int(line.split()[1], 0), [])
        elif line.startswith("    "):
            frames.append(line.split(" (")[0].strip())
    return {tid: " < ".join(f[:5]) for tid, f in stacks.items()}


def where_stuck(pid: int, run_dir: Path) -> str:
    """The processes of a run that did not end (``pid``, its descendants, and the helpers
    that name ``run_dir``): one line each, then one per thread with its scheduler state
    and kernel wait channel (/proc) and its innermost Python frames (py-spy)."""
    procs: dict[int, psutil.Process] = {}
    try:
        root = psutil.Process(pid)
        procs = {p.pid: p for p in [root, *root.children(recursive=True)]}
    except psutil.Error:
        pass
    for p in psutil.process_iter(["cmdline"]):
        if any(str(run_dir) in c for c in p.info["cmdline"] or []):
            procs.setdefault(p.pid, p)
    out = []
    for p in procs.values():
        try:
            if p.status() == psutil.STATUS_ZOMBIE:  # ended; its parent has yet to reap it
                out.append(f"pid {p.pid}: a zombie (ended, not yet reaped)")
                continue
        except psutil.Error:
            pass
        try:
            cmd = " ".join(Path(c).name if c.startswith("/") else c for c in p.cmdline())
            out.append(f"pid {p.pid} (ppid {p.ppid()}): {cmd[:120]}")
            tids = sorted(int(t) for t in os.listdir(f"/proc/{p.pid}/task"))
        except (psutil.Error, OSError):
            continue
        stacks = _python_stacks(p.pid)
        for tid in tids:
            base = Path(f"/proc/{p.pid}/task/{tid}")
            try:
                state = (base / "stat").read_text().rsplit(")", 1)[1].split()[0]
                wchan = (base / "wchan").read_text().strip() or "-"
            except OSError:
                continue
            out.append(f"  {tid} {state} {wchan}: {stacks.get(tid, '?')}")
    return "\n".join(out)


@pytest.fixture
def run_probe(tmp_path):
    """Run `probe run ARGS` to completion; no process it started may outlive the test."""
    started: list[subprocess.Popen[str]] = []

    def spawn(
        *args: str | os.PathLike[str],
        out: Path | None = None,
        env: dict[str, str] | None = None,
        cwd: Path | None = None,
    ) -> subprocess.Popen[str]:
        cmd = probe_cmd("run", "--out", out or tmp_path / "run", *args)
        proc = subprocess.Popen(
            cmd,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
            cwd=cwd or tmp_path,
            env={**os.environ, **(env or {})},
        )
        started.append(proc)
        return proc

    def run(
        *args: str | os.PathLike[str],
        out: Path | None = None,
        timeout: float = 120,
        env: dict[str, str] | None = None,
        cwd: Path | None = None,
    ) -> Result:
        run_dir = out or tmp_path / "run"
        proc = spawn(*args, out=run_dir, env=env, cwd=cwd)
        try:
            stdout, stderr = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            # what each process of the run was doing: a hang seen only on CI is then
            # diagnosable from its log (this test's processes are killed at teardown)
            stuck = where_stuck(proc.pid, run_dir)
            pytest.fail(f"`probe run` still running after {timeout} s\n{stuck}", pytrace=False)
        assert not sidecar_alive(run_dir), "the sidecar outlived `probe run`"
        return Result(proc.returncode, stdout, stderr, run_dir)

    run.spawn = spawn  # type: ignore[attr-defined]
    yield run
    for proc in started:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.communicate()  # reaps it and closes its pipes
    # the sidecar runs in a process group of its own (a terminal's Ctrl-C is not for it):
    # one still finishing a run of this test's is ended with it
    for p in psutil.process_iter(["cmdline"]):
        cmd = p.info["cmdline"] or []
        if {"probe.cli.sidecar", "probe.cli.finisher"} & set(cmd) and any(
            str(tmp_path) in c for c in cmd
        ):
            try:
                p.kill()
                p.wait(10)
            except psutil.Error:
                pass


def wait_for_line(stream, text: str, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        line = stream.readline()
        if text in line:
            return
        if not line:
            time.sleep(0.01)
    raise AssertionError(f"never saw {text!r}")


def wait_until(predicate, timeout: float = 30, interval: float = 0.1) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(interval)
    raise AssertionError("condition not met in time")


@pytest.fixture
def receiver():
    """An OTLP/HTTP collector on 127.0.0.1 (``otlp_collector.Collector``)."""
    pytest.importorskip("opentelemetry.sdk")
    from .otlp_collector import Collector

    collector = Collector()
    yield collector
    collector.close()
