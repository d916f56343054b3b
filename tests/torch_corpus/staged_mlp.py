"""A PyTorch CPU service loop in three decorated stages: preprocess (normalise a random
batch), infer (an MLP of residual blocks: by default six 256-wide, batch 16), postprocess
(softmax, argmax, to Python). Each loop is one ``probe.request``.

    python tests/torch_corpus/staged_mlp.py [--seconds 3 | --requests N] [--timings]
        [--graph | --paired] [--blocks 6] [--width 256] [--batch 16]

``--timings`` times each stage with its own ``time.perf_counter_ns()`` and prints the
medians (the truth in staged_mlp.truth.md; under ``probe run`` the spans journal measures
the same intervals). ``--graph`` runs the model as a frozen TorchScript graph
(``torch.jit.freeze(torch.jit.trace(...))``): the after of what probe's
``inference_runtime`` estimate predicts. ``--blocks/--width/--batch`` size the model: the
default is a few large ops (the ops hold the time), ``--blocks 16 --width 64 --batch 1``
many small ones (the Python between them does). ``--paired`` runs both, eager and the
frozen graph, in one process, alternating blocks of ``BLOCK_S`` of requests, and prints
each one's median time a request over its blocks and the median of the pairs' ratios:
the before/after in one run, where two processes timed one after the other differ by
the host's drift between them as much as by the change (see staged_mlp.truth.md).
``--requests N`` serves N requests instead of ``--seconds``: a loop whose length scales
with the host's speed as torch's import and the model's build do, so that its share of
the run is the same on a slow host as on a fast one. ``--collect-every N`` makes a full
collection (``gc.collect()``, a walk of torch's heap) inside every Nth ``infer`` call: a
collection the run times (``gc_pauses``) where a window reads the stage's Python between
ops. ``--trace OUT.json`` records the
requests with ``torch.profiler`` (CPU ops with their shapes, Python frames, each stage a
``record_function`` range: a trace recorded without probe), ``--gc-info`` with its
collections too (``record_python_gc_info``).
"""

from __future__ import annotations

import argparse
import gc
import itertools
import statistics
import time
from contextlib import nullcontext

import torch

import probe

torch.set_num_threads(1)
torch.manual_seed(0)
ARGS = argparse.ArgumentParser(description=__doc__.splitlines()[0])
ARGS.add_argument("--seconds", type=float, default=3.0)
ARGS.add_argument("--requests", type=int, default=0, help="serve N requests, not --seconds")
ARGS.add_argument("--timings", action="store_true", help="print each stage's median")
ARGS.add_argument("--graph", action="store_true", help="the model as a frozen graph")
ARGS.add_argument("--paired", action="store_true", help="eager and graph, alternated")
ARGS.add_argument("--blocks", type=int, default=6)
ARGS.add_argument("--width", type=int, default=256)
ARGS.add_argument("--batch", type=int, default=16)
ARGS.add_argument("--collect-every", type=int, default=0, help="gc.collect() in every Nth infer")
ARGS.add_argument("--trace", help="record the requests with torch.profiler into this file")
ARGS.add_argument("--gc-info", action="store_true", help="--trace records collections too")
OPTIONS = ARGS.parse_args()
INFER_CALLS = itertools.count(1)


