"""What a SIGKILL leaves: ``probe run`` on a spanned loop, killed at a random moment.

Each round starts ``probe run`` on a loop of short requests (one span each), kills the
``probe run`` process with SIGKILL at a moment drawn uniformly from [--low, --high] s
after the spawn, waits for its sidecar to finish the run directory, and loads it. It
prints how many directories load, how many keep at least one span, and the loss: the
time between the kill and the end of the last span kept (what the journals had not
flushed).

    python benchmarks/kill_salvage.py [--rounds 100] [--low 0.1] [--high 6] [--seed 1]

Issue 14's bar: every directory loads, >= 95% keep spans, median loss <= 0.6 s. A kill
in the first ~0.15 s finds no directory at all: Python is still starting ``probe run``;
those are counted apart.
"""

from __future__ import annotations

import argparse
import os
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

LOOP = """
import time
import probe

@probe.stage("work")
def work():
    t = time.perf_counter()
    while time.perf_counter() - t < 0.002:
        pass

while True:
    with probe.request():
        work()
    time.sleep(0.003)
"""


def probe_cmd() -> list[str]:
    script = Path(sys.executable).parent / "probe"
    return [str(script)] if script.is_file() else [sys.executable, "-m", "probe.cli"]


def sidecar_done(run_dir: Path) -> bool:
    return (run_dir / "meta.json").is_file() and not list(run_dir.glob("*.jsonl"))


def one_round(work: Path, k: int, after_s: float) -> tuple[bool | None, bool, float | None]:
    """(loaded, kept spans, loss in s) of one kill ``after_s`` after the spawn; loaded is
    None when no run directory existed yet (killed while Python started probe)."""
    from probe.errors import ProbeError
    from probe.rundir import load

    script = work / "loop.py"
    run_dir = work / f"run{k}"
    proc = subprocess.Popen(
        [*probe_cmd(), "run", "-o", str(run_dir), str(script)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    time.sleep(after_s)
    killed_unix_ns = time.time_ns()
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    deadline = time.monotonic() + 30
    while not sidecar_done(run_dir) and time.monotonic() < deadline:
        time.sleep(0.05)
    if not run_dir.exists():
        return None, False, None
    try:
        run = load(run_dir)
    except ProbeError:
        return False, False, None
    if run.spans.empty:
        return True, False, None
    clock = run.meta.get("clock") or {}
    last_end_unix = int(run.spans["end_ns"].max()) - clock["perf_ns"] + clock["unix_ns"]
    return True, True, (killed_unix_ns - last_end_unix) / 1e9


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=100)
    parser.add_argument("--low", type=float, default=0.1)
    parser.add_argument("--high", type=float, default=6.0)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    loaded = kept = early = 0
    losses: list[float] = []
    with tempfile.TemporaryDirectory(prefix="kill-salvage-") as tmp:
        work = Path(tmp)
        (work / "loop.py").write_text(LOOP)
        for k in range(args.rounds):
            ok, spans, loss = one_round(work, k, rng.uniform(args.low, args.high))
            early += ok is None
            loaded += bool(ok)
            kept += spans
            if loss is not None:
                losses.append(loss)
            print(f"\r{k + 1}/{args.rounds}", end="", file=sys.stderr, flush=True)
    print(file=sys.stderr)
    made = args.rounds - early
    print(f"killed before a run directory existed (Python starting probe): {early}")
    print(f"directories that load: {loaded}/{made}")
    print(f"keep spans:            {kept}/{made} ({kept / max(made, 1):.0%})")
    if losses:
        q = statistics.quantiles(losses, n=20)
        print(
            f"loss (kill - last span kept): median {statistics.median(losses):.2f} s, "
            f"p95 {q[-1]:.2f} s, max {max(losses):.2f} s"
        )


if __name__ == "__main__":
    main()
