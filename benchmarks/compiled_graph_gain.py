"""What running a model as one compiled graph buys, against what probe's
``inference_runtime`` estimate says: the source of the range that estimate states.

Six small CPU models of the kinds a service runs (a convnet, a transformer encoder, an
embedding-bag recommender, an LSTM, a wide MLP at batch 64, a deep narrow MLP at batch
1), written before any was timed and none of them the test's ``staged_mlp``. For each:

1. ``probe run`` of a loop that calls the model in an ``@probe.stage`` (``infer``),
   eager; the estimate is the run's torch window's, read with no threshold (a figure
   under 1.25x is still a figure);
2. the realised speedup, unprofiled: eager and the frozen TorchScript graph
   (``torch.jit.freeze(torch.jit.trace(...))``) in one process, alternated turns of
   0.25 s, the median of the pairs' ratios (``tests/torch_corpus/staged_mlp.py
   --paired`` does the same; two processes differ by the host's drift).

It prints each model's estimate, realisation and their ratio (realised over estimated).

    python benchmarks/compiled_graph_gain.py [--models convnet,lstm] [--seconds 3] [--rounds 6]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import random
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

_SCRIPT = Path(sys.executable).parent / "probe"
PROBE = [str(_SCRIPT)] if _SCRIPT.is_file() else [sys.executable, "-m", "probe.cli"]
TURN_S = 0.25


def _models() -> dict[str, Callable[[], tuple[Any, Any]]]:
    """name -> a builder of (model in eval mode, an example input)."""
    import torch
    from torch import nn

    def convnet() -> tuple[Any, Any]:
        layers: list[nn.Module] = []
        for _ in range(4):
            layers += [nn.Conv2d(16, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU()]
        model = nn.Sequential(*layers, nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(16, 10))
        return model, torch.randn(1, 16, 32, 32)

    def transformer() -> tuple[Any, Any]:
        layer = nn.TransformerEncoderLayer(64, 4, dim_feedforward=128, batch_first=True)
        return nn.TransformerEncoder(layer, 2, enable_nested_tensor=False), torch.randn(1, 16, 64)

    class Recommender(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.bag = nn.EmbeddingBag(1000, 32, mode="mean")
            self.mlp = nn.Sequential(
                nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 1)
            )

        def forward(self, ids: torch.Tensor) -> torch.Tensor:
            return torch.sigmoid(self.mlp(self.bag(ids)))

    class Sequence(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.lstm = nn.LSTM(32, 64, num_layers=2, batch_first=True)
            self.head = nn.Linear(64, 8)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            out, _ = self.lstm(x)
            return self.head(out[:, -1])

    def wide_mlp() -> tuple[Any, Any]:
        layers: list[nn.Module] = []
        for _ in range(4):
            layers += [nn.Linear(512, 512), nn.ReLU()]
        return nn.Sequential(*layers), torch.randn(64, 512)

    def deep_narrow() -> tuple[Any, Any]:
        layers: list[nn.Module] = []
        for _ in range(24):
            layers += [nn.Linear(32, 32), nn.Tanh()]
        return nn.Sequential(*layers), torch.randn(1, 32)

    return {
        "convnet": convnet,
        "transformer": transformer,
        "recommender": lambda: (Recommender(), torch.randint(0, 1000, (8, 20))),
        "lstm": lambda: (Sequence(), torch.randn(1, 12, 32)),
        "wide_mlp": wide_mlp,
        "deep_narrow": deep_narrow,
    }


def _build(name: str) -> tuple[Any, Any, Any]:
    """(eager model, frozen graph, example), one torch thread, seeded."""
    import torch

    torch.set_num_threads(1)
    torch.manual_seed(0)
    model, example = _models()[name]()
    model = model.eval()
    with torch.no_grad():
        graph = torch.jit.freeze(torch.jit.trace(model, example))
    return model, graph, example


def serve(name: str, seconds: float) -> None:
    """The service probe runs: the eager model in an ``infer`` stage, for ``seconds``."""
    import torch

    import probe

    model, _, example = _build(name)

    @probe.stage
    def infer(x: Any) -> Any:
        with torch.no_grad():
            return model(x)

    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        with probe.request():
            infer(example)


def paired(name: str, seconds: float) -> float:
    """Eager over graph: the median ratio of alternated turns' time a call."""
    import torch

    model, graph, example = _build(name)

    def per_call(m: Any, turn: float) -> float:
        calls, deadline = 0, time.perf_counter() + turn
        with torch.no_grad():
            while time.perf_counter() < deadline:
                m(example)
                calls += 1
        return turn / calls

    for m in (model, graph):  # warm-up: the graph's profiling executor optimises here
        per_call(m, TURN_S)
    ratios = []
    for n in range(max(1, round(seconds / (2 * TURN_S)))):
        turns = [model, graph] if n % 2 == 0 else [graph, model]
        took = {id(m): per_call(m, TURN_S) for m in turns}
        ratios.append(took[id(model)] / took[id(graph)])
    return statistics.median(ratios)


