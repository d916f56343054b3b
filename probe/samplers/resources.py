"""The resource sampler: CPU, memory, I/O and threads of the process tree, and the host.

Default 10 Hz. Per process of the tree (the target and every descendant): cumulative CPU
user/system, RSS, read/write bytes, context switches, thread count; per OS thread CPU
(native threads too -- BLAS, intra-op pools); host CPU %, available memory, network bytes,
and, sampling from outside, the sampling process's own CPU: probe's helper is busy on the
host too (it imports the analysis stack while the target runs), and the analysis must
not count it among the other processes that leave the target fewer cores.
Costlier figures (USS reads smaps, fd and socket counts walk /proc) come every
``slow_every`` ticks; new children are looked for every ``children_every`` ticks (every
tick by default: ``probe run`` samples from its sidecar, where the scan of /proc costs the
target nothing, and a short-lived child found a second late is half missed). A process
that vanishes or denies access is skipped for that tick, never an error.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from typing import Any

import psutil

from probe.pids import HELPER_ENV
from probe.samplers.host_cpu import host_cpu_jiffies, host_times_from_jiffies

__all__ = [
    "HELPER_ENV",
    "ResourceSampler",
    "count_sockets",
    "descendant_pids",
    "host_cpu_jiffies",
    "host_times_from_jiffies",
]


_GONE = (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess, ProcessLookupError)


def _has_child_lists() -> bool:
    return os.path.exists(f"/proc/self/task/{threading.get_native_id()}/children")


_CHILD_LISTS = _has_child_lists()


def descendant_pids(pid: int) -> list[int]:
    """Every descendant of ``pid``, read from the kernel's per-thread child lists
    (/proc/PID/task/TID/children) down the tree: the cost follows the tree. psutil's
    ``children(recursive=True)``, the fallback where the kernel keeps no such lists,
    reads every process of the host each call (~100 files a tick on a quiet host, grows
    with the host)."""
    if not _CHILD_LISTS:
        return [c.pid for c in psutil.Process(pid).children(recursive=True)]
    if not os.path.isdir(f"/proc/{pid}/task"):
        raise psutil.NoSuchProcess(pid)
    found: list[int] = []
    todo = [pid]
    while todo:
        parent = todo.pop()
        try:
            tasks = os.listdir(f"/proc/{parent}/task")
        except OSError:
            continue  # ended while we looked
        for tid in tasks:
            try:
                with open(f"/proc/{parent}/task/{tid}/children", "rb") as f:
                    kids = [int(k) for k in f.read().split()]
            except OSError:
                continue
            found.extend(kids)
            todo.extend(kids)
    return found


def count_sockets(pid: int) -> int | None:
    """Open sockets of a process, from its fd links (None where /proc is unavailable)."""
    fd_dir = f"/proc/{pid}/fd"
    try:
        names = os.listdir(fd_dir)
    except OSError:
        return None
    n = 0
    for name in names:
        try:
            if os.readlink(f"{fd_dir}/{name}").startswith("socket:"):
                n += 1
        except OSError:
            continue
    return n


class ResourceSampler:
    """Samples the process tree rooted at ``pid``; rows go to three tables."""

    def __init__(
        self,
        pid: int | None = None,
        *,
        clock: Callable[[], int] = time.perf_counter_ns,
        process: Callable[[int], Any] = psutil.Process,
        host: Any = psutil,
        sockets: Callable[[int], int | None] = count_sockets,
        slow_every: int = 10,
        children_every: int = 1,
        own_cpu: Callable[[], float] = lambda: sum(os.times()[:2]),
        descendants: Callable[[int], list[int]] | None = None,
        host_since: Any = None,
    ) -> None:
        """``host_since``: the host's CPU counters (``host_times_from_jiffies``) the
        first reading's interval starts at; None: the counters at construction."""
        self._clock = clock
        self._descendants = descendants or descendant_pids
        self._process = process
        self._host = host
        self._sockets = sockets
        self._slow_every = max(1, slow_every)
        self._children_every = max(1, children_every)
        self.root_pid = pid if pid is not None else os.getpid()
        self._procs: dict[int, Any] = {}
        try:
            self._procs[self.root_pid] = process(self.root_pid)
        except _GONE:
            # gone before the first reading (the sidecar started after a kill): nothing
            # to sample, and the run must still be finished
            pass
        # Sampling from outside (the sidecar is the target's child): never count ourselves.
        self._own_pid = os.getpid() if self.root_pid != os.getpid() else -1
        # in the target (own_pid -1) our CPU is the process's, already counted there
        self._own_cpu = own_cpu if self._own_pid != -1 else None
        self._tick = 0
        self.peak_rss = 0
        self.pids_seen: set[int] = {self.root_pid}
        self._helpers: set[int] = set()
        self._rows: dict[str, list[tuple[Any, ...]]] = {
            "resources": [],
            "os_threads": [],
            "system": [],
        }
        self._host_times: Any = host_since
        if host_since is None:
            self._host_cpu_percent()  # the baseline the first reading's interval starts at

    def tree_pids(self) -> list[int]:
        return list(self._procs)

    def _refresh_children(self) -> None:
        if self.root_pid not in self._procs:
            return
        try:
            children = self._descendants(self.root_pid)
        except _GONE:
            return
        alive = {self.root_pid}
        for pid in children:
            if pid == self._own_pid or pid in self._helpers:
                continue
            child = self._procs.get(pid)
            if child is None:
                try:
                    child = self._process(pid)
                except _GONE:
                    continue
                if self._is_helper(child):
                    continue
                self._procs[pid] = child
                self.pids_seen.add(pid)
            alive.add(pid)
        for pid in [p for p in self._procs if p not in alive]:
            del self._procs[pid]

    def _is_helper(self, child: Any) -> bool:
        """One of probe's own processes the target's process started (``probe run
        --load``'s load driver, a child of the process probe runs the target in): its CPU
        is the clients', and counted as the service's it raised a request's demand by
        the driver's ~12% (shop_api's CPU route, 0.65 s of the driver's to ~5 s)."""
        try:
            helper = HELPER_ENV in child.environ()
        except _GONE:
            return False
        if helper:
            self._helpers.add(child.pid)
        return helper

    def sample(self) -> None:
        now = self._clock()
        slow = self._tick % self._slow_every == 0
        if self._tick % self._children_every == 0:
            self._refresh_children()
        self._tick += 1
        resources, os_threads = self._rows["resources"], self._rows["os_threads"]
        for pid, proc in list(self._procs.items()):
            try:
                row, threads = self._sample_process(pid, proc, slow)
            except _GONE:
                if pid != self.root_pid:
                    self._procs.pop(pid, None)
                continue
            resources.append(row)
            os_threads.extend(threads)
        try:
            vm = self._host.virtual_memory()
            net = self._host.net_io_counters()
            self._rows["system"].append(
                (
                    now,
                    self._host_cpu_percent(),
                    int(vm.available),
                    int(net.bytes_sent) if net is not None else 0,
                    int(net.bytes_recv) if net is not None else 0,
                    float(self._own_cpu()) if self._own_cpu is not None else float("nan"),
                )
            )
        except (OSError, RuntimeError):
            pass

    def _host_cpu_percent(self) -> float:
        """The host's CPUs' busy share since the last reading (%, as psutil counts it:
        all but idle and iowait, guests inside user), NaN where the kernel's counters
        (in 10-ms ticks) did not move. ``psutil.cpu_percent`` reads 0.0 there: the first
        reading, taken just after its baseline, read an idle host beside three CPU-bound
        processes, and the stages sampled before the next reading ran "beside idle
        cores" (render_queue: its worker's waits for a core read as its queue's)."""
        try:
            times = self._host.cpu_times()
        except (OSError, RuntimeError):
            return float("nan")
        last, self._host_times = self._host_times, times
        if last is None:
            return float("nan")
        guests = ("guest", "guest_nice")
        total = sum(getattr(times, f) - getattr(last, f) for f in times._fields if f not in guests)
        idle = sum(
            getattr(times, f) - getattr(last, f) for f in ("idle", "iowait") if f in times._fields
        )
        if total <= 0:
            return float("nan")
        return round(100.0 * min(max(total - idle, 0.0) / total, 1.0), 1)

    def _sample_process(
        self, pid: int, proc: Any, slow: bool
    ) -> tuple[tuple[Any, ...], list[tuple[Any, ...]]]:
        nan = float("nan")
        with proc.oneshot():
            cpu = proc.cpu_times()
            mem = proc.memory_info()
            # Stamped once read, not when the tick began: a reading then never carries a
            # time before the state it shows. Stamped at the tick's start, the sidecar's
            # reading of leaky_cache.py's teardown (its cache freed, RSS down 40 MB) bore
            # a time inside the run's last request, so the leak read as memory let go at
            # the end, "undetermined" (a CI run, 2026-12-06: the sidecar held back between
            # its clock and its reads on a busy host).
            now = self._clock()
            try:
                io = proc.io_counters()
                read_b, write_b = float(io.read_bytes), float(io.write_bytes)
            except (AttributeError, psutil.AccessDenied):
                read_b = write_b = nan
            ctx = proc.num_ctx_switches()
            n_threads = proc.num_threads()
            threads = [(now, pid, t.id, t.user_time, t.system_time) for t in proc.threads()]
            ppid = proc.ppid()
        uss = fds = files = socks = nan
        if slow:
            try:
                uss = float(proc.memory_full_info().uss)
            except (AttributeError, psutil.AccessDenied):
                pass
            try:
                fds = float(proc.num_fds())
                files = float(len(proc.open_files()))
            except (AttributeError, psutil.AccessDenied):
                pass
            n_socks = self._sockets(pid)
            socks = float(n_socks) if n_socks is not None else nan
        if pid == self.root_pid and mem.rss > self.peak_rss:
            self.peak_rss = mem.rss
        row = (
            now,
            pid,
            ppid,
            pid == self.root_pid,
            cpu.user,
            cpu.system,
            int(mem.rss),
            uss,
            read_b,
            write_b,
            int(ctx.voluntary),
            int(ctx.involuntary),
            int(n_threads),
            fds,
            files,
            socks,
            # Linux's psutil has them; elsewhere the column stays NaN
            float(getattr(cpu, "children_user", nan) + getattr(cpu, "children_system", nan)),
        )
        return row, threads

    def drain(self) -> dict[str, list[tuple[Any, ...]]]:
        out = self._rows
        self._rows = {name: [] for name in out}
        return out
