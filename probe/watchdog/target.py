"""The process ``probe watch`` watches from outside: one already running (``attach``), or
a command it launches (``launch``), with the attribution agent when that command is Python.

The agent is started by ``_boot/sitecustomize.py``, which Python imports at start-up
from the command's PYTHONPATH; it is told where to talk through ``PROBE_WATCH_AGENT`` (a
private directory, the snapshot interval, the traceback depth) and talks through files
there (``AgentLink``). Memory is read with psutil; a process gone or unreadable reads
None, which ends the watch, never raises.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from probe.errors import ProbeError
from probe.redact import redact_argv
from probe.watchdog.attribution import AgentLink
from probe.watchdog.config import WatchConfig

__all__ = ["WatchedProcess", "attach", "launch"]

_BOOT_DIR = Path(__file__).resolve().parent / "_boot"


@dataclass
class WatchedProcess:
    """A process being watched: how to read its memory, and the command's child and agent
    when probe launched it."""

    pid: int
    name: str
    cmdline: list[str]  # redacted (probe.redact): it reaches reports, alerts and webhooks
    read_memory: Callable[[], float | None]
    child: subprocess.Popen[bytes] | None = None
    link: AgentLink | None = None
    agent_dir: Path | None = field(default=None, repr=False)
    # its threads and open descriptors (``counts_reader``), what may pile up with a leak
    read_counts: Callable[[], dict[str, float] | None] = lambda: None

    def describe(self, metric: str) -> dict[str, Any]:
        """The process as reports and alerts name it."""
        return {"pid": self.pid, "name": self.name, "cmdline": self.cmdline, "metric": metric}

    def exited(self) -> bool:
        return self.child is not None and self.child.poll() is not None

    def forward(self, signum: int) -> bool:
        """Pass a signal to a launched command still running (it decides how it stops);
        False when there is none to pass it to."""
        if self.child is None or self.child.poll() is not None:
            return False
        self.child.send_signal(signum)
        return True

    def stop(self, grace_s: float = 10.0) -> None:
        """Stop a launched command still running: SIGTERM, then SIGKILL after ``grace_s``."""
        child = self.child
        if child is None or child.poll() is not None:
            return
        child.send_signal(signal.SIGTERM)
        try:
            child.wait(grace_s)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()

    def exit_status(self) -> int | None:
        """A launched command's exit status as a shell gives it (128+N for signal N)."""
        if self.child is None or self.child.returncode is None:
            return None
        rc = self.child.returncode
        return 128 - rc if rc < 0 else rc

    def agent_error(self) -> str | None:
        """Why the agent gave no attribution, when it failed to start."""
        if self.agent_dir is None:
            return None
        try:
            return (self.agent_dir / "agent.error").read_text(errors="replace").strip()
        except OSError:
            return None

    def close(self) -> None:
        self.stop()
        if self.link is not None:
            self.link.close()
        if self.agent_dir is not None:
            shutil.rmtree(self.agent_dir, ignore_errors=True)


def _memory_reader(proc: Any, metric: str) -> Callable[[], float | None]:
    import psutil

    def read() -> float | None:
        try:
            if metric == "uss":
                value = float(proc.memory_full_info().uss)
            else:
                value = float(proc.memory_info().rss)
        except (psutil.NoSuchProcess, psutil.ZombieProcess, psutil.AccessDenied):
            return None
        # a process tearing down its address space reads 0: it is gone, not freed
        return value if value > 0 else None

    return read


