"""The run directory's tables: names, columns and the schema version.

A run directory holds ``meta.json`` and one table per kind of record. While the target
runs, each table is a ``<table>.jsonl`` journal appended and flushed at least once a
second: one line per batch, ``[prefix, rows]``, where every row (a JSON array) is
``prefix + row`` in the column order given here. One ``json`` call encodes a whole batch
(spans go as the recorder's own tuples, their thread id in the prefix): a fraction of
the cost of encoding row by row (``benchmarks/span_cost.py``). A killed process can tear
only the last batch. When the run
ends each table is compacted to ``<table>.parquet``; readers accept either (Parquet
first).

Times are ``time.perf_counter_ns()`` values of the profiled process (CLOCK_MONOTONIC on
Linux); ``meta.json`` gives ``clock.perf_ns``/``clock.unix_ns`` read together at start, so
any timestamp converts to wall-clock time.

Bump ``SCHEMA_VERSION`` when a column changes meaning or disappears; adding a table or a
trailing column is compatible and keeps the version.
"""

from __future__ import annotations

__all__ = [
    "BLOCKING_REASONS",
    "COLUMNS",
    "FULL_GENERATION",
    "RUNNABLE_REASONS",
    "SCHEMA_NAME",
    "SCHEMA_VERSION",
    "SPAN_RANGE_PREFIX",
    "TABLES",
    "WAIT_REASONS",
]

SCHEMA_NAME = "probe.run"
SCHEMA_VERSION = 1

# A torch.profiler window's name for a span of probe's (``probe.samplers.torch_windows.
# SpanRanges``): "probe: preprocess". torch's fast range records it as a CPU op, so the
# run's reader moves the events so named to the window's ranges, the prefix taken off.
SPAN_RANGE_PREFIX = "probe: "

# The frames of an ``nn.Module`` call, in ``frames.filename`` and the function's bare name
# (``frames.function`` holds it qualified: "Module._call_impl"): torch 2.x's __call__ runs
# _wrapped_call_impl, then _call_impl. The torch windows open once a thread is seen inside
# one (``probe.samplers.torch_windows``), and a model counts as one stage from the
# outermost one down (``analyzers.stacks``). Not any frame of that file: the module's own
# import runs its top level, and a window opened during the import of torch caught a
# script that never called a module (0.2 MB of import ops).
MODULE_CALL_FILE = "torch/nn/modules/module.py"
MODULE_CALLS = frozenset({"_call_impl", "_wrapped_call_impl", "__call__"})

# The values of ``samples.wait_reason`` besides "" (the thread ran the whole interval).
# Blocking: the thread was blocked in a call of that kind at the sample's instant (the
# stack sampler reads it from the leaf frame, ``probe.samplers.waits``). Runnable: it
# could run but did not get the CPU -- another of our threads held the GIL (``gil``), or
# the OS gave the core to someone else (``unknown``).
BLOCKING_REASONS = ("network", "disk", "sleep", "lock", "subprocess", "gpu_sync")
RUNNABLE_REASONS = ("gil", "unknown")
WAIT_REASONS = BLOCKING_REASONS + RUNNABLE_REASONS

