"""Reading a Kineto trace: peak RSS and time per MB of trace, up to a few hundred MB.

Builds traces of the sizes asked (uncompressed JSON, written gzipped as torch.profiler's
``tensorboard_trace_handler`` does) by repeating the events of a real trace end to end --
``../shared/gpu_traces/tl_h100_owlv2_infer.json.gz`` when it is there (H100, ops with
shapes, Python frames, kernels, copies, allocator instants: the richest mix of the set),
with their times and ids shifted so each copy follows the one before -- and reads each in
a fresh process with ``probe.rundir.kineto.read_kineto``, reporting the process's peak RSS
over its RSS after the imports. The bar (issue 15): a 200 MB trace under 1 GB.

    python benchmarks/kineto_load.py [--mb 50 200]
"""

from __future__ import annotations

import argparse
import gzip
import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
SOURCE = REPO.parent / "shared" / "gpu_traces" / "tl_h100_owlv2_infer.json.gz"

_READ = """
import json, resource, sys, time
import psutil
from probe.rundir.kineto import read_kineto
before = psutil.Process().memory_info().rss
t0 = time.perf_counter()
trace = read_kineto(sys.argv[1])
seconds = time.perf_counter() - t0
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
rows = sum(len(t) for t in trace.tables.values())
print(json.dumps({"seconds": seconds, "before": before, "peak": peak, "rows": rows,
                  "events": trace.events}))
"""


def events_of(source: Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    with gzip.open(source) as f:
        document = json.load(f)
    return document, document.pop("traceEvents")


def shifted(events: list[dict[str, Any]], copy: int, span_us: float) -> list[dict[str, Any]]:
    """The events again, ``copy`` spans later, with their ids moved out of the way."""
    out = []
    for e in events:
        e = dict(e)
        if isinstance(e.get("ts"), (int, float)):
            e["ts"] = e["ts"] + copy * span_us
        args = e.get("args")
        if isinstance(args, dict):
            args = dict(args)
            for key in ("correlation", "External id"):
                if isinstance(args.get(key), int):
                    args[key] += copy * 10_000_000
            e["args"] = args
        if isinstance(e.get("id"), int):
            e["id"] += copy * 10_000_000
        out.append(e)
    return out


def build(path: Path, mb: float) -> float:
    """A trace of about ``mb`` MB of JSON at ``path`` (gzipped); its size in MB."""
    document, events = events_of(SOURCE)
    times = [e["ts"] + e.get("dur", 0) for e in events if isinstance(e.get("ts"), (int, float))]
    span_us = max(times) - min(times) + 1000.0
    one = len(json.dumps(events))
    copies = max(1, round(mb * 1e6 / one))
    written = 0
    with gzip.open(path, "wt", compresslevel=1) as f:
        f.write('{"schemaVersion": 1, "deviceProperties": ')
        f.write(json.dumps(document.get("deviceProperties", [])))
        f.write(', "traceEvents": [')
        for copy in range(copies):
            chunk = json.dumps(shifted(events, copy, span_us))[1:-1]
            f.write(("," if copy else "") + chunk)
            written += len(chunk)
        f.write("]}")
    return written / 1e6


def main() -> int:
    p = argparse.ArgumentParser(
        description=__doc__.splitlines()[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--mb", type=float, nargs="+", default=[50.0, 200.0])
    args = p.parse_args()
    if not SOURCE.is_file():
        print(f"needs {SOURCE} (the shared GPU traces beside the project)", file=sys.stderr)
        return 2
    print(f"{'trace MB':>9} {'events':>10} {'rows':>10} {'seconds':>8} {'s/MB':>6} "
          f"{'peak-base MB':>13} {'MB RSS/MB':>10}")  # fmt: skip
    with tempfile.TemporaryDirectory() as tmp:
        for mb in args.mb:
            path = Path(tmp) / f"trace-{mb:g}.json.gz"
            size = build(path, mb)
            done = subprocess.run(
                [sys.executable, "-c", _READ, str(path)], capture_output=True, text=True, check=True
            )
            r = json.loads(done.stdout)
            grew = (r["peak"] - r["before"]) / 1e6
            print(f"{size:9.0f} {r['events']:10,} {r['rows']:10,} {r['seconds']:8.1f} "
                  f"{r['seconds'] / size:6.3f} {grew:13.0f} {grew / size:10.2f}")  # fmt: skip
            path.unlink()
    return 0


if __name__ == "__main__":
    sys.exit(main())
