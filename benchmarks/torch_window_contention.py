"""How much of a PyTorch target's work a ``probe run`` torch window holds when the target
shares its cores, as a ratio to the same window on an idle host, measured in one run.

The target is ``tests/torch_corpus/decoder.py`` (150 requests, one window). Each round
runs it under ``probe run --no-report`` twice, once alone and once beside ``--hogs``
CPU-bound processes (order alternating), and reads the first window's trace: the
target's ops in it (none of probe's own thread), its wall length, and the
target's CPU in it (``target_cpu_s`` in meta.json). Printed per round, then the median
ratio of ops beside the hogs over ops alone. A window timed by the wall clock holds
about the share of a core the target got (~0.4 beside two hogs on two cores, from
earlier runs in the torch_windows module's docstring); one sized in the target's
CPU keeps the ratio near 1.

    python benchmarks/torch_window_contention.py [--rounds 3] [--hogs 2]

Needs torch (``pip install '.[torch]'``).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DECODER = REPO / "tests" / "torch_corpus" / "decoder.py"
HOG = "while True: pass"


def one_window(out: Path) -> dict[str, float]:
    """The first window of a ``probe run`` of the decoder: its target ops, its wall
    length and the target's CPU in it."""
    cmd = [sys.executable, "-m", "probe.cli", "run", "--no-report", "--out", str(out)]
    subprocess.run([*cmd, str(DECODER), "--requests", "150"], check=True, capture_output=True)
    window = json.loads((out / "meta.json").read_text())["collector"]["torch"]["windows"][0]
    events = json.loads((out / window["file"]).read_text())["traceEvents"]
    ops = [e for e in events if e.get("cat") == "cpu_op" and e.get("tid") != window["probe_tid"]]
    return {
        "ops": len(ops),
        "open_s": window["end_s"] - window["start_s"],
        "target_cpu_s": window["target_cpu_s"] or 0.0,
    }


def beside_hogs(out: Path, hogs: int) -> dict[str, float]:
    procs = [subprocess.Popen([sys.executable, "-c", HOG]) for _ in range(hogs)]
    try:
        return one_window(out)
    finally:
        for p in procs:
            p.kill()
            p.wait()


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--hogs", type=int, default=2, help="CPU-bound processes beside it")
    args = p.parse_args()
    ratios = []
    with tempfile.TemporaryDirectory() as tmp:
        for k in range(args.rounds):
            alone_dir, busy_dir = Path(tmp, f"alone{k}"), Path(tmp, f"busy{k}")
            if k % 2:
                busy = beside_hogs(busy_dir, args.hogs)
                alone = one_window(alone_dir)
            else:
                alone = one_window(alone_dir)
                busy = beside_hogs(busy_dir, args.hogs)
            ratios.append(busy["ops"] / alone["ops"])
            for name, w in (("alone", alone), (f"{args.hogs} hogs", busy)):
                print(
                    f"round {k + 1} {name:>7}: {w['ops']:6,d} ops in {w['open_s']:.3f} s, "
                    f"target CPU {w['target_cpu_s']:.3f} s"
                )
    print(f"ops beside the hogs over ops alone: median {statistics.median(ratios):.2f}")
    print(f"(rounds {', '.join(f'{r:.2f}' for r in ratios)})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
