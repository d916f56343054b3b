"""Whole-process overhead of `probe run` on the reference workloads, and its fixed cost.

Method (from ../shared/workloads/README.md): wall time of the whole process,
instrumented over plain, taken pair by pair (A B A B ...), one warm-up of each, median of
the per-pair ratios, all in one session -- the machine is shared and noisy, so only
ratios measured side by side mean anything. Each workload runs as the README says: W1
with one BLAS thread (``OPENBLAS_NUM_THREADS=1``), W2 and W3 as they come (W2's BLAS on
every core: the case where a profiler's helper competes with the service for its cores).
The verdict and report.html are part of what is timed unless probe options say otherwise.

    python benchmarks/overhead.py                      # W1 W2 W3 and the fixed cost, 7 pairs
    python benchmarks/overhead.py --pairs 9 -w w2 -- --no-report
    python benchmarks/overhead.py --fixed-only         # the empty script only

When py-spy is installed (`pip install '.[bench]'`), each round also runs the script
under `py-spy record -r 100` (the reference's external sampler at 100 Hz), so probe's
ratio has py-spy's beside it from the same rounds: A B C A B C ... ``--baseline DIR`` adds
another checkout's probe (put on PYTHONPATH, its C extensions built in place) to the same
rounds, so a change is measured against the code before it without the host's drift
between two sittings.

The fixed cost is the same pairing on an empty script, in seconds over plain Python, split
at the script's one line (it prints its wall clock): from the command to the target's
first line, and from its last line to the end of `probe run` (verdict and report written).
Each workload's probe runs are split the same way by their run directory's clock (the
target's start and end in meta.json): before the target, the target, after it -- where
a workload's excess lies (W2's: after the target, where the verdict's imports found no
idle core during it).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

HERE = Path(__file__).resolve().parent
WORKLOADS = HERE.parent.parent / "shared" / "workloads"
NAMES = {"w1": "w1_service.py", "w2": "w2_numpy.py", "w3": "w3_io.py"}
# Thread-count settings a parent shell may carry: W2 and W3 run without them
BLAS_THREADS = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")
EMPTY = "import time\nprint(time.time_ns(), flush=True)\n"


def workload_env(name: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in BLAS_THREADS}
    if name == "w1":
        env["OPENBLAS_NUM_THREADS"] = "1"
    return env


def timed(cmd: list[str], env: dict[str, str]) -> tuple[float, float | None]:
    """Wall seconds of ``cmd``, and when it printed a wall clock (the empty script), the
    seconds from the start to that line."""
    start_ns = time.time_ns()
    t0 = time.perf_counter()
    done = subprocess.run(
        cmd, env=env, check=True, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True
    )
    wall = time.perf_counter() - t0
    first = done.stdout.split(maxsplit=1)[0] if done.stdout.strip() else ""
    line_at = (int(first) - start_ns) / 1e9 if first.isdigit() else None
    return wall, line_at


# Each tool's next command, and what it adds to the environment
Commands = dict[str, Callable[[], tuple[list[str], dict[str, str]]]]


def commands(
    script: Path, tmp: Path, probe_args: list[str], py_spy: str | None, baseline: Path | None
) -> tuple[list[str], Commands]:
    runs = iter(range(10**6))

    def probed(pythonpath: Path | None = None) -> tuple[list[str], dict[str, str]]:
        out = tmp / f"run{next(runs)}"
        # -P: the working directory not first on sys.path, where a checkout's own probe/
        # would shadow the --baseline put on PYTHONPATH (run from the repository root)
        cmd = [sys.executable, "-P", "-m", "probe.cli", "run", "--out", str(out), *probe_args]
        return [*cmd, str(script)], {"PYTHONPATH": str(pythonpath)} if pythonpath else {}

    plain = [sys.executable, str(script)]
    others: Commands = {"probe": probed}
    if baseline is not None:
        others["baseline"] = lambda: probed(baseline)
    if py_spy:
        raw = str(tmp / "py-spy.txt")
        spied = [py_spy, "record", "-r", "100", "-f", "raw", "-o", raw, "--", *plain]
        others["py-spy"] = lambda: (spied, {})
    return plain, others


def split(cmd: list[str], wall: float) -> tuple[float, float, float] | None:
    """A probe run that just ended: its seconds before its target, of the target, and
    after it (the verdict and report), from its run directory's meta.json (the target's
    start and end, wall clock); None for another tool's run."""
    ended_ns = time.time_ns()  # called as the command returns: microseconds after its end
    if "--out" not in cmd:
        return None
    meta = json.loads((Path(cmd[cmd.index("--out") + 1]) / "meta.json").read_text())
    after = (ended_ns - meta["end_unix_ns"]) / 1e9
    target = (meta["end_unix_ns"] - meta["start_unix_ns"]) / 1e9
    return wall - target - after, target, after


Times = list[tuple[float, float | None]]


Splits = dict[str, list[tuple[float, float, float]]]


