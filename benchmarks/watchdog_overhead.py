"""What the leak watchdog costs at its defaults: CPU of one core, and memory over 24 hours.

1. ``probe watch --pid`` (defaults: a reading a second) on a running process: the
   watcher's CPU time over ``--seconds`` of steady watching (start-up and the first 30 s,
   read at 10 Hz, excluded: measured from the 35th second on), as a share of one core.
   Target: <= 1%.
2. The in-process watchdog (``probe.watchdog.start()`` at its defaults) in an idle
   service: the process's CPU over the same span (from the 15th second: tracemalloc
   traces the first 10 s by default), with and without it, interleaved.
3. Memory: a ``Monitor`` fed 24 hours of readings (one a second, simulated clock): the
   Python heap it holds after 1 hour and after 24 (tracemalloc). Target: bounded (ring
   buffers), not growing with the hours.

    python benchmarks/watchdog_overhead.py [--seconds 60]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import textwrap
import time
import tracemalloc
from pathlib import Path

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

IDLE_SERVICE = """
import sys, time
if sys.argv[1] == "on":
    import probe.watchdog
    probe.watchdog.start()
time.sleep(float(sys.argv[2]))
"""


def probe_cmd() -> list[str]:
    script = Path(sys.executable).parent / "probe"
    return [str(script)] if script.is_file() else [sys.executable, "-m", "probe.cli"]


def cpu_of(proc: psutil.Process) -> float:
    t = proc.cpu_times()
    return t.user + t.system


def watcher_cost(seconds: float) -> float:
    target = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(100000)"])
    watcher = subprocess.Popen([*probe_cmd(), "watch", "-q", "--pid", str(target.pid)])
    try:
        w = psutil.Process(watcher.pid)
        time.sleep(35)  # start-up (imports) and the first 30 s read at 10 Hz: paid once
        c0, t0 = cpu_of(w), time.monotonic()
        time.sleep(seconds)
        return (cpu_of(w) - c0) / (time.monotonic() - t0)
    finally:
        watcher.terminate()
        watcher.wait()
        target.kill()
        target.wait()


def in_process_cost(seconds: float, tmp: Path) -> tuple[float, float]:
    script = tmp / "idle_service.py"
    script.write_text(textwrap.dedent(IDLE_SERVICE))
    costs = {"off": 0.0, "on": 0.0}
    for mode in ("off", "on", "on", "off"):  # interleaved: the host's load drifts
        p = subprocess.Popen([sys.executable, str(script), mode, str(seconds / 2 + 15)])
        proc = psutil.Process(p.pid)
        time.sleep(15)  # start-up, and the first 10 s that attribution traces by default
        c0, t0 = cpu_of(proc), time.monotonic()
        time.sleep(seconds / 2)
        costs[mode] += (cpu_of(proc) - c0) / (time.monotonic() - t0) / 2
        p.wait()
    return costs["off"], costs["on"]


def memory_over_a_day() -> tuple[int, int]:
    from probe.analyzers.leaks import DetectorSettings
    from probe.watchdog.monitor import Monitor
    from tests.memory_series import make

    series = make("mixed", 1, hours=24)
    values = iter(series.bytes_.tolist())
    clock = [0.0]
    monitor = Monitor(lambda: next(values, None), DetectorSettings(), clock=lambda: clock[0])
    tracemalloc.start()
    held = []
    for hour in range(24):
        for _ in range(3600):
            monitor.tick()
            clock[0] += 1.0
        if hour in (0, 23):
            monitor.verdict_dict()
            held.append(tracemalloc.get_traced_memory()[0])
    tracemalloc.stop()
    return held[0], held[1]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=60.0)
    args = parser.parse_args()
    import tempfile

    share = watcher_cost(args.seconds)
    print(f"probe watch --pid (defaults): {share:.3%} of one core, steady state")
    with tempfile.TemporaryDirectory() as tmp:
        off, on = in_process_cost(args.seconds, Path(tmp))
    print(
        f"in-process watchdog (defaults), idle service: {on:.3%} of one core "
        f"with it, {off:.3%} without ({on - off:+.3%})"
    )
    hour, day = memory_over_a_day()
    print(f"monitor heap after 1 h: {hour / 1e6:.2f} MB, after 24 h: {day / 1e6:.2f} MB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
