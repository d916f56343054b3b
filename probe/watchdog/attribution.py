"""Where the memory goes, from inside the watched Python process.

tracemalloc costs 5-18x on allocation-heavy code (see ``probe.samplers.memory``): too much
to leave on in staging. So attribution is *armed on suspicion*: the watchdog starts
tracemalloc when the detector first sees a significant rise to a new high, and from then
on tracemalloc sees only allocations made after arming. What is still alive of them a
few snapshots later is, by construction, what the service allocated and kept: for a
leak, the leak. ``--attribution always`` arms from the start instead (for a short
staging run where the overhead is fine), ``off`` never.

Each snapshot keeps, per allocation site (the innermost frame, with its traceback): the
live bytes and blocks; per type: the gc count; and the large containers (dicts, lists,
sets, deques of at least ``container_min`` items) with the module global that names them,
so a growing cache is named by what holds it, not only by the line that allocated its
entries. ``analyzers.leaks.snapshot_growth`` turns the snapshots into growth figures.

Tracing is bounded: the tracker stops it itself once tracemalloc's own tables pass
``max_bookkeeping_bytes`` (``TRACING_BOUND_BYTES``), and the watch stops it once the sites
have gone out (``probe.watchdog.monitor``). Left on, it cost a served store of two million
live blocks 3.5-4.5 GB and 44% of a core after 30 min (``benchmarks/attribution_cost.py``
measures what it costs now).

Two ways to run it: in the watched process's own thread (``probe.watchdog.start``), or as
an agent in a child launched by ``probe watch -- python ...`` (``Agent``: it is armed
through a file in a private directory and writes its snapshots there as JSON).
"""

from __future__ import annotations

import atexit
import gc
import json
import os
import sys
import threading
import time
import tracemalloc
from collections import Counter, deque
from collections.abc import Callable
from pathlib import Path
from types import (
    BuiltinFunctionType,
    ClassMethodDescriptorType,
    FunctionType,
    GetSetDescriptorType,
    MemberDescriptorType,
    MethodDescriptorType,
    MethodType,
    MethodWrapperType,
    ModuleType,
    WrapperDescriptorType,
)
from typing import Any, cast

from probe.atomicfile import write_atomic
from probe.osthreads import begin_probes_thread
from probe.samplers.heap import full_collection_witness, malloc_in_use_reader, type_name
from probe.samplers.ticker import CostBudget
from probe.watchdog.formats import AttributionSnapshot, TracingState
from probe.watchdog.work import RequestCounter, SharedCount, count_served_requests, read_count

__all__ = ["Agent", "AgentLink", "SiteTracker"]

# what holds no container worth naming: never queued by the walk (``held_containers``)
_NOT_HOLDERS = (
    str, bytes, bytearray, int, float, complex, bool, type(None), tuple, frozenset, range,
    ModuleType, FunctionType, BuiltinFunctionType, MethodType, MethodDescriptorType,
    WrapperDescriptorType, MethodWrapperType, ClassMethodDescriptorType,
    GetSetDescriptorType, MemberDescriptorType, property, staticmethod, classmethod,
)  # fmt: skip
_PROBE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_CONTAINERS = (dict, list, set, deque)
# probe's own allocations, tracemalloc's, and imports' (code objects, module dicts)
_NOT_THE_SERVICE = (_PROBE_DIR, tracemalloc.__file__, "<frozen importlib.")
# Chosen: tracemalloc's tables cost ~56 bytes a live trace and a snapshot's copy ~80 more
# for its duration (measured on this machine kind, 2026-12-03: 37 MiB of tables for
# 700,000 traces, 0.37 s to copy and group them); 64 MiB is ~1.2 million traces, ~0.7 s and
# ~100 MB for a snapshot -- enough for a leak's sites to outgrow the rest many times over.
TRACING_BOUND_BYTES = 64 * 2**20


