"""Running a target script or module in this process, under a collection session.

The target gets what ``python script.py args`` / ``python -m module args`` would give it:
its own ``sys.argv``, ``__name__ == "__main__"``, ``sys.path[0]`` (the script's folder, or
the working directory for ``-m``) and its exit status. The run ends at script end (after
the target's non-daemon threads finish, as the interpreter would wait for them), on
``sys.exit``, an uncaught exception, SIGINT, SIGTERM or ``--duration``; every path goes
through ``Session.stop`` so the run directory is complete.
"""

from __future__ import annotations

import os
import platform
import re
import runpy
import signal
import sys
import sysconfig
import threading
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any

from probe import __version__
from probe.atomicfile import atomic_path
from probe.osthreads import begin_probes_thread
from probe.redact import redact_argv
from probe.rundir.schema import SCHEMA_NAME, SCHEMA_VERSION
from probe.session import Session, Settings
from probe.sigterm import unwatch_sigterm, watch_sigterm
from probe.target import Target, default_run_dir, resolve_target
from probe.watchdog.limits import cgroup_memory_limit, cores_allowed

__all__ = ["Outcome", "Target", "default_run_dir", "resolve_target", "run"]

# Conventional shell statuses for death by signal: 128 + signal number.
_STATUS_SIGINT = 128 + signal.SIGINT
_STATUS_SIGTERM = 128 + signal.SIGTERM
_STATUS_KILLED = 128 + signal.SIGKILL  # --duration had to end the process itself


@dataclass
class Outcome:
    status: int
    # completed, sys.exit, exception, SIGINT, SIGTERM; duration (the deadline's SIGINT
    # stopped it), duration-sigterm (SIGTERM had to), duration-kill (the process ended)
    ended_by: str
    meta: dict[str, Any] = field(default_factory=dict)
    forked_child: bool = False  # True in a child the target forked: it owns no run
    # non-daemon threads of the target still running past --duration's grace: the
    # process must be ended (os._exit) once the run is finished, or they keep it alive
    threads_cut_short: tuple[str, ...] = ()


def _library_paths() -> list[str]:
    keys = (
        "stdlib",
        "platstdlib",
        "purelib",
        "platlib",
        "scripts",
    )  # scripts: console entry points
    paths = {sysconfig.get_paths()[k] for k in keys}
    paths.add(os.path.dirname(os.path.abspath(__file__)))  # probe's own frames
    return sorted(p for p in paths if p)


def platform_name() -> str:
    """``platform.platform()``'s words without its ~6 ms (on Linux it asks ``uname -p`` in
    a subprocess and reads the interpreter's binary for glibc's version): there, the
    kernel's words from ``os.uname`` and the C library's own answer; elsewhere,
    ``platform.platform()``. The one difference: no processor (``uname -p``'s answer,
    "unknown", left out by ``platform.platform()`` too, on most Linux systems)."""
    uname = os.uname()
    try:
        libc = os.confstr("CS_GNU_LIBC_VERSION") or ""
    except (AttributeError, ValueError, OSError):
        libc = ""
    name, _, version = libc.partition(" ")
    if uname.sysname != "Linux" or name != "glibc" or not version:
        return platform.platform()
    words = "-".join((uname.sysname, uname.release, uname.machine, "with", f"glibc{version}"))
    return re.sub("-+", "-", re.sub(r'[/\\:;"()]', "-", words.replace(" ", "_")))


def build_meta(target: Target, settings: Settings, argv: list[str]) -> dict[str, Any]:
    now_unix, now_perf = time.time_ns(), time.perf_counter_ns()
    try:  # sysconf, not psutil: the profiled process does not need psutil at all
        mem_total: int | None = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError):
        mem_total = None
    return {
        "schema": SCHEMA_NAME,
        "schema_version": SCHEMA_VERSION,
        "probe_version": __version__,
        "command": redact_argv(argv),
        "target": {
            "kind": target.kind,
            "name": target.name,
            "argv": redact_argv([target.name, *target.args]),
        },
        "cwd": os.getcwd(),
        "pid": os.getpid(),
        "python": {
            "version": platform.python_version(),
            "implementation": platform.python_implementation(),
            "executable": sys.executable,
            # Where installed code lives: analysis tells the service's own frames from
            # the standard library's, its dependencies' and probe's.
            "library_paths": _library_paths(),
        },
        "host": {
            "hostname": os.uname().nodename,  # gethostname()'s, without socket's import
            "platform": platform_name(),
            "cpu_count": os.cpu_count(),
            "memory_total_bytes": mem_total,
            # the leak verdict's time to limit: the cgroup's limit, else none
            "memory_limit_bytes": cgroup_memory_limit(),
            # the cores the target may run on: estimates that add cores (instances,
            # processes, threads in flight) have no more than these
            **cores_allowed(),
        },
        # the target's own limits (its soft ones: what it fails at), for the time to
        # reach them of what piles up
        "limits": {"open_files": _open_files_limit()},
        "start_unix_ns": now_unix,
        "start": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(now_unix / 1e9)),
        "clock": {"perf_ns": now_perf, "unix_ns": now_unix, "source": "time.perf_counter_ns"},
    }


