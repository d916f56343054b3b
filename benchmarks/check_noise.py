"""How often `probe check --baseline` fails an unchanged service, and how often it catches a
real slowdown (issue 18: <= 1 false failure in 20 unchanged pairs, >= 19 of 20 slowdowns
of 20% caught at --max-regression 10%).

The service (written to a temporary folder) serves ``--requests`` requests back to back,
each computing a fixed number of Python iterations in a stage (``--work``, ~3 ms here):
its truth is its construction, a run with 1.2x the iterations does 1.2x the work per
request, and the machine's own noise (frequency, other processes, the profiler) is
what the gate must see through. Rounds interleave a baseline run, an
unchanged run and a slowed run, so drift of the machine lands on all three alike; each
unchanged and slowed run is checked against its round's baseline. ``--repeats N`` makes
each side N runs (``probe check A1..AN --baseline B1 .. --baseline BN``).

    python benchmarks/check_noise.py [--pairs 20] [--requests 300] [--work 40000] [--repeats 1]

It also times the request's work in plain Python (no probe) before the first round and
after the last, with the host's steal time: the figures mean little without the host's
regime beside them (the same loop has run at 1.5 ms and 2.7 ms a request on this machine
class, minutes apart).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SERVICE = """
import sys
import probe

requests, work = int(sys.argv[1]), int(float(sys.argv[2]))

@probe.stage("score")
def score(n):
    total = 0
    for i in range(n):
        total += i * i
    return total

for _ in range(requests):
    with probe.request():
        score(work)
"""


def probe(*args: str | Path) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "probe.cli", *map(str, args)]
    return subprocess.run(cmd, capture_output=True, text=True)


def run(tmp: Path, name: str, requests: int, work: float) -> Path:
    out = tmp / name
    done = probe("run", "--no-report", "--out", out, tmp / "service.py",
                 str(requests), str(work))  # fmt: skip
    if done.returncode != 0:
        raise SystemExit(f"probe run failed: {done.stderr}")
    return out


def check(current: list[Path], baseline: list[Path]) -> tuple[bool, float, str]:
    """(failed, p50 slowdown, the figures that regressed)."""
    against = [a for b in baseline for a in ("--baseline", b)]
    done = probe("check", *current, *against, "--max-regression", "10%", "--json")
    if done.returncode not in (0, 1):
        raise SystemExit(f"probe check failed: {done.stderr}")
    verdict = json.loads(done.stdout)
    p50 = next(r for r in verdict["regressions"] if r["figure"].startswith("p50("))
    failed = ",".join(r["figure"] for r in verdict["regressions"] if r["regressed"])
    return not verdict["passed"], float(p50["slowdown"]), failed


def host_regime(work: int, requests: int) -> str:
    """The plain loop's median wall and CPU a request, and the host's steal meanwhile."""

    def steal_jiffies() -> int:
        with open("/proc/stat") as stat:
            return int(stat.readline().split()[8])

    walls, cpus = [], []
    stolen = steal_jiffies()
    for _ in range(requests):
        wall, cpu = time.perf_counter_ns(), time.thread_time_ns()
        total = 0
        for i in range(work):
            total += i * i
        walls.append(time.perf_counter_ns() - wall)
        cpus.append(time.thread_time_ns() - cpu)
    stolen = steal_jiffies() - stolen
    wall_ms, cpu_ms = statistics.median(walls) / 1e6, statistics.median(cpus) / 1e6
    return f"plain loop {wall_ms:.2f} ms a request (CPU {cpu_ms:.2f} ms), steal {stolen} jiffies"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=20)
    parser.add_argument("--requests", type=int, default=300)
    parser.add_argument("--work", type=int, default=40_000, help="iterations a request")
    parser.add_argument("--repeats", type=int, default=1, help="runs a side")
    args = parser.parse_args()
    false_failures = caught = 0
    print(f"host before: {host_regime(args.work, args.requests)}", flush=True)
    with tempfile.TemporaryDirectory() as folder:
        tmp = Path(folder)
        (tmp / "service.py").write_text(SERVICE)
        for i in range(args.pairs):
            base, same, slow = [], [], []
            for k in range(args.repeats):  # interleaved: drift lands on all three alike
                base.append(run(tmp, f"base{i}.{k}", args.requests, args.work))
                same.append(run(tmp, f"same{i}.{k}", args.requests, args.work))
                slow.append(run(tmp, f"slow{i}.{k}", args.requests, args.work * 1.2))
            same_failed, same_ratio, same_what = check(same, base)
            slow_failed, slow_ratio, _ = check(slow, base)
            false_failures += same_failed
            caught += slow_failed
            print(f"round {i + 1:2}: unchanged p50 x{same_ratio:.3f} "
                  f"{'FAILED ' + same_what if same_failed else 'passed'};  "
                  f"1.2x work p50 x{slow_ratio:.3f} {'caught' if slow_failed else 'MISSED'}",
                  flush=True)  # fmt: skip
    print(f"host after:  {host_regime(args.work, args.requests)}")
    print(f"unchanged pairs failed: {false_failures} of {args.pairs} (target <= 1)")
    print(f"20% slowdowns caught:   {caught} of {args.pairs} (target >= {args.pairs - 1})")


if __name__ == "__main__":
    main()