def held_containers(
    min_items: int, *, depth: int = 3, budget: int = 200_000
) -> dict[str, list[Any]]:
    """The large containers the service holds, named by the path that reaches them from a
    module: ``svc._CACHE``, ``app.Service.memo``, ``svc.app.state._state[cache]``, and
    ``lru_cache`` wrappers by their size. A walk from the modules' globals through
    attributes and small dicts, ``depth`` steps at most, ``budget`` objects at most.

    Why a walk and not ``gc.get_objects()``: the list that returns holds a reference to
    every tracked object, among them a tuple another thread is still building with
    ``tuple(generator)``; once that thread runs again its resize sees two references and
    raises SystemError into the service (measured: 17 in 3 s of censuses beside a thread
    building tuples). What a walk from the modules reaches is already shared; a tuple under
    construction is referenced by nothing but the C stack, and the walk never sees it.
    Cost on this machine kind: 0.03 s with numpy imported, 0.24 s with torch, numpy and
    pandas (1,491 modules), ~8x that under tracemalloc (it traces the walk's own
    allocations)."""
    found: dict[str, list[Any]] = {}
    seen: set[int] = set()
    todo: deque[tuple[str, Any, int]] = deque()
    for mod_name, module in list(sys.modules.items()):
        seen.add(id(module))
        todo.extend((f"{mod_name}.{k}", v, 0) for k, v in _holders(_attributes(module)))
    while todo and len(seen) < budget:
        path, value, level = todo.popleft()
        if id(value) in seen:
            continue
        seen.add(id(value))
        try:
            _visit(path, value, level < depth, min_items, found, todo, level)
        except Exception:  # noqa: BLE001, S112 -- a proxy, a property that raises: skip it
            continue
    return found


def _holders(items: list[tuple[str, Any]]) -> list[tuple[str, Any]]:
    """The items whose values may hold a container. type(), never isinstance(): that
    reads ``__class__``, a property on some objects (a deprecation warning, a proxy)."""
    return [(k, v) for k, v in items if not issubclass(type(v), _NOT_HOLDERS)]


def _attributes(obj: Any) -> list[tuple[str, Any]]:
    """An object's own attributes, copied in one C call (another thread may be changing
    them); none for objects without a ``__dict__``."""
    try:
        d = object.__getattribute__(obj, "__dict__")
    except AttributeError:
        return []
    if not issubclass(type(d), dict):  # a class's mappingproxy
        d = dict(d)
    return [(k, v) for k, v in list(d.items()) if isinstance(k, str) and not k.startswith("__")]


def _visit(
    path: str,
    value: Any,
    deeper: bool,
    min_items: int,
    found: dict[str, list[Any]],
    todo: deque[tuple[str, Any, int]],
    level: int,
) -> None:
    kind = type(value)
    if issubclass(kind, _CONTAINERS):
        n = len(value)
        if n >= min_items:
            found[path] = [type_name(kind), n]
        elif deeper and issubclass(kind, dict):
            items = [(k, v) for k, v in list(value.items()) if isinstance(k, str)]
            todo.extend((f"{path}[{k}]", v, level + 1) for k, v in _holders(items))
        return
    if hasattr(kind, "cache_info") and hasattr(kind, "cache_clear"):
        size = value.cache_info().currsize  # a functools.lru_cache wrapper
        if size >= min_items:
            found[path] = ["lru_cache", size]
        return
    if deeper:  # into classes and instances (a cache on ``self``)
        todo.extend((f"{path}.{k}", v, level + 1) for k, v in _holders(_attributes(value)))


Frames = tuple[tuple[str, int], ...]  # (filename, line), newest first
# what ``tracemalloc.take_snapshot`` reads: [(domain, size, frames newest first, depth)]
_TRACES_READER: Callable[[], list[tuple[int, int, Frames, int]]] | None = getattr(
    tracemalloc, "_get_traces", None
)


