"""How far stack samples drift toward GIL-releasing calls, per GIL switch interval.

Runs ``sample_services/tagging_cpu_bound.py`` under ``probe run`` at several
``--switch-interval`` values and compares, for its ``model`` stage (a short numpy call
that releases the GIL, between long pure-Python post-processing), the share of on-CPU
time the stack samples charge to it with the share its spans measure directly. A
sampler that waits for the GIL catches the thread at its GIL-releasing calls more often
than their real share: the ratio of the two shares is the bias (1.0 = none).

    python benchmarks/sampling_bias.py [--requests 300]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from probe.analyzers.attribution import attribute
from probe.rundir import load

SAMPLE = Path(__file__).resolve().parents[1] / "sample_services" / "tagging_cpu_bound.py"


def shares(run_dir: Path) -> tuple[float, float]:
    run = load(run_dir)
    spans = run.spans
    dur = spans["end_ns"] - spans["start_ns"]
    stages = dur[spans["category"] == "stage"].groupby(spans["name"]).sum()
    span_share = stages.get("model", 0) / stages.sum()
    charged = attribute(run.samples).merge(run.stacks, on="stack_id")
    frames = run.frames.set_index("frame_id")["function"]
    leaf = charged["frame_ids"].str.rsplit(";", n=1).str[-1].astype(int).map(frames)
    sample_share = charged.loc[leaf == "model", "cpu_ns"].sum() / charged["cpu_ns"].sum()
    return float(sample_share), float(span_share)


def main() -> None:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--requests", type=int, default=300)
    p.add_argument("--intervals", default="0.005,0.001,0.0002")
    args = p.parse_args()
    print("switch interval   model share: samples / spans   bias")
    with tempfile.TemporaryDirectory() as tmp:
        for k, interval in enumerate(args.intervals.split(",")):
            out = Path(tmp) / f"run{k}"
            subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "probe.cli",
                    "run",
                    "--no-report",
                    "--out",
                    str(out),
                    "--switch-interval",
                    interval,
                    str(SAMPLE),
                    "--requests",
                    str(args.requests),
                ],
                check=True,
                capture_output=True,
                env=dict(os.environ, OPENBLAS_NUM_THREADS="1"),
            )
            sample_share, span_share = shares(out)
            print(
                f"  {float(interval) * 1000:6.1f} ms        {sample_share:6.1%} / "
                f"{span_share:6.1%}           {sample_share / span_share:5.1f}x",
                flush=True,
            )


if __name__ == "__main__":
    main()
