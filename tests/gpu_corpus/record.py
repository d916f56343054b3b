"""Records the GPU corpus: Kineto traces of small PyTorch inference workloads, each as a
before/after pair of one optimisation, with the realised speedup of each pair measured
without the profiler, in the same process (issue 15; how they were made: README.md).

    python tests/gpu_corpus/record.py --out DIR [--device cuda] [--quick]

Writes ``DIR/<case>.json.gz`` (torch.profiler's Kineto trace of ``STEPS_TRACED`` steps
after warm-up, each step a ``ProfilerStep#N`` range) and ``DIR/truth.json``: for each
pair, the median time a step of each side and the median of the ratios of alternating
blocks of steps (before / after), timed by the host clock with the device synchronised
after every step, no profiler on; plus the GPU, driver and torch it ran on. ``--device
cpu --quick`` runs the same code on a CPU (the CUDA-only cases are skipped): a check of
the script itself, not data.
"""

from __future__ import annotations

import argparse
import gzip
import json
import math
import os
import platform
import shutil
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from torch import nn
from torch.nn import functional as F
from torch.profiler import ProfilerActivity, profile, schedule

STEPS_TRACED = 3
# alternating blocks of steps, before then after (after first in odd blocks): the ratio
# of each pair of blocks, whose median is the realised speedup (the host and the GPU's
# clocks drift between two processes timed one after the other)
BLOCKS, BLOCK_STEPS = 7, 10
Step = Callable[[], Any]


