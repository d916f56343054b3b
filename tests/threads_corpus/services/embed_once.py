"""A one-shot batch job, nothing decorated: it imports torch (and pandas, for its
output), embeds ``--sentences`` sentences with a small encoder (hashed tokens, a bag of
embeddings, a linear layer: ``embed``) in batches of 32, and writes the vectors' norms
with pandas. Run once per input file, the way a cron job or a pipeline step is: most of
its wall time is the imports, paid again by every run.

    python embed_once.py [--sentences 256] [--out PATH]

Truth, measured from outside before probe ran on it (2026-12-05): ``python -X importtime
embed_once.py``: torch 1.08 s, pandas 0.36 s (cumulative; 75% and 25% of the two);
plain runs (``/usr/bin/time``, three pairs) 1.78-2.17 s, and 1.94-2.03 s with ten times
the sentences (``--sentences 2560``): the work is a tenth of a second or two.
``embed_once.truth.json`` (``python tests/threads_corpus/measure.py embed_once``): 1.77 s,
the main thread on a CPU at 97% of the readings; py-spy: 74% of the on-CPU samples under
``_find_and_load`` (the imports), 76% under the script's ``<module>``; resident memory
climbs to 316 MB by 1.4 s as the modules load, then holds (``rss_mb``): no leak.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import zlib

import pandas as pd
import torch

DIM = 256
VOCAB = 4096


def sentence(n: int) -> str:
    words = "model latency batch token vector cache queue shard replica tensor".split()
    return " ".join(words[(n * k + k * k) % len(words)] for k in range(1, 24))


def tokens(text: str) -> list[int]:
    return [zlib.crc32(w.encode()) % VOCAB for w in text.split()]


def embed(encoder: torch.nn.Module, texts: list[str]) -> torch.Tensor:
    ids = [torch.tensor(tokens(t)) for t in texts]
    offsets = torch.tensor([0] + [len(i) for i in ids[:-1]]).cumsum(0)
    with torch.inference_mode():
        return encoder(torch.cat(ids), offsets)


class Encoder(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.bag = torch.nn.EmbeddingBag(VOCAB, DIM, mode="mean")
        self.proj = torch.nn.Linear(DIM, DIM)

    def forward(self, ids: torch.Tensor, offsets: torch.Tensor) -> torch.Tensor:
        return torch.tanh(self.proj(self.bag(ids, offsets)))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sentences", type=int, default=256)
    parser.add_argument("--out", default=os.path.join(tempfile.gettempdir(), "embed_once.csv"))
    args = parser.parse_args()
    torch.manual_seed(0)
    encoder = Encoder().eval()
    texts = [sentence(n) for n in range(args.sentences)]
    norms = []
    for start in range(0, len(texts), 32):
        norms.extend(embed(encoder, texts[start : start + 32]).norm(dim=1).tolist())
    pd.DataFrame({"sentence": range(len(norms)), "norm": norms}).to_csv(args.out, index=False)
    print(f"embedded {len(norms)} sentences into {args.out}")


if __name__ == "__main__":
    main()
