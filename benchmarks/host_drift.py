"""How much this host's speed moves: one fixed pure-Python loop timed again and again.

A leak's pace in time follows its service's pace, and that follows the host. On a host
whose speed drifts, a steady leak judged against time can seem to slow down within a run;
``probe watch`` judges a short life against the requests done for that reason
(``probe/watchdog/work.py``). This prints the spread of the same work's wall and CPU time
(max/min) and whether CPU time follows the wall (then CPU time is no unit of work either:
the work itself runs slower, nothing is stolen).

    python benchmarks/host_drift.py [--rounds 40] [--iterations 3000000]
"""

from __future__ import annotations

import argparse
import statistics
import time


def loop(n: int) -> int:
    total = 0
    for i in range(n):
        total += i * i
    return total


def steal_ticks() -> int:
    """The host's stolen time so far (USER_HZ ticks; 0 where /proc/stat has no such field)."""
    with open("/proc/stat") as f:
        fields = f.readline().split()
    return int(fields[8]) if len(fields) > 8 else 0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=40)
    parser.add_argument("--iterations", type=int, default=3_000_000)
    args = parser.parse_args()
    walls, cpus = [], []
    stolen = steal_ticks()
    for _ in range(args.rounds):
        w0, c0 = time.perf_counter(), time.process_time()
        loop(args.iterations)
        walls.append(time.perf_counter() - w0)
        cpus.append(time.process_time() - c0)
    stolen = steal_ticks() - stolen
    for name, xs in (("wall", walls), ("cpu", cpus)):
        print(
            f"{name:4s}: {min(xs):.3f}-{max(xs):.3f} s  max/min {max(xs) / min(xs):.2f}  "
            f"cv {statistics.pstdev(xs) / statistics.mean(xs):.1%}"
        )
    print(f"cpu/wall per round: {min(c / w for c, w in zip(cpus, walls, strict=True)):.3f} "
          f"at least; stolen ticks over the rounds: {stolen}")  # fmt: skip


if __name__ == "__main__":
    main()
