"""A batch classifier that serves its requests from a thread pool, each request a forward
pass of a small torch MLP on CPU (``classify``): the common "model in a thread pool"
shape. torch gives up the GIL inside its ops, so the pool's threads run the model at
once, and each calling thread gets torch's intra-op threads of its own (``--workers``
pool threads, each with ``torch.get_num_threads()`` intra-op threads, on 2 cores).

Truth, measured from outside: ``classify_threads.truth.json``
(``python tests/threads_corpus/measure.py classify_threads``) and plain pairs of the
variants below (see the truth's ``variants``).

    python classify_threads.py [--requests 2400] [--workers 8] [--torch-threads N]
"""

from __future__ import annotations

import argparse
from concurrent.futures import ThreadPoolExecutor

import torch

LABELS = [f"label{i}" for i in range(16)]


def build_model() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(
        torch.nn.Linear(256, 1024),
        torch.nn.GELU(),
        torch.nn.Linear(1024, 1024),
        torch.nn.GELU(),
        torch.nn.Linear(1024, len(LABELS)),
    ).eval()


def make_batch(request_id: int) -> torch.Tensor:
    generator = torch.Generator().manual_seed(request_id)
    return torch.randn(32, 256, generator=generator)


def classify(model: torch.nn.Module, request_id: int) -> list[str]:
    batch = make_batch(request_id)
    with torch.inference_mode():
        logits = model(batch)
    best = logits.argmax(dim=1).tolist()
    return [LABELS[i] for i in best]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--requests", type=int, default=2400)
    parser.add_argument("--workers", type=int, default=8)
    parser.add_argument("--torch-threads", type=int, default=0, help="0: torch's default")
    args = parser.parse_args()
    if args.torch_threads:
        torch.set_num_threads(args.torch_threads)
    model = build_model()
    with ThreadPoolExecutor(max_workers=args.workers) as pool:
        results = list(pool.map(lambda i: classify(model, i), range(args.requests)))
    print(sum(len(r) for r in results), torch.get_num_threads())


if __name__ == "__main__":
    main()
