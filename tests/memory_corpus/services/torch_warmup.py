"""A small PyTorch model served on the CPU: memory rises while torch imports and the
first batches warm its allocator, then stays flat. Undecorated. Not a leak.

Truth: no leak (the same tensors every request); over a 4x longer run RSS stays flat
after the first seconds (record.py --verify). Needs torch (skipped when recording without).
"""

from __future__ import annotations

import argparse
import time

import torch


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--seconds", type=float, default=12.0)
    args = p.parse_args()
    torch.set_num_threads(1)
    model = torch.nn.Sequential(
        torch.nn.Linear(256, 512), torch.nn.ReLU(), torch.nn.Linear(512, 16)
    ).eval()
    end = time.monotonic() + args.seconds
    with torch.inference_mode():
        while time.monotonic() < end:
            x = torch.randn(32, 256)
            model(x).softmax(-1).argmax(-1).tolist()


if __name__ == "__main__":
    main()
