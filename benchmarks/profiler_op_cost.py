"""What torch.profiler adds to each op of a model, beside what probe reads off the trace
(``analyzers.op_breakdown.profiler_op_cost_ns``: ``PAID_OVER_GAP`` times the median gap
between consecutive ops inside one C++ op) -- the source of that ratio.

Each model runs on this thread in turns, under a window opened from a second thread as
``probe run``'s is (``start_kineto_window``: ops with their input shapes), with this
thread's recording switched off and on in alternate turns
(``torch.autograd._enable_record_function``: the profiler stays on, this thread's ops
go unrecorded). What a turn's ops paid: the recorded turns' CPU time less the unrecorded
ones' (medians), over the ops a turn recorded. Printed beside the median gap between an
op's children in the same window and their ratio, for five models: a decoder generating
without and with a KV cache (``tests/torch_corpus/decoder.py``), the staged MLP
(``tests/torch_corpus/staged_mlp.py``), a small convnet, and a loop of three tiny ops.

    python benchmarks/profiler_op_cost.py [--rounds 2] [--turns 8]

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

import numpy as np

REPO = Path(__file__).resolve().parents[1]


def opened_elsewhere(start: Callable[[], Any]) -> Any:
    """A window opened on a thread of its own, as probe's session opens it."""
    opened: list[Any] = []
    opener = threading.Thread(target=lambda: opened.append(start()))
    opener.start()
    opener.join()
    return opened[0]


def models() -> dict[str, Callable[[], None]]:
    """name -> one turn of the model's work on the calling thread."""
    import torch
    from torch import nn

    sys.path.insert(0, str(REPO / "tests" / "torch_corpus"))
    argv, sys.argv = sys.argv, sys.argv[:1]  # staged_mlp reads its options on import
    try:
        import decoder
        import staged_mlp
    finally:
        sys.argv = argv
    model = decoder.built()  # one intra-op thread, as every model here
    prompts = [torch.randint(0, decoder.VOCAB, (1, decoder.PROMPT)) for _ in range(2)]
    layers = [(nn.Conv2d(8, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU()) for _ in range(4)]
    convnet = nn.Sequential(*[m for layer in layers for m in layer]).eval()
    image, a, b = torch.randn(1, 8, 16, 16), torch.randn(4), torch.randn(4)

    def generations(cache: bool) -> Callable[[], None]:
        def turn() -> None:
            for prompt in prompts:
                decoder.generate(model, prompt, cache)

        return turn

    def mlp() -> None:
        for _ in range(20):
            staged_mlp.postprocess(staged_mlp.infer(staged_mlp.preprocess(1)))

    def convnet_calls() -> None:
        with torch.inference_mode():
            for _ in range(30):
                convnet(image)

    def tiny() -> None:
        for _ in range(3000):
            (a + b).mul_(0.5).relu()

    return {
        "decoder": generations(False), "decoder_kv_cache": generations(True),
        "staged_mlp": mlp, "convnet": convnet_calls, "tiny_ops": tiny,
    }  # fmt: skip


def one_window(work: Callable[[], None], turns: int, path: Path) -> tuple[float, float, float]:
    """(paid ns an op, the trace's sibling gap ns, what probe reads as the cost an op)."""
    import torch

    from probe.analyzers.op_breakdown import PAID_OVER_GAP, profiler_op_cost_ns
    from probe.rundir.kineto import read_kineto
    from probe.rundir.schema import SPAN_RANGE_PREFIX
    from probe.samplers.torch_windows import start_kineto_window

    record = torch.autograd._enable_record_function

    def cpu_ns() -> int:
        started = time.thread_time_ns()
        work()
        return time.thread_time_ns() - started

    window = opened_elsewhere(start_kineto_window)
    off, on = [], []
    for _ in range(turns):
        record(False)
        try:
            off.append(cpu_ns())
        finally:
            record(True)
        on.append(cpu_ns())
    window.save(path)
    ops = read_kineto(path).tables["ops"]
    # probe's spans are recorded as ops (staged_mlp's stages): ranges, not ops a turn
    # recorded (the run's reader makes them ranges again)
    ours = ops["name"].astype(str).str.startswith(SPAN_RANGE_PREFIX)
    mine = ops[(ops["tid"] == threading.get_native_id()) & ~ours]
    paid = (statistics.median(on) - statistics.median(off)) / (len(mine) / turns)
    read = profiler_op_cost_ns(mine) or float("nan")
    return paid, read / PAID_OVER_GAP, read


def main() -> None:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--turns", type=int, default=8)
    args = p.parse_args()
    work = models()
    for turn in work.values():  # warm-up: first-call allocations
        turn()
    ratios = []
    print("ns an op: paid (recorded turns less unrecorded), the trace's gap, probe's reading")
    with tempfile.TemporaryDirectory() as tmp:
        for k in range(args.rounds):
            for name, turn in work.items():
                paid, gap, read = one_window(turn, args.turns, Path(tmp) / f"{name}-{k}.json")
                ratios.append(paid / gap)
                print(
                    f"  {name:17} paid {paid:6,.0f}  gap {gap:6,.0f}  paid/gap {paid / gap:4.2f}"
                    f"  read {read:6,.0f} ({read / paid:4.2f} of paid)",
                    flush=True,
                )
    print(f"paid over gap: {min(ratios):.2f}-{max(ratios):.2f}, median {np.median(ratios):.2f}")


if __name__ == "__main__":
    main()