def live_by_traceback() -> list[tuple[Frames, int, int]]:
    """(frames, live bytes, live blocks) of each traceback tracemalloc traces now,
    largest first. Grouped here, not by ``Snapshot.statistics``: under tracing every
    allocation the grouping makes is itself traced, and the stdlib's makes several a
    trace (a snapshot of 700,000 traces: 5.9 s, against 0.37 s this way, copy included:
    this loop allocates a list per traceback and nothing per trace). tracemalloc shares
    one frames tuple between the traces of a traceback; ``_get_traces`` is what
    ``take_snapshot`` reads, used directly where it exists."""
    get_traces = _TRACES_READER
    if get_traces is None:  # another Python's tracemalloc: the stdlib's grouping
        stats = tracemalloc.take_snapshot().statistics("traceback")
        return [(_frames_of(st.traceback), st.size, st.count) for st in stats]
    sizes: dict[Frames, list[int]] = {}
    for trace in get_traces():  # (domain, size, frames newest first, total frames)
        try:
            sizes[trace[2]].append(trace[1])
        except KeyError:
            sizes[trace[2]] = [trace[1]]
    grouped = [(frames, sum(s), len(s)) for frames, s in sizes.items()]
    grouped.sort(key=lambda g: g[1], reverse=True)
    return grouped


def _frames_of(traceback: tracemalloc.Traceback) -> Frames:
    return tuple((f.filename, f.lineno) for f in reversed(traceback))


def _give_back_freed_memory() -> None:
    """Return the pages tracing freed to the system. glibc keeps freed heap for reuse, so
    the tables and the snapshot's copy (measured on the leaky sample at 10 s: 69 MB) would
    stay resident and the service would refill them with its RSS flat -- a leak hidden for
    as long as the refill takes. ``malloc_trim(0)`` releases the free pages of every arena
    (that run: RSS 204 -> 135 MB). pymalloc's partly used arenas are out of its reach."""
    try:
        import ctypes

        trim = ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError):
        return  # not glibc
    trim(0)


class MallocInUse:
    """The bytes glibc's malloc holds (``probe.samplers.heap.malloc_in_use_reader``), read
    on a cost budget of its own: the call walks every arena's free lists under their
    locks (milliseconds with many threads' arenas fragmented). None at a reading the
    budget skips, and always without ``mallinfo2``."""

    def __init__(
        self,
        reader: Callable[[], int] | None = None,
        *,
        share: float = 0.005,
        clock: Callable[[], int] = time.perf_counter_ns,
    ) -> None:
        self.reader = reader if reader is not None else malloc_in_use_reader()
        self._budget = CostBudget(share)
        self._clock = clock

    def read(self) -> int | None:
        if self.reader is None:
            return None
        now = self._clock()
        return self._budget.spend(now, self.reader) if self._budget.due(now) else None


def full_collection_now(clock: Callable[[], float], in_use: MallocInUse) -> dict[str, Any] | None:
    """What a full collection frees now (``full_collection_witness``, ``at`` on ``clock``):
    the leak verdict's witness of garbage in reference cycles, taken when the watch ends."""
    return full_collection_witness(sys.getallocatedblocks, in_use.reader, clock=clock)


