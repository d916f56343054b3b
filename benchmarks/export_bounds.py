"""How long `probe export` takes on an hour-long run, and how big each file is.

Builds the synthetic hour (``tests.synthetic.hour_long_run``: 1,000,000 spans in 200,000
requests on 8 threads, 360,000 stack samples, resources at 10 Hz), then runs
``probe export`` in a fresh process for each format, bounded (the default) and with
``--full``, and reports wall time, peak RSS, file size and what was kept. Targets
(issue 18): bounded exports <= 10 s and <= 10 MB. For the Perfetto file it also splits
the bytes by kind of packet, the figures ``TimelineLimits`` is sized from.

    python benchmarks/export_bounds.py [--formats perfetto,chrome,speedscope] [--no-full]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.synthetic import hour_long_run  # noqa: E402


def export(run_dir: Path, fmt: str, out: Path, full: bool) -> tuple[float, float, str]:
    """Wall seconds, peak RSS (MiB) of the export process, and its summary line."""
    argv = ["export", str(run_dir), "--format", fmt, "-o", str(out), *(["--full"] * full)]
    code = (
        "import resource, sys\n"
        "from probe.cli import main\n"
        "try:\n"
        f"    main({argv!r})\n"
        "except SystemExit:\n"
        "    pass\n"
        "sys.stderr.write(f'{resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}\\n')\n"
    )
    t = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    wall = time.perf_counter() - t
    rss = float(done.stderr.strip().splitlines()[-1])
    return wall, rss, done.stdout.strip()


def perfetto_bytes(path: Path) -> dict[str, tuple[int, float]]:
    """Packets by kind: (count, mean bytes)."""
    from perfetto.protos.perfetto.trace.perfetto_trace_pb2 import Trace

    size: Counter[str] = Counter()
    count: Counter[str] = Counter()
    for p in Trace.FromString(path.read_bytes()).packet:
        kind = p.WhichOneof("data") or "interned"
        if kind == "track_event":
            e = p.track_event
            kind = {1: "slice begin", 2: "slice end", 3: "instant", 4: "counter"}[e.type]
            kind += " (annotated)" if len(e.debug_annotations) else ""
        size[kind] += p.ByteSize() + 3  # + the field tag and length of the packet
        count[kind] += 1
    return {k: (count[k], size[k] / count[k]) for k in count}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--formats", default="perfetto,chrome,speedscope")
    parser.add_argument("--no-full", action="store_true", help="skip the --full exports")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        run_dir = hour_long_run(Path(tmp) / "hour")
        print(f"{'format':<12} {'mode':<8} {'wall s':>7} {'peak MiB':>9} {'MB':>7}  kept")
        for fmt in args.formats.split(","):
            for full in (False, True) if not args.no_full else (False,):
                out = Path(tmp) / f"out.{fmt}"
                wall, rss, line = export(run_dir, fmt, out, full)
                kept = line.split(": ", 1)[-1].rstrip(")")
                mode = "full" if full else "bounded"
                size = out.stat().st_size / 1e6
                print(f"{fmt:<12} {mode:<8} {wall:7.2f} {rss:9.0f} {size:7.2f}  {kept}")
                if fmt == "perfetto" and not full:
                    for kind, (n, mean) in sorted(perfetto_bytes(out).items()):
                        print(f"    {kind:<26} {n:>9,} packets  {mean:6.1f} bytes each")


if __name__ == "__main__":
    main()