def _open_files_limit() -> int | None:
    """The process's soft limit of open descriptors (None: unlimited or unknown)."""
    try:
        import resource

        soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    except (ImportError, OSError, ValueError):
        return None
    return None if soft == resource.RLIM_INFINITY else int(soft)


class _Terminated(SystemExit):
    """Raised in the main thread by our SIGTERM handler, so ``finally`` blocks run."""


# Set by our handler as the main thread takes SIGTERM (cleared as a run starts).
_sigterm_taken = threading.Event()
# How long the SIGTERM watcher (probe.sigterm) gives the main thread to take the signal
# before it closes the run itself. Between bytecodes, or in a call that checks for
# signals when interrupted (sleep, select, lock and queue waits), the handler runs within
# milliseconds; past a second the main thread is in a call that took the signal just
# before it blocked and will not return (Pool.terminate's hang, on the workers' side:
# probe.sigterm), or in a long native call. Without probe either would have died at once.
SIGTERM_UNTAKEN_S = 1.0


def _on_sigterm(signum: int, frame: object) -> None:
    _sigterm_taken.set()
    raise _Terminated(_STATUS_SIGTERM)


# The SIGTERM disposition the target had before ours; forked children get it back.
_target_sigterm: Any = signal.SIG_DFL


def _restore_target_sigterm_in_child() -> None:
    # Our handler is for the profiled process only. A forked child (a multiprocessing
    # worker) must die of SIGTERM the way it would without probe: Pool.terminate() relies
    # on it, and a handler that waits for the interpreter left workers blocked in a
    # SemLock, hanging the pool's join (seen ~1 run in 40).
    if signal.getsignal(signal.SIGTERM) is _on_sigterm:
        signal.signal(signal.SIGTERM, _target_sigterm)


os.register_at_fork(after_in_child=_restore_target_sigterm_in_child)


def _target_traceback(tb: TracebackType | None) -> TracebackType | None:
    """Drop the launcher's and runpy's frames, as Python's own traceback would not show them."""
    while tb is not None:
        module = tb.tb_frame.f_globals.get("__name__", "")
        if module == "runpy" or module == "probe" or module.startswith("probe."):
            tb = tb.tb_next
            continue
        break
    return tb


def _show(e: BaseException) -> None:
    # The default hook prints the exception's own __traceback__, whatever tb it is given.
    e = e.with_traceback(_target_traceback(e.__traceback__))
    sys.excepthook(type(e), e, e.__traceback__)


def _exit_status(code: object) -> int:
    if code is None:
        return 0
    if isinstance(code, int):
        return code & 0xFF if code >= 0 else code % 256
    print(code, file=sys.stderr)  # sys.exit("message") prints it and exits 1
    return 1


def _target_threads_after(grace_s: float | None = None) -> list[str]:
    """Wait for the target's non-daemon threads, as the interpreter does before it exits
    (they are still the target's work, sampled meanwhile): as long as they run, or at
    most ``grace_s``. Returns the names of those still running."""
    deadline = None if grace_s is None else time.monotonic() + grace_s
    me, main = threading.current_thread(), threading.main_thread()
    waiting = [t for t in threading.enumerate() if t not in (me, main) and not t.daemon]
    for t in waiting:
        while t.is_alive():  # in short joins: a signal to the main thread gets through
            left = 0.2 if deadline is None else min(0.2, deadline - time.monotonic())
            if left <= 0:
                break
            t.join(left)
    return [t.name for t in waiting if t.is_alive()]