def paired(
    plain: list[str], others: Commands, env: dict[str, str], pairs: int
) -> tuple[Times, dict[str, Times], Splits]:
    """The plain runs' times, each other tool's, and each probe's runs' splits (``split``)."""
    timed(plain, env)
    for make in others.values():
        cmd, extra = make()
        timed(cmd, {**env, **extra})  # warm-up
    a_times: Times = []
    times: dict[str, Times] = {name: [] for name in others}
    splits: Splits = {}
    for _ in range(pairs):
        a_times.append(timed(plain, env))
        for name, make in others.items():
            cmd, extra = make()
            times[name].append(timed(cmd, {**env, **extra}))
            parts = split(cmd, times[name][-1][0])
            if parts is not None:
                splits.setdefault(name, []).append(parts)
    return a_times, times, splits


def workload(
    name: str, pairs: int, probe_args: list[str], py_spy: str | None, baseline: Path | None
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        script = WORKLOADS / NAMES[name]
        plain, others = commands(script, Path(tmp), probe_args, py_spy, baseline)
        a_times, times, splits = paired(plain, others, workload_env(name), pairs)
    a_walls = [a for a, _ in a_times]
    for tool, b_times in times.items():
        b_walls = [b for b, _ in b_times]
        ratios = [b / a for a, b in zip(a_walls, b_walls, strict=True)]
        print(
            f"{name.upper()} {tool:6}: {statistics.median(ratios):.3f}x  (pairs "
            f"{min(ratios):.3f}-{max(ratios):.3f}; median plain {statistics.median(a_walls):.2f}"
            f" s, {tool} {statistics.median(b_walls):.2f} s)",
            flush=True,
        )
    for tool, parts in splits.items():
        before, target, after = (statistics.median(x) for x in zip(*parts, strict=True))
        print(
            f"    {tool}'s runs: {before:.2f} s before the target, the target {target:.2f} s "
            f"(plain's whole process {statistics.median(a_walls):.2f} s), {after:.2f} s "
            "after it",
            flush=True,
        )


def fixed_cost(pairs: int, probe_args: list[str], baseline: Path | None) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        script = Path(tmp) / "empty.py"
        script.write_text(EMPTY)
        plain, others = commands(script, Path(tmp), probe_args, None, baseline)
        a_times, times, _ = paired(plain, others, workload_env("w3"), pairs)
    for tool, b_times in times.items():
        extra, before, after = [], [], []
        for (a, a_line), (b, b_line) in zip(a_times, b_times, strict=True):
            extra.append(b - a)
            if a_line is not None and b_line is not None:
                before.append(b_line - a_line)
                after.append((b - b_line) - (a - a_line))
        print(
            f"fixed cost (empty script), {tool}: +{statistics.median(extra):.3f} s over plain "
            f"Python (pairs {min(extra):+.3f}..{max(extra):+.3f}; median plain "
            f"{statistics.median(a for a, _ in a_times):.3f} s)",
            flush=True,
        )
        if before:
            print(
                f"  to the target's first line +{statistics.median(before):.3f} s, "
                f"from its last line to the end +{statistics.median(after):.3f} s",
                flush=True,
            )


def _warn_if_compiled_at_every_import() -> None:
    """With PYTHONDONTWRITEBYTECODE set (some CI images set it), a checkout whose modules
    were never compiled compiles them at every import: +0.1 s a process measured on an
    editable install here (2026-11-27), probe's cost and not the user's."""
    import probe

    package = Path(probe.__file__).resolve().parent
    cached = list(package.glob("__pycache__/*.pyc"))
    if os.environ.get("PYTHONDONTWRITEBYTECODE") and not cached:
        print(
            f"warning: PYTHONDONTWRITEBYTECODE is set and {package} has no compiled modules: "
            f"every run compiles them; first run  python -m compileall -q {package.parent}"
        )


def main() -> None:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--pairs", type=int, default=7)
    p.add_argument("-w", "--workload", action="append", choices=sorted(NAMES))
    p.add_argument("--fixed-only", action="store_true", help="the empty script only")
    p.add_argument("--no-py-spy", action="store_true", help="skip the py-spy rounds")
    p.add_argument(
        "--baseline",
        type=Path,
        metavar="DIR",
        help="also another checkout's probe (on PYTHONPATH; its C extensions built) in the "
        "same rounds: old against new without the host's drift between two runs",
    )
    p.add_argument("--no-fixed", action="store_true", help="the workloads only")
    p.add_argument("probe_args", nargs="*", help="extra `probe run` options (after --)")
    args = p.parse_args()
    _warn_if_compiled_at_every_import()
    py_spy = None if args.no_py_spy else shutil.which("py-spy")
    if py_spy is None and not args.no_py_spy:
        print("py-spy not found (pip install '.[bench]'): probe's ratios only")
    print(f"probe run {' '.join(args.probe_args)} vs plain python, {args.pairs} pairs each")
    if not args.no_fixed:
        fixed_cost(args.pairs, args.probe_args, args.baseline)
    if args.fixed_only:
        return
    for name in args.workload or sorted(NAMES):
        workload(name, args.pairs, args.probe_args, py_spy, args.baseline)


if __name__ == "__main__":
    main()
