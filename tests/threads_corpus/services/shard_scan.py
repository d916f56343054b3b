"""A batch job: scans data shards on disk with direct I/O (O_DIRECT: no page cache, every
read goes to the device) and keeps a small digest of each block.

Its one bottleneck is the disk: ``read_block``'s ``os.preadv`` sits in the kernel
waiting for the device most of the run, while the digest (a 4-KB numpy sum a block) is
light. Nothing names the wait as disk I/O from Python alone: ``preadv`` into a buffer
is a native call like any other. Truth, measured from outside:
``shard_scan.truth.json`` (``python measure.py``).

Needs a filesystem that takes O_DIRECT (ext4, xfs; not tmpfs): ``--dir`` picks where the
shards go (default: the system's temporary directory).

    python shard_scan.py [--passes 70] [--dir DIR]
"""

from __future__ import annotations

import argparse
import mmap
import os
import shutil
import sys
import tempfile

import numpy as np

SHARDS, SHARD_BYTES, BLOCK = 4, 16 << 20, 1 << 20


def write_shards(folder: str) -> list[str]:
    paths = []
    rng = np.random.default_rng(3)
    for k in range(SHARDS):
        path = os.path.join(folder, f"shard-{k}.bin")
        with open(path, "wb") as f:
            f.write(rng.integers(0, 255, SHARD_BYTES, dtype=np.uint8).tobytes())
            f.flush()
            os.fsync(f.fileno())
        paths.append(path)
    return paths


def read_block(fd: int, buf: mmap.mmap, offset: int) -> int:
    return os.preadv(fd, [buf], offset)


def digest(buf: mmap.mmap) -> int:
    return int(np.frombuffer(buf, dtype=np.uint8, count=4096).sum())


def scan_shard(path: str, buf: mmap.mmap) -> int:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECT)
    try:
        total, offset = 0, 0
        while (n := read_block(fd, buf, offset)) > 0:
            total += digest(buf)
            offset += n
        return total
    finally:
        os.close(fd)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--passes", type=int, default=70)
    parser.add_argument("--dir", default=None, help="where the shards go (default: temp dir)")
    args = parser.parse_args()
    folder = tempfile.mkdtemp(prefix="shard-scan-", dir=args.dir)
    try:
        paths = write_shards(folder)
        buf = mmap.mmap(-1, BLOCK)  # page-aligned, as O_DIRECT requires
        try:
            checksum = sum(scan_shard(p, buf) for _ in range(args.passes) for p in paths)
        except OSError as e:
            sys.exit(f"shard_scan: direct I/O failed in {folder} ({e}); try --dir on ext4/xfs")
        print(f"{args.passes} passes over {len(paths)} shards, checksum {checksum}")
    finally:
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
