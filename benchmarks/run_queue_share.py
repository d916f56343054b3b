"""How much of the time a service's threads were ready to run they spent waiting for a
CPU (``analyzers.run_queue``), on an idle host and beside CPU-bound processes: the
figures behind ``RunQueue.note_share``.

    python benchmarks/run_queue_share.py                  # the threads corpus, idle host
    python benchmarks/run_queue_share.py --hogs 3 -n 4    # beside three CPU hogs
    python benchmarks/run_queue_share.py tests/threads_corpus/services/render_queue.py

Each script runs under ``probe run`` (no report) ``-n`` times; the share is read from the
run directory's samples (``samples.queued_ns``, the kernel's schedstat). Prints one line
per run and the largest share per script.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CORPUS = REPO / "tests" / "threads_corpus" / "services"
# the corpus's batch jobs, which run to the end with no arguments
SCRIPTS = (
    "convert_batch", "digest_workers", "enrich_async", "ingest_pipeline", "rank_async",
    "render_queue", "score_feed", "ship_logs", "tokenize_pool",
)  # fmt: skip


def share_of(run_dir: Path) -> tuple[float, float, float]:
    from probe.analyzers.run_queue import run_queue_wait
    from probe.rundir.reader import load

    wait = run_queue_wait(load(run_dir).tables["samples"])
    if wait is None:
        raise SystemExit(f"{run_dir}: no run-queue readings (samples.queued_ns)")
    return wait.queued_s, wait.ran_s, wait.share


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("scripts", nargs="*", type=Path)
    parser.add_argument("-n", type=int, default=2, help="runs per script (default 2)")
    parser.add_argument("--hogs", type=int, default=0, help="CPU-bound processes beside")
    args = parser.parse_args()
    scripts = args.scripts or [CORPUS / f"{name}.py" for name in SCRIPTS]
    hogs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(args.hogs)]
    try:
        with tempfile.TemporaryDirectory() as tmp:
            for script in scripts:
                shares = []
                for i in range(args.n):
                    run_dir = Path(tmp) / f"{script.stem}-{i}"
                    subprocess.run(
                        [sys.executable, "-m", "probe.cli", "run", "--no-report",
                         "--out", str(run_dir), str(script)],
                        check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                    )  # fmt: skip
                    queued, ran, share = share_of(run_dir)
                    shares.append(share)
                    print(f"{script.stem:16} run {i}: {queued:6.2f} s queued, "
                          f"{ran:6.2f} s on a CPU, share {share:.3f}", flush=True)  # fmt: skip
                print(f"{script.stem:16} largest share {max(shares):.3f}", flush=True)
    finally:
        for hog in hogs:
            hog.kill()
            hog.wait()


if __name__ == "__main__":
    main()
