"""A run with nothing to judge, told so without the analysis stack.

A run that recorded no stack sample and no span (a script that ends within the first
tick of the sampler, a target that fails at its first line) has nothing for the
breakdown, the rules or the estimates to work on: ``diagnose`` gives it the primary
"none", no finding, no recommendation, and a leak verdict of too few readings. Its
diagnosis is then a function of meta.json and of a few counts, and this module writes
it from them in plain Python: ``probe run`` prints it without importing numpy, pandas
and pyarrow (~0.45 s of a 0.03-s run that the imports cannot overlap).

``nothing_to_judge(meta, rows, entries)`` -> the diagnosis.json document, the very one
``diagnose`` writes for the run (``tests/integration/test_nothing_to_judge.py`` holds the
two to equality on real runs), or None where the run is not certainly such a run: then
the full analysis judges it. It declines on anything the analysis would read beyond the
counts -- a sample, a span, GPU or memory-tracing rows, a second reading of the process
(its CPU share is read from two), a worker's shard, torch windows, the load's records,
any file it does not know, a torn journal (the loader would note it), a cgroup that
throttled the process, the request middleware's notes, torch windows meta.json lists.
"""

from __future__ import annotations

import math
from typing import Any

from probe.analyzers.leaks.verdict import too_few_readings

__all__ = ["NOTHING_TO_JUDGE", "SCHEMA", "nothing_to_judge"]

NOTHING_TO_JUDGE = "Nothing to judge: the run recorded no stack samples and no spans."

SCHEMA = "probe.diagnosis/1"  # diagnosis.json's (DESIGN.md), whichever path wrote it

# Tables the analysis reads only beside samples or spans (the threads' names and roles,
# the stacks they point into, the host's and the threads' CPU, Python's heap read beside
# the memory series, the collector's pauses, which make a finding only beside stages):
# any rows may stand in a run with nothing to judge. ``resources`` is read on its own,
# and is looked at below.
_READ_WITH_SAMPLES = frozenset(
    {"threads", "stacks", "frames", "system", "os_threads", "heap", "gc_pauses"}
)
_RESOURCES = "resources"


def nothing_to_judge(
    meta: dict[str, Any], rows: dict[str, list[list[Any]]], entries: list[str]
) -> dict[str, Any] | None:
    """The diagnosis of a finished run with nothing to judge, or None (module doc).
    ``rows``: each journal's rows, in its columns' order (``probe.rundir.schema``);
    ``entries``: the names in the run directory besides meta.json and the journals."""
    if entries or "end" not in meta or not isinstance(meta.get("exit"), dict):
        return None
    if any(table_rows for table, table_rows in rows.items()
           if table not in _READ_WITH_SAMPLES and table != _RESOURCES):  # fmt: skip
        return None
    readings = rows.get(_RESOURCES, [])
    if len({r[0] for r in readings}) > 1 or not _plain_collector(meta):
        return None
    leak = too_few_readings(_memory_readings(readings, meta)).to_dict()
    return {
        "schema": SCHEMA,
        "run": _run_block(meta),
        "primary": {
            "kind": "none",
            "subkind": "none",
            "stage": "",
            "share": 0.0,
            "confidence": 0.0,
            "summary": NOTHING_TO_JUDGE,
        },
        "findings": [],
        "recommendations": [],
        "minor_recommendations": [],
        "leak": leak,
        "stages": [],
        "notes": [str(n) for n in meta.get("notes") or []],
    }


def _plain_collector(meta: dict[str, Any]) -> bool:
    """No figure of meta.json's that would add a note or change a figure: a quota that
    throttled the process, the request middleware's servers, failures and notes, torch
    windows listed (their files, or a note that one is missing)."""
    throttling = meta.get("cpu_throttling") or {}
    if throttling.get("throttled_periods"):
        return False
    collector = meta.get("collector") or {}
    if (collector.get("torch") or {}).get("windows"):
        return False
    http = collector.get("http_spans") or {}
    return not any(http.get(k) for k in ("servers", "unrecognised", "failures", "notes"))


def _memory_readings(readings: list[list[Any]], meta: dict[str, Any]) -> int:
    """The root process's memory readings the leak's test would count: finite, and not
    after the session's full collection at the run's end (``judge_recorded``)."""
    full = (meta.get("collector") or {}).get("full_collection_at_end") or {}
    at_ns = full.get("at_ns")
    counted = 0
    for ts_ns, _pid, _ppid, is_root, _user, _system, rss, *_ in readings:
        if not is_root or not _finite(ts_ns) or not _finite(rss):
            continue
        if at_ns is None or int(ts_ns) / 1e9 <= int(at_ns) / 1e9:
            counted += 1
    return counted


def _finite(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _run_block(meta: dict[str, Any]) -> dict[str, Any]:
    """``diagnose``'s run block where no sample, span or second reading exists."""
    host = meta.get("host") or {}
    cpu_count = int(host.get("cpu_count") or 1)
    allowed = host.get("cores_allowed")
    cores = float(max(1, cpu_count))
    exit_info = meta["exit"]
    return {
        "wall_s": round(float(meta.get("duration_s") or 0.0), 4),
        "requests": 0,
        "throughput_per_s": None,
        "serving_window_s": 0.0,
        "latency_ms": {"p50": None, "p95": None, "p99": None},
        "concurrency": 0.0,
        "source": "none",
        "sampled_s": 0.0,
        "on_cpu_s": 0.0,
        "process_cores": 0.0,
        "cpu_count": cpu_count,
        # rules.allowed_cores, on meta.json's figures (that module imports pandas)
        "cores_allowed": round(cores if not allowed else min(cores, float(allowed)), 3),
        "cpu_limit": str(host.get("cpu_limit") or ""),
        # no throttled period (else declined): 0 of the periods, or no counters
        "cpu_throttled_share": 0.0,
        "waited_for_cpu": None,
        "gpu": False,
        "ended_by": exit_info.get("ended_by"),
        "exit_status": exit_info.get("status"),
        "bottleneck": {},
        "idle": [],
        "event_loops": [],
    }
