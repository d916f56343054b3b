"""A PyTorch CPU service loop in three decorated stages: preprocess (normalise a random
batch), infer (an MLP of six 256-wide linear layers, batch 16), postprocess (softmax,
argmax, to Python). Each loop is one ``probe.request``.

    python tests/torch_corpus/staged_mlp.py [--seconds 3] [--timings]

``--timings`` times each stage with its own ``time.perf_counter_ns()`` and prints the
medians (the truth in staged_mlp.truth.md; under ``probe run`` the spans journal measures
the same intervals).
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

import probe

torch.set_num_threads(1)
torch.manual_seed(0)
MODEL = torch.nn.Sequential(*[torch.nn.Linear(256, 256) for _ in range(6)]).eval()


@probe.stage
def preprocess(batch: int) -> torch.Tensor:
    x = torch.randn(batch, 256)
    return (x - x.mean()) / x.std()


@probe.stage
def infer(x: torch.Tensor) -> torch.Tensor:
    with torch.no_grad():
        return MODEL(x)


@probe.stage
def postprocess(y: torch.Tensor) -> list[int]:
    return y.softmax(-1).argmax(-1).tolist()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seconds", type=float, default=3.0)
    p.add_argument("--timings", action="store_true", help="print each stage's median")
    args = p.parse_args()
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
            x = timed("preprocess", preprocess, 16)
            y = timed("infer", infer, x)
            timed("postprocess", postprocess, y)
        requests += 1
    print(f"requests {requests}")
    if args.timings:
        for name, values in took.items():
            print(f"{name} median {statistics.median(values) / 1e3:.1f} us")


if __name__ == "__main__":
    main()
