"""What a torch.profiler event costs in each timeline export: the bytes the Perfetto and
Chrome files grow by per event, for each real GPU trace of ``../shared/gpu_traces``
placed as a window on a small synthetic run. ``TimelineLimits.torch_events`` (and the
Chrome export's third of it) are sized from these figures so that a bounded export with
torch windows stays under issue 18's 10 MB (``benchmarks/export_bounds.py`` measures
the rest of the file).

    python benchmarks/torch_event_bytes.py [TRACES_DIR]
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from probe.analyzers.timeline import TimelineLimits, timeline  # noqa: E402
from probe.reports.chrome import ChromeTrace  # noqa: E402
from probe.reports.perfetto import PerfettoTrace  # noqa: E402
from probe.rundir.kineto import read_kineto  # noqa: E402
from probe.rundir.reader import load  # noqa: E402
from tests.synthetic import RunBuilder  # noqa: E402

# a clock pair before every trace of the set (2017): their events land after its zero
CLOCK = {"unix_ns": 1_500_000_000_000_000_000, "perf_ns": 0}


def main() -> None:
    traces = (
        Path(sys.argv[1])
        if len(sys.argv) > 1
        else Path(__file__).resolve().parents[2] / "shared" / "gpu_traces"
    )
    with tempfile.TemporaryDirectory() as tmp:
        tables = load(RunBuilder(duration_s=1.0).write(Path(tmp) / "run")).tables
    limits = TimelineLimits.unbounded()
    bare = timeline(tables, root_pid=1, limits=limits)
    perfetto0, chrome0 = len(PerfettoTrace(bare).render()), len(ChromeTrace(bare).render())
    print(f"{'trace':48s} {'events':>8s} {'perfetto B/event':>17s} {'chrome B/event':>15s}")
    for path in sorted(traces.glob("*.json*")):
        window = ({"file": path.name}, read_kineto(path))
        t = timeline(tables, root_pid=1, torch_windows=[window], clock=CLOCK, limits=limits)
        n = len(t.torch)
        perfetto = (len(PerfettoTrace(t).render()) - perfetto0) / n
        chrome = (len(ChromeTrace(t).render()) - chrome0) / n
        print(f"{path.name:48s} {n:8,d} {perfetto:17.1f} {chrome:15.1f}")


if __name__ == "__main__":
    main()
