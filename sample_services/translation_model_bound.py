"""Translation with a transformer-style seq2seq model in numpy (model-bound, many small ops).

Each request "translates" one sentence of 24 tokens: an encoder (2 layers) and a greedy
decoder (2 layers, 24 generated tokens) with random FP32 weights, nothing downloaded. It
is written the way eager inference code often is: one sentence at a time, separate Q/K/V
products, a Python loop over the 4 attention heads, and the whole prefix recomputed at
every generated token. Thousands of small numpy calls per sentence keep the CPU busy in
the model stage (on a GPU the same shape of code is launch-bound: the kernels are too
small to fill it). On this CPU the matrix products dominate: a diagnosis should name
``generate`` as ``cpu``/``native`` (compute-bound in BLAS, one core busy of several) and
recommend one model instance per core (``multi_instance``).

``--fixed`` applies exactly that fix: two worker processes (one per core, BLAS pinned to
one thread each) behind a front end that keeps one request in flight per worker.
Measured on this machine class under ``probe run`` (160 sentences): ~50 sentences/s
default, ~83 fixed (1.7x). On 2026-11-27, four pairs under ``probe run`` realized
1.57-1.86x (median 1.64), three plain pairs 1.60-1.89x; the diagnosis of the default
runs predicted 1.80x (1.9x before the instances' shared caches were charged to both of
them, not to the second alone: ``Model.instance_efficiency``).
(Batching, a key/value cache and fused QKV products would go further; they change the
model code, and the profile alone cannot size their gain.)

    python sample_services/translation_model_bound.py [--requests N] [--fixed]
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np  # noqa: E402

import probe  # noqa: E402

VOCAB, D, HEADS, LAYERS, LENGTH, BATCH = 512, 128, 4, 2, 24, 16
DH = D // HEADS


def init_weights(seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)

    def w(*shape: int) -> np.ndarray:
        return (rng.standard_normal(shape) / np.sqrt(shape[0])).astype(np.float32)

    weights = {"embed": w(VOCAB, D), "out": w(D, VOCAB)}
    for part in ("enc", "dec"):
        for layer in range(LAYERS):
            p = f"{part}{layer}"
            weights.update(
                {
                    f"{p}.q": w(D, D),
                    f"{p}.k": w(D, D),
                    f"{p}.v": w(D, D),
                    f"{p}.o": w(D, D),
                    f"{p}.ff1": w(D, 4 * D),
                    f"{p}.ff2": w(4 * D, D),
                }
            )
            weights[f"{p}.qkv"] = np.concatenate(
                [weights[f"{p}.q"], weights[f"{p}.k"], weights[f"{p}.v"]], axis=1
            )
    return weights


def softmax(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def norm(x: np.ndarray) -> np.ndarray:
    return (x - x.mean(axis=-1, keepdims=True)) / (x.std(axis=-1, keepdims=True) + 1e-5)


# -- as eager code is often written: one sentence, per-head loops, no cache -------------
def attention_naive(
    x: np.ndarray, memory: np.ndarray, wt: dict[str, np.ndarray], p: str
) -> np.ndarray:
    q, k, v = x @ wt[f"{p}.q"], memory @ wt[f"{p}.k"], memory @ wt[f"{p}.v"]
    heads = []
    for h in range(HEADS):
        s = slice(h * DH, (h + 1) * DH)
        heads.append(softmax(q[:, s] @ k[:, s].T / np.sqrt(DH)) @ v[:, s])
    return np.concatenate(heads, axis=1) @ wt[f"{p}.o"]


def layer_naive(x: np.ndarray, memory: np.ndarray, wt: dict[str, np.ndarray], p: str) -> np.ndarray:
    x = norm(x + attention_naive(x, memory, wt, p))
    return norm(x + np.maximum(x @ wt[f"{p}.ff1"], 0) @ wt[f"{p}.ff2"])


@probe.stage("encode")
def encode_naive(tokens: np.ndarray, wt: dict[str, np.ndarray]) -> np.ndarray:
    x = wt["embed"][tokens]
    for layer in range(LAYERS):
        x = layer_naive(x, x, wt, f"enc{layer}")
    return x


@probe.stage("generate")
def generate_naive(memory: np.ndarray, wt: dict[str, np.ndarray]) -> list[int]:
    out = [1]
    for _ in range(LENGTH):
        x = wt["embed"][np.array(out)]
        for layer in range(LAYERS):  # the whole prefix again, every token
            x = layer_naive(x, np.concatenate([memory, x]), wt, f"dec{layer}")
        out.append(int((x[-1] @ wt["out"]).argmax()))
    return out[1:]


# -- the fix: one worker process per core ----------------------------------------------
_worker_weights: dict[str, np.ndarray] = {}


def _start_worker() -> None:
    _worker_weights.update(init_weights())


def translate(sentence: np.ndarray) -> list[int]:
    return generate_naive(encode_naive(sentence, _worker_weights), _worker_weights)


def serve_multi_instance(sentences: np.ndarray, workers: int) -> None:
    """One model instance per core: a process each, fed by one front-end thread each."""
    context = multiprocessing.get_context("fork")
    with (
        ProcessPoolExecutor(workers, mp_context=context, initializer=_start_worker) as instances,
        ThreadPoolExecutor(workers, thread_name_prefix="frontend") as frontend,
    ):
        list(instances.map(_warm, range(workers)))  # instances loaded before traffic

        def handle(i: int) -> list[int]:
            with probe.request(id=f"sentence-{i}"):
                return instances.submit(translate, sentences[i]).result()

        list(frontend.map(handle, range(len(sentences))))


def _warm(_: int) -> int:
    return len(_worker_weights)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=320, help="sentences to translate")
    parser.add_argument(
        "--fixed", action="store_true", help="one worker process per core (multi-instance)"
    )
    args = parser.parse_args(argv)
    wt = init_weights()
    sentences = np.random.default_rng(1).integers(2, VOCAB, size=(args.requests, LENGTH))
    start = time.perf_counter()
    if args.fixed:
        serve_multi_instance(sentences, os.cpu_count() or 1)
    else:
        for i, sentence in enumerate(sentences):
            with probe.request(id=f"sentence-{i}"):
                generate_naive(encode_naive(sentence, wt), wt)
    wall = time.perf_counter() - start
    print(
        f"translated {args.requests} sentences in {wall:.2f} s: "
        f"{args.requests / wall:.1f} sentences/s",
        file=sys.stderr,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