def counts_reader(proc: Any) -> Callable[[], dict[str, float] | None]:
    """The process's threads and open descriptors, and its soft limit of them, read from
    /proc through psutil (the descriptors' directory is listed: a read costs with their
    number, ~0.1 ms for a thousand), and the CPU seconds it has used (user and system: the
    leak's work axis where no requests are counted); None once it is gone or hidden."""
    import psutil

    def read() -> dict[str, float] | None:
        try:
            counts = {
                "threads": float(proc.num_threads()),
                "file descriptors": float(proc.num_fds()),
            }
        except (psutil.Error, OSError):  # gone or hidden
            return None
        try:
            cpu = proc.cpu_times()
            counts["cpu seconds"] = float(cpu.user + cpu.system)
        except (psutil.Error, OSError):
            pass
        try:
            soft, _ = proc.rlimit(psutil.RLIMIT_NOFILE)
        except (psutil.Error, OSError, AttributeError):  # not ours to read, or no rlimit
            return counts
        if soft >= 0:  # RLIM_INFINITY reads -1
            counts["open files limit"] = float(soft)
        return counts

    return read


def open_process(pid: int, metric: str) -> Any:
    """The psutil process for ``pid``, its memory readable; ``ProbeError`` says why not."""
    import psutil

    try:
        proc = psutil.Process(pid)
        proc.memory_full_info() if metric == "uss" else proc.memory_info()
        return proc
    except psutil.NoSuchProcess as e:
        raise ProbeError(f"no process with pid {pid}") from e
    except psutil.ZombieProcess as e:
        raise ProbeError(f"pid {pid} has exited (a zombie): nothing to watch") from e
    except psutil.AccessDenied as e:
        raise ProbeError(
            f"may not read the memory of pid {pid} (permission denied: run probe watch as "
            "the process's user or as root)"
        ) from e


def _cmdline(proc: Any) -> list[str]:
    try:
        return redact_argv(list(proc.cmdline()))
    except Exception:  # noqa: BLE001 -- a name is enough
        return []


def attach(pid: int, config: WatchConfig) -> WatchedProcess:
    """A running process (any program): memory only, no attribution."""
    proc = open_process(pid, config.metric)
    watched = WatchedProcess(pid, proc.name(), _cmdline(proc), _memory_reader(proc, config.metric))
    watched.read_counts = counts_reader(proc)
    return watched


def is_python(argv: list[str]) -> bool:
    exe = os.path.basename(argv[0])
    return bool(re.fullmatch(r"python[0-9.]*", exe)) or os.path.realpath(
        shutil.which(argv[0]) or argv[0]
    ) == os.path.realpath(sys.executable)


def launch(argv: list[str], config: WatchConfig) -> WatchedProcess:
    """Run ``argv``; a Python command gets the attribution agent unless it is off (armed
    from its first line when ``config.traced_start_s`` says so)."""
    env = dict(os.environ)
    link: AgentLink | None = None
    agent_dir: Path | None = None
    if config.attribution != "off" and is_python(argv):
        agent_dir = Path(tempfile.mkdtemp(prefix="probe-watch-"))
        env["PYTHONPATH"] = os.pathsep.join(
            [str(_BOOT_DIR), *filter(None, [env.get("PYTHONPATH")])]
        )
        env["PROBE_WATCH_AGENT"] = json.dumps(
            {"dir": str(agent_dir), "snapshot_s": config.snapshot_s, "frames": config.frames}
        )
        link = AgentLink(agent_dir)
        if config.traced_start_s > 0:
            link.arm()  # from the service's first line
    try:
        child = subprocess.Popen(argv, env=env)
    except OSError as e:
        if agent_dir is not None:
            shutil.rmtree(agent_dir, ignore_errors=True)
        raise ProbeError(f"cannot run {argv[0]!r}: {e.strerror or e}") from e
    watched = WatchedProcess(
        child.pid,
        os.path.basename(argv[0]),
        redact_argv(argv),
        lambda: None,
        child,
        link,
        agent_dir,
    )
    if link is not None:
        link.pid = child.pid
    try:
        proc = open_process(child.pid, config.metric)
        watched.read_memory = _memory_reader(proc, config.metric)
        watched.read_counts = counts_reader(proc)
    except ProbeError:
        watched.close()
        raise
    return watched