class SiteTracker:
    """tracemalloc and gc snapshots of this process, kept in bounded memory."""

    def __init__(
        self,
        *,
        frames: int = 8,
        top_sites: int = 50,
        top_types: int = 30,
        container_min: int = 1000,
        keep: int = 12,
        snapshot_s: float = 150.0,
        clock: Callable[[], float] = time.monotonic,
        on_stopping: Callable[[], None] | None = None,
        work: RequestCounter | None = None,
        max_bookkeeping_bytes: int = TRACING_BOUND_BYTES,
    ) -> None:
        self._snapshot_s = snapshot_s
        self._max_bookkeeping = max_bookkeeping_bytes
        self.stopped_because: str | None = None  # why tracing stopped before it was told to
        self.work = work  # in-process: the requests the service finishes (the work axis)
        self._on_stopping = on_stopping  # told before the last snapshot of a disarm
        self._next_snapshot = 0.0
        self._frames = frames
        self._top_sites = top_sites
        self._top_types = top_types
        self._container_min = container_min
        self._clock = clock
        self._started_tracing = False
        self.armed_at: float | None = None
        # the first snapshot after arming is the baseline, the rest a ring of the latest
        self._first: AttributionSnapshot | None = None
        self._latest: deque[AttributionSnapshot] = deque(maxlen=keep)
        self._stopping_at: float | None = None
        self._stopped_at: float | None = None
        self.own_threads: set[int] = set()  # probe's threads: they build no tuples
        self._in_use = MallocInUse()

    @property
    def armed(self) -> bool:
        return self.armed_at is not None

    def arm(self) -> None:
        """Start tracing with a fresh baseline (the last arming's snapshots are dropped)."""
        if self.armed:
            return
        if not tracemalloc.is_tracing():
            tracemalloc.start(self._frames)
            self._started_tracing = True
        self.armed_at = self._clock()
        self.stopped_because = None
        self._first = None
        self._latest.clear()
        self._next_snapshot = 0.0

    def poll(self) -> None:
        """Snapshot when one is due (every ``snapshot_s`` once armed); stop tracing once
        its tables pass their bound."""
        if self.stop_when_over_bound():
            return
        if self.armed and self._clock() >= self._next_snapshot:
            self.request_snapshot()

    def stop_when_over_bound(self) -> bool:
        """Disarm (a last snapshot, then tracing off) when tracemalloc's own tables, which
        grow with every live allocation made since arming, pass ``max_bookkeeping_bytes``;
        says why in ``stopped_because``. True when it stopped."""
        if not self.armed or not tracemalloc.is_tracing():
            return False
        tables = tracemalloc.get_tracemalloc_memory()  # sizes kept by the tables: O(1)
        if tables <= self._max_bookkeeping:
            return False
        self.stopped_because = (
            f"tracemalloc's own tables reached {tables / 2**20:,.0f} MiB "
            f"(its bound: {self._max_bookkeeping / 2**20:,.0f} MiB)"
        )
        self.disarm()
        return True

    def request_snapshot(self) -> None:
        self.snapshot()
        self._next_snapshot = self._clock() + self._snapshot_s

    def disarm(self) -> None:
        """A last snapshot, then stop tracing (if this tracker started it); the snapshots
        stay readable until the next arming. The snapshot copies every trace (seconds and
        tens of MB on a large heap), and stopping frees tracemalloc's tables into the
        allocator, which the service then refills without its RSS rising: both times are
        kept (``tracing_state``) so the watcher can leave that stretch out."""
        if not self.armed:
            return
        self._stopping_at = self._clock()
        if self._on_stopping is not None:
            self._on_stopping()
        self.snapshot()
        if self._started_tracing and tracemalloc.is_tracing():
            tracemalloc.stop()
            _give_back_freed_memory()
        self._stopped_at = self._clock()
        self._started_tracing = False
        self.armed_at = None

    def snapshot(self) -> AttributionSnapshot | None:
        """Sites and held containers, from any thread (no gc type counts: see
        ``held_containers``)."""
        if not self.armed or not tracemalloc.is_tracing():
            return None
        return self._keep(self._sites(), {})

    def census(self) -> AttributionSnapshot:
        """What an unarmed tracker can say of what grew: the held containers, and the gc's
        type counts when the calling thread is the only one running Python code (at a
        service's start; at its exit, unless daemon threads still run)."""
        mine = {threading.get_ident(), *self.own_threads}
        alone = all(t.ident in mine for t in threading.enumerate())
        return self._keep({}, self._type_counts() if alone else {})

    def _keep(self, sites: dict[str, list[Any]], types: dict[str, int]) -> AttributionSnapshot:
        snap: AttributionSnapshot = {
            "t_s": self._clock(),
            "sites": sites,
            "types": types,
            "containers": held_containers(self._container_min),
        }
        if self._first is None:
            self._first = snap
        else:
            self._latest.append(snap)
        return snap

    def snapshots(self) -> list[AttributionSnapshot]:
        return ([self._first] if self._first else []) + list(self._latest)

    def tracing_state(self) -> TracingState:
        tracing = self.armed and tracemalloc.is_tracing()
        return {
            "bookkeeping_bytes": tracemalloc.get_tracemalloc_memory() if tracing else 0,
            "stopping_at": self._stopping_at,
            "stopped_at": self._stopped_at,
            "stopped_because": self.stopped_because,
        }

    def exiting_at(self) -> float | None:
        return None  # in-process: the watchdog stops with the service

    def requests_done(self) -> int | None:
        # in-process: the watchdog's own request counter, while it is the span recorder
        return self.work.done() if self.work is not None else None

    def python_blocks(self) -> int | None:
        return sys.getallocatedblocks()

    def malloc_in_use(self) -> int | None:
        return self._in_use.read()

    def full_collection(self) -> dict[str, Any] | None:
        """In-process, at the watchdog's stop: the service's globals are still held."""
        return full_collection_now(self._clock, self._in_use)

    def _sites(self) -> dict[str, list[Any]]:
        # filtered here, on the grouped tracebacks: Snapshot.filter_traces is pure Python
        # per trace (1-6 s on 140k traces)
        sites: dict[str, list[Any]] = {}
        for newest_first, size, count in live_by_traceback()[: self._top_sites * 4]:
            if not newest_first or newest_first[0][0].startswith(_NOT_THE_SERVICE):
                continue
            if any(name == __file__ for name, _ in newest_first):
                continue  # the agent's own thread (pathlib, json): not the service's
            frames = [f for f in newest_first if not f[0].startswith(_PROBE_DIR)]
            if not frames:
                continue
            site = f"{frames[0][0]}:{frames[0][1]}"
            entry = sites.setdefault(site, [0, 0, ""])
            entry[0] += size
            entry[1] += count
            if not entry[2]:  # the traceback of the site's largest group, newest frame first
                entry[2] = " <- ".join(f"{name}:{line}" for name, line in frames)
        ranked = sorted(sites.items(), key=lambda kv: kv[1][0], reverse=True)
        return dict(ranked[: self._top_sites])

    def _type_counts(self) -> dict[str, int]:
        """gc object counts by type: only where no other thread can run Python code (see
        ``held_containers`` for what ``gc.get_objects()`` does to one that does)."""
        counts = Counter(map(type, gc.get_objects()))  # C-level: no Python loop
        return {type_name(t): n for t, n in counts.most_common(self._top_types)}