def estimate(run_dir: Path) -> float | None:
    """The run's torch window's inference_runtime estimate, with no threshold."""
    from probe.analyzers.trace_diagnosis import diagnose_trace
    from probe.analyzers.trace_fixes import TRACE_MODEL
    from probe.rundir.reader import load

    model = dataclasses.replace(TRACE_MODEL, min_speedup=1.0)
    best = None
    for _, trace in load(run_dir).torch_windows:
        d = diagnose_trace(trace, model=model)
        n = len(trace.tables["ops"])
        if best is None or n > best[0]:
            best = (n, d)
    if best is None:
        return None
    found = [r for r in best[1].recommendations if r.id == "inference_runtime"]
    return found[0].estimated_speedup if found else None


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--models", default="all")
    p.add_argument("--seconds", type=float, default=4.0, help="each probe run's loop")
    p.add_argument("--rounds", type=int, default=1, help="every model this many times")
    p.add_argument("--serve", help=argparse.SUPPRESS)
    p.add_argument("--paired", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.serve:
        serve(args.serve, args.seconds)
        return 0
    if args.paired:
        print(json.dumps(paired(args.paired, args.seconds)))
        return 0
    names = list(_models()) if args.models == "all" else args.models.split(",")
    ratios: dict[str, list[float]] = {name: [] for name in names}
    with tempfile.TemporaryDirectory() as tmp:
        for k in range(args.rounds):
            for name in random.sample(names, len(names)):  # the host's drift, spread
                ratios[name].append(_one(Path(tmp) / f"{name}-{k}", name, args.seconds))
    for name, each in ratios.items():
        each[:] = [r for r in each if math.isfinite(r)]  # a run with no estimate: nan
        if len(each) > 1:
            print(f"{name:12} ratios {min(each):.2f}-{max(each):.2f} over {len(each)} runs")
    every = [r for each in ratios.values() for r in each]
    print(f"realised over estimated: {min(every):.2f}-{max(every):.2f}")
    return 0


def _one(run_dir: Path, name: str, seconds: float) -> float:
    """One model: its estimate under ``probe run``, its realisation paired; their ratio."""
    me = str(Path(__file__).resolve())
    subprocess.run(
        [*PROBE, "run", "-o", str(run_dir), "--no-report", me, "--serve", name,
         "--seconds", str(seconds)],
        check=True, capture_output=True,
    )  # fmt: skip
    said = estimate(run_dir)
    done = subprocess.run(
        [sys.executable, me, "--paired", name, "--seconds", "6"],
        check=True, capture_output=True, text=True,
    )  # fmt: skip
    realised = float(done.stdout.strip())
    ratio = realised / said if said else float("nan")
    print(f"{name:12} estimated {said or float('nan'):.2f}x, realised {realised:.2f}x, "
          f"ratio {ratio:.2f}", flush=True)  # fmt: skip
    return ratio


if __name__ == "__main__":
    sys.exit(main())
