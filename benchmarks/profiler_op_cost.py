"""What torch.profiler adds to each op of a real model, beside what probe's calibration
says it adds (issue 15: why the KV-cache estimate runs low).

A window of ``probe run`` measures the profiler's cost per op as it opens
(``probe.samplers.torch_windows._paired_added_ns``: ``tensor.split(1)``, the least of 12
calls with the thread's recording on less the least of 12 with it off, alternated, the
profiler on), and the trace's reader takes that cost off every op
(``op_cost_ns``). Here, on ``tests/torch_corpus/decoder.py``'s generation without a KV
cache (one thread): the generation's CPU time plain, then under a window, over the ops the
window recorded a generation -- the cost its ops really paid -- printed beside the
calibration's figure (the window opened from a second thread, as probe's is: its
calibration ops are that thread's, counted apart), in ``--rounds`` rounds of
``--generations`` generations.

    python benchmarks/profiler_op_cost.py [--rounds 3] [--generations 4]

Needs torch (``pip install '.[torch]'``).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]


def opened_elsewhere(start: Callable[[], Any]) -> tuple[Any, threading.Thread]:
    """A window opened on a thread of its own, and that thread."""
    opened: list[Any] = []
    opener = threading.Thread(target=lambda: opened.append(start()))
    opener.start()
    opener.join()
    return opened[0], opener


def main() -> None:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--generations", type=int, default=4)
    args = p.parse_args()
    import torch

    from probe.rundir.kineto import read_kineto
    from probe.rundir.reader import calibrated_op_cost_ns
    from probe.samplers.torch_windows import start_kineto_window

    sys.path.insert(0, str(REPO / "tests" / "torch_corpus"))
    import decoder

    model = decoder.built()
    prompt = torch.randint(0, decoder.VOCAB, (1, decoder.PROMPT))

    def generation_cpu_ns(n: int) -> float:
        times = []
        for _ in range(n):
            started = time.thread_time_ns()
            decoder.generate(model, prompt, False)
            times.append(time.thread_time_ns() - started)
        return statistics.median(times)

    generation_cpu_ns(2)  # warm-up
    me = threading.get_native_id()
    print(f"decoder, {args.generations} generations a window; ns an op:")
    with tempfile.TemporaryDirectory() as tmp:
        for k in range(args.rounds):
            plain = generation_cpu_ns(args.generations)
            window, opener = opened_elsewhere(start_kineto_window)
            profiled = generation_cpu_ns(args.generations)
            path = Path(tmp) / f"w{k}.json"
            window.save(path)
            ops = read_kineto(path).tables["ops"]
            per_generation = int((ops["tid"] == me).sum()) / args.generations
            calibration_ops = int((ops["tid"] == opener.native_id).sum())
            paid = (profiled - plain) / per_generation
            calibrated = calibrated_op_cost_ns(
                window.calibration_calls, window.added_ns_per_call, calibration_ops
            ) or float("nan")
            print(
                f"  round {k + 1}: a generation {plain / 1e6:.1f} ms plain, "
                f"{profiled / 1e6:.1f} ms in the window ({per_generation:,.0f} ops): "
                f"paid {paid:,.0f}, calibrated {calibrated:,.0f} ({paid / calibrated:.1f}x)",
                flush=True,
            )


if __name__ == "__main__":
    main()