# table name -> ordered (column, pandas/arrow dtype) pairs
COLUMNS: dict[str, list[tuple[str, str]]] = {
    # One row per finished span. attrs is JSON text
    # (a JSON object in the journal).
    "spans": [
        ("thread_id", "int64"),
        ("span_id", "int64"),
        ("parent_id", "Int64"),
        ("name", "string"),
        ("category", "string"),
        ("start_ns", "int64"),
        ("end_ns", "int64"),
        ("request_id", "string"),
        ("attrs", "string"),
    ],
    # Threads seen by the span recorder or the stack sampler, in every process recorded.
    # thread_id, in every table, is the OS thread id (Linux TID): Python's thread idents
    # are reused as soon as a thread ends, TIDs only after the pid space wraps (and are
    # unique across the processes alive at once). ident is Python's.
    "threads": [
        ("thread_id", "int64"),
        ("ident", "Int64"),
        ("name", "string"),
        ("first_seen_ns", "int64"),
        # The process the thread belongs to: not written, filled in by the reader from
        # meta.json's pid (the run's own) or the worker's shard (probe.rundir.shards).
        ("pid", "Int64"),
    ],
    # One row per sampled interval of one thread: the interval ends at ts_ns (the instant
    # the stack was taken) and lasted wall_ns, of which the thread used cpu_ns of CPU
    # (exact). wait_reason is the thread's state at that instant: a blocking call
    # (network, disk, sleep, lock, subprocess, gpu_sync: the interval's CPU was spent
    # elsewhere, before it blocked), or, running Python, "" / gil / unknown for how the
    # interval's off-CPU part went (``WAIT_REASONS`` above). Consecutive idle intervals in
    # the same stack are merged; ``samples`` counts the ticks a row stands for.
    "samples": [
        ("ts_ns", "int64"),
        ("thread_id", "int64"),
        ("stack_id", "int64"),
        ("wall_ns", "int64"),
        ("cpu_ns", "int64"),
        ("wait_reason", "string"),
        ("samples", "int64"),
        # The thread's state in the kernel at that instant, where it was read: R, D,
        # "sys <call>[ <socket|pipe|file|other>]" (``probe.samplers.kernel``); "" where
        # the frame and CPU clock left no doubt, or /proc could not be read.
        ("kernel_state", "string"),
        # Of the interval's time off the CPU, what the thread spent runnable on a run
        # queue, waiting for a CPU (ns; /proc/self/task/TID/schedstat, credited when it
        # got the CPU back): time no wait reason accounts for, whatever the stack's leaf
        # is. 0 where it was not read (the thread did not run), null in runs of a probe
        # that did not record it.
        ("queued_ns", "Int64"),
    ],
    # Interned stacks: frame ids root first, and the line the leaf frame was on.
    "stacks": [
        ("stack_id", "int64"),
        ("frame_ids", "string"),
        ("leaf_line", "int64"),
        ("leaf_call", "string"),
    ],
    "frames": [
        ("frame_id", "int64"),
        ("function", "string"),
        ("filename", "string"),
        ("first_line", "int64"),
    ],
    # Process tree, one row per process per tick. Counters are cumulative (as the kernel
    # gives them); uss, fds-derived counts and open files come at a lower rate (NaN else).
    "resources": [
        ("ts_ns", "int64"),
        ("pid", "int64"),
        ("ppid", "int64"),
        ("is_root", "bool"),
        ("cpu_user_s", "float64"),
        ("cpu_system_s", "float64"),
        ("rss_bytes", "int64"),
        ("uss_bytes", "float64"),
        ("read_bytes", "float64"),
        ("write_bytes", "float64"),
        ("ctx_voluntary", "int64"),
        ("ctx_involuntary", "int64"),
        ("num_threads", "int64"),
        ("num_fds", "float64"),
        ("open_files", "float64"),
        ("sockets", "float64"),
        # CPU seconds (user and system) of the process's children it has waited for, and
        # theirs (the kernel's cutime + cstime): a child that lived between two readings
        # (a subprocess per call) is never read itself; NaN in runs before 2026-12-07
        ("children_cpu_s", "float64"),
    ],
    # Per OS thread CPU of every process in the tree (native threads included).
    "os_threads": [
        ("ts_ns", "int64"),
        ("pid", "int64"),
        ("tid", "int64"),
        ("cpu_user_s", "float64"),
        ("cpu_system_s", "float64"),
    ],
    # Whole machine: CPU % since the previous row, memory available, network bytes; and
    # probe's helper process's own cumulative CPU seconds (NaN when sampling in-process,
    # or in runs written before it was recorded): part of the host's busy CPU that is not
    # another process's.
    "system": [
        ("ts_ns", "int64"),
        ("cpu_percent", "float64"),
        ("mem_available_bytes", "int64"),
        ("net_sent_bytes", "int64"),
        ("net_recv_bytes", "int64"),
        ("probe_cpu_s", "float64"),
    ],
    "gpu": [
        ("ts_ns", "int64"),
        ("gpu", "int64"),
        ("util_percent", "float64"),
        ("mem_bw_util_percent", "float64"),
        ("mem_used_bytes", "float64"),
        ("mem_total_bytes", "float64"),
        ("power_w", "float64"),
        ("sm_clock_mhz", "float64"),
        ("pcie_rx_kbps", "float64"),
        ("pcie_tx_kbps", "float64"),
    ],
    "gpu_processes": [
        ("ts_ns", "int64"),
        ("gpu", "int64"),
        ("pid", "int64"),
        ("mem_used_bytes", "float64"),
    ],
    # tracemalloc snapshots (--memory): top sites by size, plus one "<other>" row holding
    # the rest so that per-snapshot totals stay exact.
    "memory_sites": [
        ("ts_ns", "int64"),
        ("snapshot", "int64"),
        ("site", "string"),
        ("traceback", "string"),
        ("size_bytes", "int64"),
        ("count", "int64"),
    ],
    # What suspended asyncio tasks await (``probe.samplers.tasks``): per event-loop
    # thread (thread_id), stack (the await chain, outermost coroutine first) and reason
    # (network, sleep, subprocess; tasks: on other tasks of the loop; thread: on an
    # executor; unknown) at each tick; tasks: how many tasks the row stands for (scaled
    # from the chains walked), wall_ns: the tick's interval; main_task: the row is the
    # task the loop's run_until_complete waits for (asyncio.run's; false in runs before
    # 2026-12-04, which lack it).
    "task_samples": [
        ("ts_ns", "int64"),
        ("thread_id", "int64"),
        ("stack_id", "int64"),
        ("wait_reason", "string"),
        ("tasks", "float64"),
        ("wall_ns", "int64"),
        ("main_task", "bool"),
    ],
    # The TCP connections suspended asyncio tasks wait to read from, at each task tick
    # (``probe.samplers.tasks``): the loop's thread, the stack of a task awaiting it, the
    # connection ("local>peer" addresses), and the kernel's counts on it so far (its
    # TCP_INFO): data segments sent and received, bytes sent (acknowledged by the peer)
    # and received. Since 2026-12-05; a run without it has no such evidence.
    "awaited_sockets": [
        ("ts_ns", "int64"),
        ("thread_id", "int64"),
        ("stack_id", "int64"),
        ("connection", "string"),
        ("segments_out", "int64"),
        ("segments_in", "int64"),
        ("bytes_out", "int64"),
        ("bytes_in", "int64"),
    ],
    # Each event loop's ready queue at every stack tick (``probe.samplers.tasks``): the
    # callbacks ready to run (a task whose await completed, an I/O callback) waiting for
    # the loop's thread, and whether a task was running on it at that instant.
    "loop_samples": [
        ("ts_ns", "int64"),
        ("thread_id", "int64"),
        ("ready", "int64"),
        ("running", "bool"),
    ],
    # The Python heap (every run, ``probe.samplers.heap``): pymalloc's allocated blocks
    # (every small object alive) 10 times a second, and beside them the bytes glibc's
    # malloc has handed out and not got back (null without glibc's mallinfo2).
    "heap": [
        ("ts_ns", "int64"),
        ("allocated_blocks", "int64"),
        ("malloc_in_use_bytes", "Int64"),
    ],
    "gc_types": [
        ("ts_ns", "int64"),
        ("snapshot", "int64"),
        ("type", "string"),
        ("count", "int64"),
    ],
    # The cyclic collector's pauses (every run, ``probe.samplers.gc_pauses``): the young
    # generations' (0, 1) collections added up between two collector ticks, each full
    # collection (generation 2) a row of its own with the thread that made it and the
    # live heap it walked (heap_blocks: pymalloc's blocks at its start), both null on
    # the young rows. ts_ns: the end of the last collection the row counts; pause_ns:
    # their time in all, longest_ns: the longest one's. A collection pauses its own
    # process only: pid, as in threads, is filled in by the reader (the run's own, or the
    # worker's shard). Runs before 2026-12-05 lack the table, before 2026-12-06 the
    # heap_blocks column.
    "gc_pauses": [
        ("ts_ns", "int64"),
        ("generation", "int64"),
        ("collections", "int64"),
        ("pause_ns", "int64"),
        ("longest_ns", "int64"),
        ("thread_id", "Int64"),
        ("heap_blocks", "Int64"),
        ("pid", "Int64"),
    ],
}

TABLES = tuple(COLUMNS)

# gc_pauses' generation of a full collection: CPython's oldest, whose collections walk
# every container the process holds (rows of it are one collection each)
FULL_GENERATION = 2
