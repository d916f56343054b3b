"""A PyTorch CPU service loop in three decorated stages: preprocess (normalise a random
batch), infer (an MLP of residual blocks: by default six 256-wide, batch 16), postprocess
(softmax, argmax, to Python). Each loop is one ``probe.request``.

    python tests/torch_corpus/staged_mlp.py [--seconds 3] [--timings] [--graph]
        [--blocks 6] [--width 256] [--batch 16]

``--timings`` times each stage with its own ``time.perf_counter_ns()`` and prints the
medians (the truth in staged_mlp.truth.md; under ``probe run`` the spans journal measures
the same intervals). ``--graph`` runs the model as a frozen TorchScript graph
(``torch.jit.freeze(torch.jit.trace(...))``): the after of what probe's
``inference_runtime`` estimate predicts. ``--blocks/--width/--batch`` size the model: the
default is a few large ops (the ops hold the time), ``--blocks 16 --width 64 --batch 1``
many small ones (the Python between them does).
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

import probe

torch.set_num_threads(1)
torch.manual_seed(0)
ARGS = argparse.ArgumentParser(description=__doc__.splitlines()[0])
ARGS.add_argument("--seconds", type=float, default=3.0)
ARGS.add_argument("--timings", action="store_true", help="print each stage's median")
ARGS.add_argument("--graph", action="store_true", help="the model as a frozen graph")
ARGS.add_argument("--blocks", type=int, default=6)
ARGS.add_argument("--width", type=int, default=256)
ARGS.add_argument("--batch", type=int, default=16)
OPTIONS = ARGS.parse_args()


class Block(torch.nn.Module):
    """A residual MLP block: norm, widen, GELU, narrow."""

    def __init__(self, width: int) -> None:
        super().__init__()
        self.norm = torch.nn.LayerNorm(width)
        self.up = torch.nn.Linear(width, 2 * width)
        self.down = torch.nn.Linear(2 * width, width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.down(torch.nn.functional.gelu(self.up(self.norm(x))))


MODEL: torch.nn.Module = torch.nn.Sequential(
    *[Block(OPTIONS.width) for _ in range(OPTIONS.blocks)]
).eval()
if OPTIONS.graph:
    with torch.no_grad():
        example = torch.zeros(OPTIONS.batch, OPTIONS.width)
        MODEL = torch.jit.freeze(torch.jit.trace(MODEL, example))


@probe.stage
def preprocess(batch: int) -> torch.Tensor:
    x = torch.randn(batch, OPTIONS.width)
    return (x - x.mean()) / x.std()


@probe.stage
def infer(x: torch.Tensor) -> torch.Tensor:
    with torch.no_grad():
        return MODEL(x)


@probe.stage
def postprocess(y: torch.Tensor) -> list[int]:
    return y.softmax(-1).argmax(-1).tolist()


def main() -> None:
    args = OPTIONS
    took: dict[str, list[int]] = {"preprocess": [], "infer": [], "postprocess": []}

    def timed(name: str, fn, arg):  # type: ignore[no-untyped-def]
        t0 = time.perf_counter_ns()
        out = fn(arg)
        took[name].append(time.perf_counter_ns() - t0)
        return out

    deadline = time.monotonic() + args.seconds
    requests = 0
    while time.monotonic() < deadline:
        with probe.request():
            x = timed("preprocess", preprocess, args.batch)
            y = timed("infer", infer, x)
            timed("postprocess", postprocess, y)
        requests += 1
    print(f"requests {requests}, {args.seconds / requests * 1e6:.1f} us a request")
    if args.timings:
        for name, values in took.items():
            print(f"{name} median {statistics.median(values) / 1e3:.1f} us")


if __name__ == "__main__":
    main()
