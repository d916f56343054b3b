"""``probe watch --fail-on-leak`` at its defaults over the memory corpus: the staging bar.

Each service of ``tests/memory_corpus`` (real processes; each one's truth is in its
docstring, checked from /proc without probe by ``tests/memory_corpus/record.py --verify``)
runs under ``probe watch --fail-on-leak`` with no other setting, at its corpus length and
at ``--longer`` times it. The bar (issue 13): a leaking service exits 3, a healthy or
warming-up one 0 -- and never says LEAK. An "undetermined" leak is a miss here (exit 0).

    python benchmarks/watch_corpus.py [NAME ...] [--longer 3] [--takes 1]

Run on a quiet machine: the services are real, and so is their timing.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "memory_corpus"))

from record import SERVICES, _available  # noqa: E402

# the console script users run, else the module behind it
_SCRIPT = Path(sys.executable).parent / "probe"
PROBE = [str(_SCRIPT)] if _SCRIPT.is_file() else [sys.executable, "-m", "probe.cli"]


def watch_once(name: str, scale: float) -> dict[str, object]:
    script, args, (knob, value), truth = SERVICES[name]
    length = str(int(value * scale)) if float(value).is_integer() else str(value * scale)
    with tempfile.TemporaryDirectory(prefix="probe-watch-corpus-") as out:
        argv = [*PROBE, "watch", "--fail-on-leak", "-q",
                "--out", out, "--", sys.executable, str(script), *args, knob, length]  # fmt: skip
        started = time.monotonic()
        done = subprocess.run(argv, capture_output=True, text=True, timeout=900)
        took = time.monotonic() - started
        try:
            verdict = json.loads((Path(out) / "leak.json").read_text())["verdict"]
        except (OSError, ValueError, KeyError):
            verdict = {"state": "no report", "reason": done.stderr.strip()[-200:]}
    state = str(verdict.get("state"))
    right = done.returncode == 3 if truth == "leak" else (done.returncode == 0 and state != "leak")
    return {
        "name": name, "scale": scale, "truth": truth, "exit": done.returncode,
        "state": state, "basis": verdict.get("basis"), "took_s": round(took, 1),
        "right": right, "reason": str(verdict.get("reason", ""))[:150],
    }  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", help="services (default: every one available)")
    parser.add_argument("--longer", type=float, default=3.0, help="the second length's factor")
    parser.add_argument("--takes", type=int, default=1, help="runs of each service and length")
    args = parser.parse_args()
    names = args.names or [n for n in SERVICES if _available(n)]
    rows = []
    for name in names:
        for scale in (1.0, args.longer):
            for _ in range(args.takes):
                row = watch_once(name, scale)
                rows.append(row)
                mark = "ok " if row["right"] else "BAD"
                print(f"{mark} {name:20s} x{scale:g} truth {row['truth']:8s} exit {row['exit']} "
                      f"{row['state']:13s} {row['basis'] or '':8s} {row['took_s']:6.1f} s  "
                      f"{row['reason']}", flush=True)  # fmt: skip
    leaks = [r for r in rows if r["truth"] == "leak"]
    healthy = [r for r in rows if r["truth"] != "leak"]
    print(
        f"\nleaks flagged (exit 3): {sum(r['exit'] == 3 for r in leaks)}/{len(leaks)}; "
        f"healthy quiet (exit 0, never LEAK): {sum(bool(r['right']) for r in healthy)}/"
        f"{len(healthy)}; false alarms: {sum(r['state'] == 'leak' for r in healthy)}; "
        f"undetermined: {sum(r['state'] == 'undetermined' for r in rows)}"
    )


if __name__ == "__main__":
    main()