class Agent:
    """Runs a ``SiteTracker`` in a child process, driven through files in ``directory``.

    The watcher arms it by writing ``arm`` (holding a generation number) and disarms it by
    removing the file; ``snap`` asks for a snapshot now. After each snapshot the agent
    writes ``sites.json`` (with the generation, so the watcher never mistakes an old
    arming's sites for the current one's), and once more when the process exits. It also
    counts the process's finished requests into ``requests`` (``probe.watchdog.work``)."""

    def __init__(self, directory: Path, *, snapshot_s: float, frames: int = 8) -> None:
        self.directory = directory
        self._snapshot_s = snapshot_s
        self._tracker = SiteTracker(
            frames=frames, on_stopping=self._write_tracing, snapshot_s=snapshot_s
        )
        self._generation = "0"  # never armed: the census's generation, as the link's
        self._next_snapshot = 0.0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="probe-watch-agent", daemon=True)
        self._counter: RequestCounter | None = None
        self._heap: SharedCount | None = None
        self._in_use = MallocInUse()
        self._in_use_gauge: SharedCount | None = None

    def start(self) -> None:
        try:
            self._counter = RequestCounter(self.directory / "requests")
            if not self._counter.start():
                self._counter = None
        except OSError:
            self._counter = None  # no work axis: the watcher judges against time
        if self._counter is not None:
            count_served_requests()
        try:
            self._heap = SharedCount(self.directory / "blocks")
            self._heap.set(sys.getallocatedblocks())
        except OSError:
            self._heap = None
        if self._in_use.reader is not None:
            try:
                self._in_use_gauge = SharedCount(self.directory / "malloc_in_use")
            except OSError:
                self._in_use_gauge = None
        self._follow_arm_file()  # armed from the first line of the service, if asked
        if not self._tracker.armed:
            self._tracker.census()  # the baseline a short life's growth is named against
        self._thread.start()
        if self._thread.ident is not None:
            self._tracker.own_threads.add(self._thread.ident)
        atexit.register(self._at_exit)

    def _follow_arm_file(self) -> None:
        try:
            generation = (self.directory / "arm").read_text().strip()
        except OSError:
            generation = ""
        if generation and generation != self._generation:
            self._tracker.disarm()
            self._generation = generation
            self._tracker.arm()
            self._next_snapshot = 0.0
        elif not generation and self._tracker.armed:
            self._tracker.disarm()  # its last snapshot stays readable
            self._write()
            self._write_tracing()

    def _loop(self) -> None:
        begin_probes_thread()
        errors = 0
        while not self._stop.wait(0.2):
            try:
                with self._lock:
                    self._step()
            except Exception as e:  # noqa: BLE001 -- the service must never see the agent fail
                errors += 1
                try:
                    (self.directory / "agent.error").write_text(repr(e))
                except OSError:
                    pass
                if errors >= 5:
                    return

    def _step(self) -> None:
        if self._counter is not None and not self._counter.in_place:
            self._counter.give_up()  # another span recorder took its place
            self._counter = None
        if self._heap is not None:
            self._heap.set(sys.getallocatedblocks())  # ~1 ms on a 1-GB heap of small objects
        if self._in_use_gauge is not None:
            in_use = self._in_use.read()
            if in_use is not None:  # a reading its budget skipped leaves the last one set
                self._in_use_gauge.set(in_use)
        self._follow_arm_file()
        if self._tracker.stop_when_over_bound():
            self._write()  # its last snapshot, and why it stopped
            self._write_tracing()
        if self._tracker.armed:
            self._write_tracing()  # tracemalloc's own memory, for the watcher to take out
        asked = (self.directory / "snap").exists()
        if self._tracker.armed and (time.monotonic() >= self._next_snapshot or asked):
            (self.directory / "snap").unlink(missing_ok=True)
            self._tracker.snapshot()
            self._write()
            self._next_snapshot = time.monotonic() + self._snapshot_s

    def _at_exit(self) -> None:
        """The last snapshot: a command that ends before any judgement still gets its sites.
        First, when the interpreter began to exit (CLOCK_MONOTONIC, the same in every process
        of the host): the snapshot takes seconds on a large heap, with the memory standing
        still, and the watcher leaves that time out of the service's series. Then what a
        full collection frees (``full_collection.json``), before the census: atexit runs
        before the interpreter drops its modules, so what a module global holds is still
        held, and garbage in cycles is not counted in the census."""
        self._stop.set()
        try:
            write_atomic(self.directory / "exiting", repr(time.monotonic()))
        except OSError:
            pass
        try:
            with self._lock:
                witness = full_collection_now(time.monotonic, self._in_use)
                if witness is not None:
                    write_atomic(self.directory / "full_collection.json", json.dumps(witness))
        except Exception:  # noqa: BLE001, S110 -- exiting: nothing to tell, no one to tell
            pass
        try:
            with self._lock:
                if self._tracker.armed:
                    self._tracker.snapshot()
                elif self._generation == "0":  # never armed: what grew since the start
                    self._tracker.census()
                self._write()
        except Exception:  # noqa: BLE001, S110 -- exiting: nothing to tell, no one to tell
            pass

    def _write_tracing(self) -> None:
        write_atomic(self.directory / "tracing.json", json.dumps(self._tracker.tracing_state()))

    def _write(self) -> None:
        data = {
            "pid": os.getpid(),
            "generation": self._generation,
            "snapshots": self._tracker.snapshots(),
        }
        write_atomic(self.directory / "sites.json", json.dumps(data))


