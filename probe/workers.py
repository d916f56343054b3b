"""Following the target's worker processes: each records a shard of the run directory.

A server's workers are processes of their own: gunicorn forks them, ``uvicorn --workers``
and multiprocessing's "spawn" start fresh interpreters, a process pool forks or spawns
its workers. Every Python child of the profiled process records its own stack samples
and spans, with the run's settings, into ``RUN_DIR/workers/<pid>/``: a run directory of
its own (``meta.json`` with a ``worker`` section, and its tables), which the reader merges
into the run (``probe.rundir.reader``). The process tree's resources are sampled once,
from outside, for all of them (the sidecar).

* **fork**: the session's after-fork hook starts a shard session in the child
  (``start_after_fork``), from the thread that forked -- the only one the child has.
* **spawn**: multiprocessing's spawn command line, patched when the target imports
  ``multiprocessing.spawn`` (``follow``), starts with ``start_spawned`` and the
  settings, before the child unpickles anything: a server module the child imports is
  patched as in the parent.

A shard is closed when its process ends: through the launcher (a gunicorn worker ends by
``sys.exit`` through the target's frames), at interpreter exit, in ``os._exit`` (wrapped
in the worker: a forked child's usual way out runs no atexit), at the end of
multiprocessing's ``Process._bootstrap`` (a forked pool worker leaves by ``os._exit``,
which runs no ``atexit``; ``_bootstrap`` calls ``threading._shutdown`` first), or on a
SIGTERM the worker leaves at its default (``probe.sigterm``: the shard is closed, then
the process dies of the signal as it would have, wherever its main thread is blocked). A
worker killed outright leaves its journals up to its last flush: the reader salvages
them and the merge says which worker did not close its shard.

Not followed: a child that execs another program (subprocess; the fork runs none of
Python's hooks), multiprocessing's "forkserver" children (the fork server is started
without probe), and processes started by a spawned child's own shell commands.
"""

from __future__ import annotations

import atexit
import copy
import itertools
import json
import os
import signal
import sys
import threading
import time
from dataclasses import asdict
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from probe.session import Session, Settings

__all__ = [
    "SHARDS",
    "follow",
    "settings_from_dict",
    "shard",
    "start_after_fork",
    "start_spawned",
    "stop_shard",
]

# The folder of a run directory that holds one shard per worker process.
SHARDS = "workers"

# This process's shard session, when it is a worker of a profiled process.
_shard: Session | None = None
# stop_shard's: one closing at a time, re-entered by a signal handler that interrupts it
_stop_lock = threading.RLock()
_stopping_thread: int | None = None  # the thread closing the shard, while it does
# What a spawned child needs to record its shard (set by ``follow``).
_spawn_config: dict[str, Any] | None = None
_spawn_finder: Any = None


def shard() -> Session | None:
    """The shard session of this process, if it is a followed worker."""
    return _shard


def _shard_dir(top: Path, pid: int) -> Path:
    """``top/workers/<pid>``, new (a pid the kernel reused gets ``<pid>-2``, ...)."""
    root = top / SHARDS
    root.mkdir(parents=True, exist_ok=True)
    for n in itertools.count(1):
        path = root / (str(pid) if n == 1 else f"{pid}-{n}")
        try:
            path.mkdir()
        except FileExistsError:
            continue
        return path
    raise AssertionError("unreachable")


def _worker_meta(base: dict[str, Any], top: Path, started_by: str) -> dict[str, Any]:
    """The shard's meta.json: the run's, with this process's identity and clocks."""
    meta = copy.deepcopy(base)
    for key in ("settings", "gpus", "collector", "exit", "end", "end_unix_ns", "duration_s"):
        meta.pop(key, None)
    now_unix, now_perf = time.time_ns(), time.perf_counter_ns()
    meta.update(
        pid=os.getpid(),
        start_unix_ns=now_unix,
        start=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(now_unix / 1e9)),
        clock={"perf_ns": now_perf, "unix_ns": now_unix, "source": "time.perf_counter_ns"},
        worker={
            "pid": os.getpid(),
            "ppid": os.getppid(),
            "started_by": started_by,
            "run_dir": str(top),
            "argv": list(base.get("command") or []) if started_by == "fork" else _argv(),
        },
    )
    return meta


def _argv() -> list[str]:
    from probe.redact import redact_argv

    return redact_argv([sys.executable, *sys.argv[1:]])


def _start(top: Path, settings: Settings, base_meta: dict[str, Any], started_by: str) -> None:
    global _shard, _stop_lock
    _stop_lock = threading.RLock()  # a forked child's copy may be held by a gone thread
    from probe import spans
    from probe.session import Session

    # span ids (and the request ids made from them) unique across the run's processes
    spans.reset_ids((os.getpid() << 32) + 1)
    path = _shard_dir(top, os.getpid())
    session = Session(
        path,
        settings,
        meta=_worker_meta(base_meta, top, started_by),
        sample_tree=False,  # the sidecar samples the whole tree, this process included
        top_dir=top,
    )
    session.start()
    _shard = session
    atexit.register(stop_shard, exit_status=None, ended_by="exit")
    if getattr(os._exit, "__wrapped__", None) is None:
        os._exit = _exit_closing_shard(os._exit)
    if (
        signal.getsignal(signal.SIGTERM) is signal.SIG_DFL
        and threading.current_thread() is threading.main_thread()
    ):
        from probe.sigterm import close_then_die_on_sigterm

        watcher = close_then_die_on_sigterm(_close_on_signal, _closing_on_this_thread)
        if watcher is not None:
            session.stacks.exclude.add(watcher)
    try:  # a multiprocessing worker ends in os._exit, after threading._shutdown
        threading._register_atexit(stop_shard, exit_status=None, ended_by="exit")  # type: ignore[attr-defined]
    except (AttributeError, RuntimeError):
        pass