class Block(torch.nn.Module):
    """A residual MLP block: norm, widen, GELU, narrow."""

    def __init__(self, width: int) -> None:
        super().__init__()
        self.norm = torch.nn.LayerNorm(width)
        self.up = torch.nn.Linear(width, 2 * width)
        self.down = torch.nn.Linear(2 * width, width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.down(torch.nn.functional.gelu(self.up(self.norm(x))))


EAGER: torch.nn.Module = torch.nn.Sequential(
    *[Block(OPTIONS.width) for _ in range(OPTIONS.blocks)]
).eval()
GRAPH: torch.nn.Module | None = None
if OPTIONS.graph or OPTIONS.paired:
    with torch.no_grad():
        example = torch.zeros(OPTIONS.batch, OPTIONS.width)
        GRAPH = torch.jit.freeze(torch.jit.trace(EAGER, example))
MODEL = GRAPH if OPTIONS.graph else EAGER
# --paired: each side's turn, long enough for many requests (~1 ms each), short enough
# that the host's drift over a pair of turns is small
BLOCK_S = 0.25


@probe.stage
def preprocess(batch: int) -> torch.Tensor:
    x = torch.randn(batch, OPTIONS.width)
    return (x - x.mean()) / x.std()


@probe.stage
def infer(x: torch.Tensor) -> torch.Tensor:
    with torch.profiler.record_function("infer") if OPTIONS.trace else nullcontext():
        if OPTIONS.collect_every and next(INFER_CALLS) % OPTIONS.collect_every == 0:
            gc.collect()
        with torch.no_grad():
            return MODEL(x)


@probe.stage
def postprocess(y: torch.Tensor) -> list[int]:
    return y.softmax(-1).argmax(-1).tolist()


def loop(seconds: float) -> int:
    """Requests for ``seconds``: how many ran."""
    deadline = time.monotonic() + seconds
    requests = 0
    while time.monotonic() < deadline:
        with probe.request():
            postprocess(infer(preprocess(OPTIONS.batch)))
        requests += 1
    return requests


def paired(seconds: float) -> None:
    """Eager and graph in alternate turns (eager first in odd pairs, graph first in
    even ones, so that neither always follows the other)."""
    global MODEL
    for model in (EAGER, GRAPH):  # warm-up: each side's first calls (the graph's
        MODEL = model  # optimisation by the profiling executor)
        loop(BLOCK_S)
    us: dict[str, list[float]] = {"eager": [], "graph": []}
    for n in range(max(1, round(seconds / (2 * BLOCK_S)))):
        order = [("eager", EAGER), ("graph", GRAPH)]
        for name, model in order if n % 2 == 0 else order[::-1]:
            MODEL = model
            us[name].append(BLOCK_S / loop(BLOCK_S) * 1e6)
    ratios = [e / g for e, g in zip(us["eager"], us["graph"], strict=True)]
    eager, graph = statistics.median(us["eager"]), statistics.median(us["graph"])
    print(f"eager {eager:.1f} us, graph {graph:.1f} us a request, "
          f"ratio {statistics.median(ratios):.3f} over {len(ratios)} pairs")  # fmt: skip
    print("ratios", " ".join(f"{r:.2f}" for r in ratios))


def _profiler(args: argparse.Namespace) -> torch.profiler.profile:
    """An open torch.profiler over the requests to come."""
    from torch._C._profiler import _ExperimentalConfig

    profiler = torch.profiler.profile(
        activities=[torch.profiler.ProfilerActivity.CPU], record_shapes=True, with_stack=True,
        experimental_config=_ExperimentalConfig(record_python_gc_info=args.gc_info),
    )  # fmt: skip
    profiler.__enter__()
    return profiler


def main() -> None:
    args = OPTIONS
    if args.paired:
        paired(args.seconds)
        return
    took: dict[str, list[int]] = {"preprocess": [], "infer": [], "postprocess": []}

    def timed(name: str, fn, arg):  # type: ignore[no-untyped-def]
        t0 = time.perf_counter_ns()
        out = fn(arg)
        took[name].append(time.perf_counter_ns() - t0)
        return out

    profiler = _profiler(args) if args.trace else None
    start = time.monotonic()
    deadline = start + args.seconds
    requests = 0
    while requests < args.requests if args.requests else time.monotonic() < deadline:
        with probe.request():
            x = timed("preprocess", preprocess, args.batch)
            y = timed("infer", infer, x)
            timed("postprocess", postprocess, y)
        requests += 1
    took_s = time.monotonic() - start
    if profiler is not None:
        profiler.__exit__(None, None, None)
        profiler.export_chrome_trace(args.trace)
    print(f"requests {requests}, {took_s / requests * 1e6:.1f} us a request")
    if args.timings:
        for name, values in took.items():
            print(f"{name} median {statistics.median(values) / 1e3:.1f} us")


if __name__ == "__main__":
    main()
