"""A small GPT-style decoder in PyTorch that generates text greedily, with or without a
key/value cache: the before/after pair for the KV-cache estimate (issue 15).

Without ``--kv-cache`` every generated token runs the whole model on the whole sequence so
far (prompt + tokens generated), the way a first implementation often does; with it, the
prompt runs once and each later step runs on the one new token against the cached keys
and values. Both produce the same tokens (``--check`` asserts it). Random weights, CPU,
nothing downloaded; one request = one prompt of ``PROMPT`` tokens, ``TOKENS`` generated.

    python tests/torch_corpus/decoder.py [--kv-cache] [--requests N] [--trace OUT.json]

Prints one JSON line: requests, seconds generating (perf_counter around the requests
only, after one warm-up request), tokens. ``--trace`` records the requests with
``torch.profiler`` (CPU ops with their input shapes) into a Kineto trace.
Truth, and how it was measured: ``decoder.truth.md`` beside this file.
"""

from __future__ import annotations

import argparse
import json
import time

import torch
from torch import nn

VOCAB, D, HEADS, LAYERS, PROMPT, TOKENS = 512, 128, 4, 2, 16, 24


class Block(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(D), nn.LayerNorm(D)
        self.qkv = nn.Linear(D, 3 * D)
        self.proj = nn.Linear(D, D)
        self.mlp = nn.Sequential(nn.Linear(D, 4 * D), nn.GELU(), nn.Linear(4 * D, D))

    def forward(
        self, x: torch.Tensor, cache: list[torch.Tensor] | None
    ) -> tuple[torch.Tensor, list[torch.Tensor]]:
        b, t, _ = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(D, dim=-1)
        q, k, v = (z.view(b, t, HEADS, D // HEADS).transpose(1, 2) for z in (q, k, v))
        if cache is not None:  # the keys and values of every earlier position
            k, v = torch.cat([cache[0], k], dim=2), torch.cat([cache[1], v], dim=2)
        past = k.shape[2] - t
        # causal over the whole sequence: position i sees positions <= past + i
        mask = torch.ones(t, k.shape[2], dtype=torch.bool).tril(diagonal=past)
        att = (q @ k.transpose(-2, -1)) / (D // HEADS) ** 0.5
        att = att.masked_fill(~mask, float("-inf")).softmax(dim=-1)
        y = (att @ v).transpose(1, 2).reshape(b, t, D)
        x = x + self.proj(y)
        return x + self.mlp(self.ln2(x)), [k, v]


class Decoder(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(VOCAB, D)
        self.pos = nn.Embedding(PROMPT + TOKENS, D)
        self.blocks = nn.ModuleList(Block() for _ in range(LAYERS))
        self.head = nn.Linear(D, VOCAB)

    def forward(
        self, ids: torch.Tensor, start: int, caches: list[list[torch.Tensor]] | None
    ) -> tuple[torch.Tensor, list[list[torch.Tensor]]]:
        x = self.embed(ids) + self.pos(torch.arange(start, start + ids.shape[1]))
        new = []
        for i, block in enumerate(self.blocks):
            x, kv = block(x, caches[i] if caches is not None else None)
            new.append(kv)
        return self.head(x[:, -1]), new


@torch.inference_mode()
def generate(model: Decoder, prompt: torch.Tensor, kv_cache: bool) -> list[int]:
    ids, out = prompt, []
    logits, caches = model(ids, 0, None)
    for step in range(TOKENS):
        token = logits.argmax(dim=-1, keepdim=True)
        out.append(int(token))
        if step == TOKENS - 1:
            break
        if kv_cache:
            logits, caches = model(token, PROMPT + step, caches)
        else:
            ids = torch.cat([ids, token], dim=1)
            logits, _ = model(ids, 0, None)
    return out


def built() -> Decoder:
    """The model every measurement of it uses: seed 0, one intra-op thread, eval mode."""
    torch.manual_seed(0)
    torch.set_num_threads(1)
    return Decoder().eval()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--kv-cache", action="store_true")
    p.add_argument("--requests", type=int, default=40)
    p.add_argument("--trace", help="record the requests with torch.profiler into this file")
    p.add_argument("--check", action="store_true", help="assert both ways give the same tokens")
    args = p.parse_args()
    model = built()
    prompts = [torch.randint(0, VOCAB, (1, PROMPT)) for _ in range(args.requests)]
    if args.check:
        for prompt in prompts[:5]:
            assert generate(model, prompt, True) == generate(model, prompt, False)
    generate(model, prompts[0], args.kv_cache)  # warm-up: first-call allocations
    profiler = None
    if args.trace:
        from torch.profiler import ProfilerActivity, profile

        profiler = profile(activities=[ProfilerActivity.CPU], record_shapes=True)
        profiler.__enter__()
    started = time.perf_counter()
    tokens = sum(len(generate(model, prompt, args.kv_cache)) for prompt in prompts)
    seconds = time.perf_counter() - started
    if profiler is not None:
        profiler.__exit__(None, None, None)
        profiler.export_chrome_trace(args.trace)
    print(json.dumps({"requests": args.requests, "seconds": seconds, "tokens": tokens}))


if __name__ == "__main__":
    main()