def _exit_closing_shard(real_exit: Any) -> Any:
    """``os._exit`` in a worker: close the shard first (a forked child's usual way out,
    which runs no atexit; a child that lived less than the first flush kept nothing)."""

    def _exit(status: int) -> None:
        stop_shard(exit_status=status, ended_by="os._exit")
        real_exit(status)

    _exit.__wrapped__ = real_exit  # type: ignore[attr-defined]
    return _exit


def _close_on_signal(signum: int) -> None:
    """A SIGTERM the worker leaves at its default (``probe.sigterm``): the shard is
    closed, then the process dies of the signal as it would have (multiprocessing's
    Pool.terminate() relies on it; uvicorn's workers re-raise it once they have shut
    down). The shard's last second is kept, not lost with the process."""
    stop_shard(exit_status=128 + signum, ended_by="SIGTERM")


def start_after_fork(parent: Session) -> None:
    """In a forked child of a recording process: record this process into a shard."""
    try:
        # the one thread left: CPython 3.11 keeps the parent's TID in its native_id
        # (multiprocessing sets it again itself), and spans and samples name threads by it
        set_native_id = getattr(threading.current_thread(), "_set_native_id", None)
        if set_native_id is not None:
            set_native_id()
        _start(parent.top_dir, _shard_settings(parent.settings), parent.meta, "fork")
    except Exception as e:  # never the target's failure: this worker goes unrecorded
        print(f"probe: worker {os.getpid()} not recorded: {e}", file=sys.stderr)


def start_spawned(config_json: str) -> None:
    """First thing in a spawned multiprocessing child (see ``follow``)."""
    config = json.loads(config_json)
    settings = settings_from_dict(config["settings"])
    _start(Path(config["run_dir"]), settings, config["meta"], "spawn")


def stop_shard(*, exit_status: int | None, ended_by: str) -> None:
    """Close this process's shard, if it has one (safe more than once). A closing under
    way on another thread (probe.sigterm's watcher, the main thread's way out) is waited
    for: the process must not end with its shard half-written."""
    global _stopping_thread
    with _stop_lock:
        if _shard is None or _shard.stopped:
            return
        _stopping_thread = threading.get_ident()
        try:
            _shard.stop(exit_status=exit_status, ended_by=ended_by)
        except Exception as e:
            print(f"probe: worker {os.getpid()}'s shard not closed: {e}", file=sys.stderr)
        finally:
            _stopping_thread = None


def _closing_on_this_thread() -> bool:
    """This thread is closing the shard (a signal handler that interrupted it)."""
    return _stopping_thread == threading.get_ident()


def _shard_settings(settings: Settings) -> Settings:
    """A worker records what the root does but tracemalloc: its snapshots cost the worker
    5x and more (DESIGN.md's cost table), and the leak verdict reads the root's memory."""
    from dataclasses import replace

    return replace(settings, memory=False)


def settings_from_dict(values: dict[str, Any]) -> Settings:
    from probe.samplers.torch_windows import TorchWindowSettings
    from probe.session import Settings

    values = dict(values)
    values["torch_windows"] = TorchWindowSettings(**values.get("torch_windows") or {})
    return Settings(**values)


# -- spawn ----------------------------------------------------------------------------
def follow(session: Session) -> None:
    """Have children spawned from now on record shards of ``session``'s run."""
    global _spawn_config, _spawn_finder
    _spawn_config = {
        "run_dir": str(session.top_dir),
        "settings": asdict(_shard_settings(session.settings)),
        "meta": {k: v for k, v in session.meta.items() if k not in ("gpus", "settings")},
    }
    if _spawn_finder is None:
        from probe.afterimport import AfterImport

        _spawn_finder = AfterImport({"multiprocessing.spawn": _patch_spawn}, _apply)
        _spawn_finder.install()


def _apply(name: str, module: ModuleType, patch: Any) -> None:
    try:
        patch(module)
    except Exception as e:  # a Python whose spawn moved: children go unrecorded
        print(f"probe: spawned workers will not be recorded ({name}: {e})", file=sys.stderr)


def _patch_spawn(module: ModuleType) -> None:
    get_command_line = module.get_command_line

    def get_command_line_recording(**kwds: Any) -> list[str]:
        args = list(get_command_line(**kwds))
        if _spawn_config is None or "-c" not in args:
            return args
        i = args.index("-c") + 1
        # a failure to start the shard must not cost the child: it runs unrecorded
        boot = (
            "try:\n"
            "    import probe.workers\n"
            f"    probe.workers.start_spawned({json.dumps(json.dumps(_spawn_config))})\n"
            "except Exception as e:\n"
            "    import sys; print('probe: worker not recorded:', e, file=sys.stderr)\n"
        )
        args[i] = boot + args[i]
        return args

    setattr(module, "get_command_line", get_command_line_recording)  # noqa: B010 - typed module
