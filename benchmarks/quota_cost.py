"""What ``probe run`` costs a service held by a cgroup CPU quota (a container's CPU limit):
``sample_services/tagging_cpu_bound.py`` (one busy pure-Python thread) in a fresh cgroup
of half a core on this host's CPUs, plain, under ``probe run`` and under ``probe run
--no-report``, the arms shuffled each round. Printed for each arm: the whole process's
wall time (from outside it), and under probe the target's own cores
(``diagnosis.json``'s ``run.process_cores``: its CPU time over its wall time, out of
the 0.5 the quota allows). ``SCHED_IDLE`` yields a core, not a shared quota: the
finisher's imports wait for the run's end under a binding quota (``probe/cli/finisher.py``,
``_quota_binds``), so the target keeps its share and the end of the run pays for them.
The README's figures under "Performance" come from here; the bar on the target's share
is ``tests/integration/test_cores_allowed.py``'s.

Needs root and a cgroup CPU controller it may write (v1's ``cpu``, or v2's root with the
``cpu`` controller delegated); says so and exits 2 otherwise.

    python benchmarks/quota_cost.py [--rounds 5] [--requests 100]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
from benchmarks.overhead import _warn_if_compiled_at_every_import  # noqa: E402
from tests.integration.test_cores_allowed import (  # noqa: E402  the test's own group
    _cpu_cgroup_base,
    cpu_quota_group,
)

SAMPLE = REPO / "sample_services" / "tagging_cpu_bound.py"
QUOTA_US, PERIOD_US = 50_000, 100_000  # half a core, as the test's
ARMS = ("plain", "probe run", "probe run --no-report")
# the console script users run, as the tests do
_SCRIPT = Path(sys.executable).parent / "probe"
PROBE = [str(_SCRIPT)] if _SCRIPT.is_file() else [sys.executable, "-m", "probe.cli"]


def command(arm: str, run_dir: Path, requests: int) -> list[str]:
    target = [str(SAMPLE), "--requests", str(requests)]
    if arm == "plain":
        return [sys.executable, *target]
    flags = ["--no-report"] if arm.endswith("--no-report") else []
    return [*PROBE, "run", "-o", str(run_dir), *flags, *target]


def timed(cmd: list[str], group: Path) -> float:
    def into_the_group() -> None:
        (group / "cgroup.procs").write_text(str(os.getpid()))

    started = time.perf_counter()
    subprocess.run(cmd, preexec_fn=into_the_group, check=True, capture_output=True, timeout=600)
    return time.perf_counter() - started


def target_cores(run_dir: Path) -> float | None:
    path = run_dir / "diagnosis.json"
    if not path.exists():
        return None
    return json.loads(path.read_text())["run"].get("process_cores")


def main() -> int:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--requests", type=int, default=100, help="the sample's (default 100)")
    args = p.parse_args()
    found = _cpu_cgroup_base()
    if found is None:
        print("quota_cost: needs root and a cgroup CPU controller it may write", file=sys.stderr)
        return 2
    _warn_if_compiled_at_every_import()  # the finisher's imports are what this measures
    walls: dict[str, list[float]] = {arm: [] for arm in ARMS}
    cores: dict[str, list[float]] = {arm: [] for arm in ARMS}
    quota = cpu_quota_group(*found, QUOTA_US, PERIOD_US)
    with tempfile.TemporaryDirectory() as tmp, quota as group:
        for k in range(args.rounds):
            order = random.sample(ARMS, len(ARMS))
            for arm in order:
                run_dir = Path(tmp) / f"{k}-{ARMS.index(arm)}"
                walls[arm].append(timed(command(arm, run_dir, args.requests), group))
                share = target_cores(run_dir)
                if share is not None:
                    cores[arm].append(share)
            line = ", ".join(f"{arm} {walls[arm][-1]:.2f} s" for arm in ARMS)
            print(f"round {k + 1}: {line}", flush=True)
    print(f"under a quota of {QUOTA_US / PERIOD_US:g} cores, {args.rounds} rounds:")
    plain = statistics.median(walls["plain"])
    for arm in ARMS:
        w = walls[arm]
        text = f"  {arm}: wall {statistics.median(w):.2f} s ({min(w):.2f}-{max(w):.2f})"
        if arm != "plain":
            text += f", {statistics.median(w) / plain:.2f}x plain"
        if cores[arm]:
            text += f"; the target at {min(cores[arm]):.2f}-{max(cores[arm]):.2f} cores"
        print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