class Attention(nn.Module):
    def __init__(self, d: int, heads: int, fused: bool) -> None:
        super().__init__()
        self.heads, self.fused = heads, fused
        self.qkv, self.out = nn.Linear(d, 3 * d), nn.Linear(d, d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        q, k, v = self.qkv(x).split(d, dim=-1)
        q, k, v = (z.view(b, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
        if self.fused:  # SDPA: flash / memory-efficient kernels where the GPU has them
            y = F.scaled_dot_product_attention(q, k, v)
        else:  # softmax(QK^T / sqrt(d))V, op by op
            att = (q @ k.transpose(-2, -1)) / math.sqrt(d // self.heads)
            y = att.softmax(dim=-1) @ v
        return self.out(y.transpose(1, 2).reshape(b, t, d))


class Block(nn.Module):
    def __init__(self, d: int, heads: int, fused: bool) -> None:
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.attn = Attention(d, heads, fused)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class Encoder(nn.Module):
    """A BERT-sized-down encoder: token embedding, ``layers`` blocks, a classifier."""

    def __init__(self, d: int = 768, heads: int = 12, layers: int = 4, fused: bool = False):
        super().__init__()
        self.embed = nn.Embedding(8192, d)
        self.blocks = nn.Sequential(*[Block(d, heads, fused) for _ in range(layers)])
        self.head = nn.Linear(d, 16)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.head(self.blocks(self.embed(ids)).mean(dim=1))


def built(device: str, dtype: torch.dtype = torch.float32, fused: bool = False) -> Encoder:
    torch.manual_seed(0)
    return Encoder(fused=fused).to(device=device, dtype=dtype).eval()


def sync(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


# ---- the cases: each a function of the device returning one step (a callable)


def encoder_step(device: str, batch: int, seq: int, dtype: torch.dtype, fused: bool) -> Step:
    model = built(device, dtype, fused)
    ids = torch.randint(0, 8192, (batch, seq), device=device)

    def step() -> Any:
        with torch.inference_mode():
            return model(ids).argmax(-1).tolist()  # the result to the host: a sync

    return step


def compiled_step(device: str, batch: int, seq: int) -> Step:
    model = torch.compile(built(device, torch.bfloat16, fused=True))
    ids = torch.randint(0, 8192, (batch, seq), device=device)

    def step() -> Any:
        with torch.inference_mode():
            return model(ids).argmax(-1).tolist()

    return step


def graph_step(device: str, batch: int, seq: int) -> Step:
    """The batch-1 encoder captured once into a CUDA graph and replayed each step."""
    model = built(device)
    ids = torch.randint(0, 8192, (batch, seq), device=device)
    with torch.inference_mode():
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(3):  # warm-up on a side stream, as torch's docs do
                model(ids)
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            out = model(ids)

    def step() -> Any:
        # the graph reads ``ids`` where it was at capture: held here, or its memory is
        # reused and the replay reads another tensor's bytes as token ids
        graph.replay()
        assert ids.is_cuda
        return out.argmax(-1).tolist()

    return step


def copy_step(device: str, pinned: bool) -> Step:
    """A batch of images made on the host each step, copied to the GPU and classified
    by a small conv net: pageable and blocking, or pinned and non-blocking."""
    torch.manual_seed(0)
    net = nn.Sequential(
        nn.Conv2d(3, 16, 3, stride=2), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
        nn.Linear(16, 10),
    ).to(device).eval()  # fmt: skip
    host = torch.rand(64, 3, 224, 224)  # 38.5 MB in FP32
    if pinned:
        host = host.pin_memory()

    def step() -> Any:
        with torch.inference_mode():
            x = host.to(device, non_blocking=pinned)
            return net(x).argmax(-1).tolist()

    return step


class Decoded(torch.utils.data.Dataset):
    """Images 'decoded' on the CPU: a few ms of host work an item."""

    def __len__(self) -> int:
        return 1 << 20

    def __getitem__(self, i: int) -> torch.Tensor:
        g = torch.Generator().manual_seed(i)
        x = torch.rand(3, 128, 128, generator=g)
        for _ in range(4):  # resize-and-blur stand-in: real CPU work, not a sleep
            x = F.avg_pool2d(F.interpolate(x[None], scale_factor=2.0), 2)[0]
        return (x - x.mean()) / x.std()


def loader_step(device: str, workers: int) -> Step:
    torch.manual_seed(0)
    net = nn.Sequential(
        nn.Conv2d(3, 64, 3, padding=1), nn.ReLU(), nn.Conv2d(64, 64, 3, padding=1), nn.ReLU(),
        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(64, 10),
    ).to(device).eval()  # fmt: skip
    loader = torch.utils.data.DataLoader(
        Decoded(), batch_size=16, num_workers=workers, pin_memory=device == "cuda",
        persistent_workers=workers > 0, prefetch_factor=4 if workers else None,
    )  # fmt: skip
    batches = iter(loader)

    def step() -> Any:
        x = next(batches).to(device, non_blocking=True)
        with torch.inference_mode():
            return net(x).argmax(-1).tolist()

    return step


class Decoder(nn.Module):
    """tests/torch_corpus/decoder.py's GPT-style decoder, on any device."""

    def __init__(self, d: int = 256, heads: int = 4, layers: int = 4) -> None:
        super().__init__()
        self.d, self.heads = d, heads
        self.embed, self.pos = nn.Embedding(512, d), nn.Embedding(128, d)
        self.qkv = nn.ModuleList(nn.Linear(d, 3 * d) for _ in range(layers))
        self.mlp = nn.ModuleList(
            nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))
            for _ in range(layers)
        )
        self.head = nn.Linear(d, 512)

    def forward(self, ids: torch.Tensor, start: int, caches: list | None) -> tuple:
        b, t = ids.shape
        pos = torch.arange(start, start + t, device=ids.device)
        x, new = self.embed(ids) + self.pos(pos), []
        for i, (qkv, mlp) in enumerate(zip(self.qkv, self.mlp, strict=True)):
            q, k, v = qkv(x).split(self.d, dim=-1)
            q, k, v = (z.view(b, t, self.heads, -1).transpose(1, 2) for z in (q, k, v))
            if caches is not None:
                k, v = torch.cat([caches[i][0], k], 2), torch.cat([caches[i][1], v], 2)
            new.append([k, v])
            y = F.scaled_dot_product_attention(q, k, v, is_causal=caches is None)
            x = x + y.transpose(1, 2).reshape(b, t, self.d)
            x = x + mlp(x)
        return self.head(x[:, -1]), new


def decoder_step(device: str, kv_cache: bool, prompt: int = 32, tokens: int = 32) -> Step:
    torch.manual_seed(0)
    model = Decoder().to(device).eval()
    first = torch.randint(0, 512, (1, prompt), device=device)

    def step() -> Any:
        with torch.inference_mode():
            ids, out = first, []
            logits, caches = model(ids, 0, None)
            for n in range(tokens):
                token = logits.argmax(-1, keepdim=True)
                out.append(int(token))  # each token to the host: a sync a token
                if kv_cache:
                    logits, caches = model(token, prompt + n, caches)
                else:
                    ids = torch.cat([ids, token], dim=1)
                    logits, _ = model(ids, 0, None)
            return out

    return step


def cases(device: str, quick: bool) -> dict[str, Callable[[], Step]]:
    """Name -> how to build it. Batch 1 x 128 tokens: small kernels (launch-bound);
    batch 32 x 256 tokens: matrix work that fills the GPU."""
    big = (4, 64) if quick else (32, 256)
    out: dict[str, Callable[[], Step]] = {
        "enc_b1_fp32": lambda: encoder_step(device, 1, 128, torch.float32, False),
        "enc_b32_fp32": lambda: encoder_step(device, *big, torch.float32, False),
        "enc_b32_bf16": lambda: encoder_step(device, *big, torch.bfloat16, False),
        "enc_b32_bf16_sdpa": lambda: encoder_step(device, *big, torch.bfloat16, True),
        # longer sequences, where attention holds more of the time (4 x 1024 tokens)
        "enc_b4_t1024_bf16": lambda: encoder_step(device, 4, 1024, torch.bfloat16, False),
        "enc_b4_t1024_bf16_sdpa": lambda: encoder_step(device, 4, 1024, torch.bfloat16, True),
        # written after the host-side fused-attention estimate, to check it on cases it
        # was not made on: from launch-bound (1 x 512) to the GPU's limit (16 x 512)
        **{
            f"enc_b{b}_t{t}_bf16{sdpa}": (
                lambda b=b, t=t, fused=bool(sdpa): encoder_step(device, b, t, torch.bfloat16, fused)
            )
            for b, t in ((1, 512), (2, 2048), (16, 512))
            for sdpa in ("", "_sdpa")
        },
        "loader_w0": lambda: loader_step(device, 0),
        "loader_w4": lambda: loader_step(device, 4),
        "decoder_nokv": lambda: decoder_step(device, False),
        "decoder_kv": lambda: decoder_step(device, True),
    }
    if device == "cuda":
        out["enc_b1_fp32_graph"] = lambda: graph_step(device, 1, 128)
        out["enc_b32_tf32"] = lambda: tf32(encoder_step(device, *big, torch.float32, False))
        out["enc_b32_bf16_compiled"] = lambda: compiled_step(device, *big)
        out["copy_pageable"] = lambda: copy_step(device, False)
        out["copy_pinned"] = lambda: copy_step(device, True)
    return out


def tf32(step: Step) -> Step:
    """The same step with TF32 allowed for FP32 matrix products (torch's default is off
    for matmul since 1.12)."""

    def on() -> Any:
        before = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
        torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = True
        try:
            return step()
        finally:
            torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = before

    return on


# before -> after: what each pair's realised speedup is the truth of
PAIRS = {
    "cuda_graphs": ("enc_b1_fp32", "enc_b1_fp32_graph"),
    "low_precision_from_fp32": ("enc_b32_fp32", "enc_b32_bf16"),
    "low_precision_from_tf32": ("enc_b32_tf32", "enc_b32_bf16"),
    "fused_attention": ("enc_b32_bf16", "enc_b32_bf16_sdpa"),
    "fused_attention_long": ("enc_b4_t1024_bf16", "enc_b4_t1024_bf16_sdpa"),
    "fused_attention_b1_t512": ("enc_b1_t512_bf16", "enc_b1_t512_bf16_sdpa"),
    "fused_attention_b2_t2048": ("enc_b2_t2048_bf16", "enc_b2_t2048_bf16_sdpa"),
    "fused_attention_b16_t512": ("enc_b16_t512_bf16", "enc_b16_t512_bf16_sdpa"),
    "fusion_compile": ("enc_b32_bf16_sdpa", "enc_b32_bf16_compiled"),
    "pinned_copies": ("copy_pageable", "copy_pinned"),
    "dataloader_workers": ("loader_w0", "loader_w4"),
    "kv_cache": ("decoder_nokv", "decoder_kv"),
}


def trace(step: Step, device: str, path: Path) -> None:
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device == "cuda" else [])
    raw = path.with_suffix("")  # x.json.gz -> x.json
    with profile(
        activities=activities,
        schedule=schedule(wait=0, warmup=1, active=STEPS_TRACED, repeat=1),
        on_trace_ready=lambda done: done.export_chrome_trace(str(raw)),
        record_shapes=True,
    ) as prof:
        for _ in range(1 + STEPS_TRACED):
            step()
            prof.step()
    with open(raw, "rb") as src, gzip.open(path, "wb", compresslevel=9) as dst:
        shutil.copyfileobj(src, dst)
    raw.unlink()


# steps run untimed at the start of each block of a pair, where a side keeps a queue that
# fills while the other side runs: the 4 loader workers prefetch 4 x 4 = 16 batches
# (prefetch_factor 4), which the block's first steps would take from the queue instead of
# at the pace the workers sustain (recorded 2026-11-27 without it: 20.8x, its blocks
# 18.7-44.6x)
SETTLE = {"dataloader_workers": 24}


def timed_block(step: Step, device: str, settle: int = 0) -> float:
    """Seconds a step, the median of one block's steps (device synchronised each), after
    ``settle`` steps untimed."""
    for _ in range(settle):
        step()
    sync(device)
    times = []
    for _ in range(BLOCK_STEPS):
        t0 = time.perf_counter()
        step()
        sync(device)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def realised(before: Step, after: Step, device: str, settle: int = 0) -> dict[str, Any]:
    b_s, a_s, ratios = [], [], []
    for n in range(BLOCKS):
        order = [(before, b_s), (after, a_s)]
        for step, into in order if n % 2 == 0 else order[::-1]:
            into.append(timed_block(step, device, settle))
        ratios.append(b_s[-1] / a_s[-1])
    return {
        "before_ms": round(statistics.median(b_s) * 1e3, 4),
        "after_ms": round(statistics.median(a_s) * 1e3, 4),
        "speedup": round(statistics.median(ratios), 4),
        "ratios": [round(r, 3) for r in ratios],
    }


def environment(device: str) -> dict[str, Any]:
    env: dict[str, Any] = {
        "torch": torch.__version__,
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "recorded": time.strftime("%Y-%m-%d"),
    }
    if device == "cuda":
        p = torch.cuda.get_device_properties(0)
        env |= {"gpu": p.name, "sms": p.multi_processor_count, "cuda": torch.version.cuda}
    return env


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--quick", action="store_true", help="small sizes: a check of the script")
    p.add_argument("--only", nargs="*", help="these cases only")
    args = p.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    builders = cases(args.device, args.quick)
    if args.only:
        builders = {k: v for k, v in builders.items() if k in args.only}
    steps: dict[str, Step] = {}
    truth: dict[str, Any] = {"environment": environment(args.device), "cases": {}, "pairs": {}}
    for name, build in builders.items():
        t0 = time.perf_counter()
        step = steps[name] = build()
        for _ in range(5):  # warm-up: allocations, autotuning, compilation, workers
            step()
        sync(args.device)
        warm_s = time.perf_counter() - t0
        trace(step, args.device, args.out / f"{name}.json.gz")
        truth["cases"][name] = {"warm_up_s": round(warm_s, 3), "steps_traced": STEPS_TRACED}
        print(f"{name}: warm {warm_s:.2f} s, traced", flush=True)
    for pair, (before, after) in PAIRS.items():
        if before in steps and after in steps:
            settle = SETTLE.get(pair, 0)
            truth["pairs"][pair] = {"before": before, "after": after, "settle": settle} | (
                realised(steps[before], steps[after], args.device, settle)
            )
            print(pair, truth["pairs"][pair], flush=True)
        # after each pair: a run cut short keeps what it measured
        (args.out / "truth.json").write_text(json.dumps(truth, indent=1) + "\n")


if __name__ == "__main__":
    main()