class AgentLink:
    """The watcher's side of an ``Agent``: arm and disarm it, ask for a snapshot, read it."""

    def __init__(self, directory: Path, pid: int | None = None) -> None:
        self.directory = directory
        self.pid = pid  # the agent's process: once it is gone nothing answers a request
        self._generation = 0
        self._fds: dict[str, int] = {}

    @property
    def closed(self) -> bool:
        if self.pid is None:
            return False
        try:
            os.kill(self.pid, 0)
        except ProcessLookupError:
            return True
        except PermissionError:
            return False
        return False

    def poll(self) -> None:
        pass  # the agent snapshots on its own schedule

    def arm(self) -> None:
        self._generation += 1
        write_atomic(self.directory / "arm", str(self._generation))

    def disarm(self) -> None:
        """Stop tracing; the agent writes a last snapshot, readable until the next arming."""
        (self.directory / "arm").unlink(missing_ok=True)

    def request_snapshot(self, wait_s: float = 3.0) -> None:
        """Ask the agent for a snapshot now and wait (at most ``wait_s``) until it is
        written: an alert should carry the sites as they are when it goes out."""
        if self.closed:
            return
        asked_ns = time.time_ns()
        (self.directory / "snap").touch()
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline:
            try:
                if (self.directory / "sites.json").stat().st_mtime_ns >= asked_ns:
                    return
            except OSError:
                pass
            time.sleep(0.05)

    def tracing_state(self) -> TracingState | None:
        """The agent's last word on its tracing (written every 0.2 s while it traces)."""
        try:
            data = json.loads((self.directory / "tracing.json").read_text())
        except (OSError, ValueError):
            return None
        return cast(TracingState, data) if isinstance(data, dict) else None

    def exiting_at(self) -> float | None:
        """When the agent's process began to exit (``time.monotonic()``), once it has."""
        try:
            return float((self.directory / "exiting").read_text())
        except (OSError, ValueError):
            return None

    def requests_done(self) -> int | None:
        """The requests the process has finished, while they are counted."""
        return self._count("requests")

    def python_blocks(self) -> int | None:
        """The process's live Python heap (``sys.getallocatedblocks()``), as last set."""
        return self._count("blocks")

    def malloc_in_use(self) -> int | None:
        """The bytes the process's malloc holds, as last set (none without ``mallinfo2``)."""
        return self._count("malloc_in_use")

    def full_collection(self) -> dict[str, Any] | None:
        """What a full collection freed as the process exited (``at``: monotonic), once
        it has exited; None before, and where the process turned its collector off."""
        try:
            data = json.loads((self.directory / "full_collection.json").read_text())
        except (OSError, ValueError):
            return None
        return data if isinstance(data, dict) else None

    def _count(self, name: str) -> int | None:
        fd = self._fds.get(name)
        if fd is None:
            try:
                fd = self._fds[name] = os.open(self.directory / name, os.O_RDONLY)
            except OSError:
                return None  # not created yet, or none kept
        return read_count(fd)

    def close(self) -> None:
        for fd in self._fds.values():
            os.close(fd)
        self._fds.clear()

    def snapshots(self) -> list[AttributionSnapshot]:
        try:
            data = json.loads((self.directory / "sites.json").read_text())
        except (OSError, ValueError):
            return []
        if not isinstance(data, dict) or data.get("generation") != str(self._generation):
            return []  # an earlier arming's sites, or none yet
        snaps = data.get("snapshots")
        return snaps if isinstance(snaps, list) else []