class _Trace:
    """A viztracer trace of the first ``seconds`` of the run (``--trace``)."""

    def __init__(self, path: Path, seconds: float) -> None:
        from viztracer import VizTracer

        self.path = path
        self._tracer = VizTracer(
            output_file=str(path), verbose=0, register_global=False, tracer_entries=2_000_000
        )
        self._lock = threading.Lock()
        self._done = False
        self._timer = threading.Timer(seconds, self.finish)
        self._timer.daemon = True

    def start(self) -> None:
        self._tracer.start()
        self._timer.start()

    def finish(self) -> None:
        with self._lock:
            if self._done:
                return
            self._done = True
            self._timer.cancel()
            self._tracer.stop()
            with atomic_path(self.path) as saved:  # viztracer opens its output by name
                self._tracer.save(str(saved))


class _DurationStop:
    """``--duration``: at the deadline, Ctrl-C (SIGINT to the main thread, as a user
    would; where SIGINT is ignored, straight to the next step); a target still running
    ``grace_s`` later gets SIGTERM (our handler raises in its main thread, so its
    ``finally`` blocks run); one still running after another
    ``grace_s`` -- SIGINT and SIGTERM both ignored or swallowed -- has its run closed from
    here and the process ended (``kill``: the caller's, it never returns).

    The run that ends its own way first sets ``done``, and nothing more is sent."""

    def __init__(
        self,
        seconds: float,
        grace_s: float,
        main_ident: int,
        kill: Callable[[], None],
    ) -> None:
        self.hit = threading.Event()  # the deadline came
        self.done = threading.Event()  # the run ended its own way (or is being closed)
        self.escalation = ""  # "", "SIGTERM", "kill": how far the stop had to go
        self._seconds, self._grace, self._main, self._kill = seconds, grace_s, main_ident, kill
        self._thread = threading.Thread(target=self._stop, name="probe-duration", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def _stop(self) -> None:
        begin_probes_thread()  # it signals the main thread by its id, not the process
        if self.done.wait(self._seconds):
            return
        self.hit.set()
        # Ignored (inherited from a shell that started probe in the background, or the
        # target's own choice), SIGINT would only cost the grace: SIGTERM at once.
        if signal.getsignal(signal.SIGINT) is not signal.SIG_IGN:
            signal.pthread_kill(self._main, signal.SIGINT)
            if self.done.wait(self._grace):
                return
        self.escalation = "SIGTERM"
        signal.pthread_kill(self._main, signal.SIGTERM)
        if self.done.wait(self._grace):
            return
        self.escalation = "kill"
        self._kill()


def run(
    target: Target,
    run_dir: Path,
    settings: Settings,
    *,
    duration_s: float | None = None,
    stop_grace_s: float = 5.0,
    on_kill: Callable[[Outcome], None] | None = None,
    trace_s: float | None = None,
    argv: list[str] | None = None,
    sample_tree: bool = True,
) -> Outcome:
    """Run ``target`` under collection, writing ``run_dir``; never raises for the target.

    ``duration_s``: stop the target then (``_DurationStop``: SIGINT, SIGTERM after
    ``stop_grace_s``, then the run closed and ``on_kill`` called with its outcome; it
    must end the process: the target is still running). ``sample_tree``: sample the
    process tree and GPUs in this process (False when a sidecar samples them from
    outside, as ``probe run`` does).
    """
    meta = build_meta(target, settings, argv if argv is not None else sys.argv)
    meta["duration_limit_s"] = duration_s
    meta["trace_s"] = trace_s
    session = Session(run_dir, settings, meta=meta, sample_tree=sample_tree)

    saved_argv, saved_path0 = sys.argv[:], sys.path[0] if sys.path else None
    sys.argv = [target.name, *target.args]  # for -m, runpy puts the module's file in argv[0]
    if target.kind == "module":
        path0 = os.getcwd()
    elif os.path.isdir(target.name) or target.name.endswith((".zip", ".pyz")):
        # a folder or zip app with a __main__.py is its own sys.path[0]
        path0 = os.path.abspath(target.name)
    else:
        path0 = os.path.dirname(os.path.abspath(target.name))
    if sys.path:
        sys.path[0] = path0
    else:
        sys.path.insert(0, path0)

    global _target_sigterm
    previous_term = _target_sigterm = signal.signal(signal.SIGTERM, _on_sigterm)
    _sigterm_taken.clear()
    stop_lock = threading.Lock()  # one closing of the run: the main thread's, or another's

    def close_from_here(status: int, ended_by: str) -> None:
        """The run closed from a thread other than the main one, which is still in the
        target; then the process ended (``on_kill`` first: the CLI's verdict)."""
        with stop_lock:
            if session.stopped:
                return  # the main thread got there first
            closed = session.stop(exit_status=status, ended_by=ended_by)
        outcome = Outcome(status=status, ended_by=ended_by, meta=closed)
        if on_kill is not None:
            on_kill(outcome)
        os._exit(status)  # the target still runs: nothing else would end it

    def kill() -> None:
        close_from_here(_STATUS_KILLED, "duration-kill")

    def sigterm_untaken() -> None:
        if not _sigterm_taken.wait(SIGTERM_UNTAKEN_S):
            close_from_here(_STATUS_SIGTERM, "SIGTERM")

    stopper = (
        _DurationStop(duration_s, stop_grace_s, threading.get_ident(), kill)
        if duration_s is not None
        else None
    )
    trace = _Trace(run_dir / "trace.json", trace_s) if trace_s else None

    status, ended_by = 0, "completed"
    # What keeps the target's globals alive until the run is closed: the session's last
    # reading makes a full collection (the leak verdict's witness of garbage in cycles),
    # and a module-level cache must still be held then. runpy drops its temporary
    # module, whose dict then lives only in cycles with its functions: a leak held by a
    # global would be freed by that collection and read as garbage.
    held: object = None
    profiled_pid = os.getpid()
    session.start()
    watcher = watch_sigterm(_on_sigterm, sigterm_untaken)
    if watcher is not None:
        session.stacks.exclude.add(watcher)
    try:
        if trace is not None:
            trace.start()
        if stopper is not None:
            stopper.start()
        try:
            try:
                if target.kind == "script":
                    held = runpy.run_path(target.name, run_name="__main__")
                else:
                    held = runpy.run_module(target.name, run_name="__main__", alter_sys=True)
                _target_threads_after()
            except BaseException as e:
                held = e.__traceback__  # the target's frames, and through them its globals
                raise
        except _Terminated:
            status, ended_by = _STATUS_SIGTERM, "SIGTERM"
            if stopper is not None and stopper.escalation:
                ended_by = "duration-sigterm"  # the deadline's SIGINT did not stop it
        except SystemExit as e:
            status, ended_by = _exit_status(e.code), "sys.exit"
        except KeyboardInterrupt as e:
            if stopper is not None and stopper.hit.is_set():
                status, ended_by = 0, "duration"
            else:
                status, ended_by = _STATUS_SIGINT, "SIGINT"
                _show(e)
        except BaseException as e:
            status, ended_by = 1, "exception"
            _show(e)
            meta["exception"] = "".join(traceback.format_exception_only(type(e), e)).strip()
    finally:
        # In a child the target forked that ends through our frames (sys.exit rather than
        # os._exit), the run belongs to the parent: touch nothing of it.
        forked_child = os.getpid() != profiled_pid
        if forked_child:  # a worker (gunicorn's end by sys.exit): close its own shard
            from probe import workers

            workers.stop_shard(exit_status=status, ended_by=ended_by)
        else:
            if stopper is not None:
                stopper.done.set()
                if stopper.hit.is_set() and ended_by in ("completed", "sys.exit"):
                    # the target handled the stop and ended by itself
                    ended_by = "duration-sigterm" if stopper.escalation else "duration"
            if trace is not None:
                try:
                    trace.finish()
                except Exception as e:  # a failed trace must not cost the rest of the run
                    meta["trace_error"] = str(e)
            sys.argv = saved_argv
            if saved_path0 is not None and sys.path:
                sys.path[0] = saved_path0
            # A second Ctrl-C or SIGTERM must not tear the run directory half-written.
            previous_int = signal.signal(signal.SIGINT, signal.SIG_IGN)
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
            cut: list[str] = []
            if stopper is not None and stopper.hit.is_set():
                # threads of the target that would keep the process alive past the
                # deadline: still sampled while they get a grace to end
                cut = _target_threads_after(stop_grace_s)
                if cut:
                    status, ended_by = _STATUS_KILLED, "duration-kill"
            try:
                with stop_lock:
                    meta = session.stop(
                        exit_status=status,
                        ended_by=ended_by,
                        extra={"threads_cut_short": cut} if cut else None,
                    )
                del held  # the run is closed: the target's globals may go
            finally:
                signal.signal(signal.SIGINT, previous_int)
                signal.signal(signal.SIGTERM, previous_term)
                unwatch_sigterm()
    return Outcome(
        status=status,
        ended_by=ended_by,
        meta=meta,
        forked_child=forked_child,
        threads_cut_short=tuple(cut) if not forked_child else (),
    )
