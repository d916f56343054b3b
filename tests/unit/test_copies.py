"""GPU copies read from their Kineto names and launches (``analyzers.copies``): direction,
pageable or pinned host memory, and whether the host had to wait, on declared copies."""

from __future__ import annotations

import pandas as pd
import pytest

from probe.analyzers.copies import copy_breakdown, read_copies


def copies(*rows: tuple[str, int, int, int]) -> pd.DataFrame:
    """(Kineto name, bytes, duration ns, correlation) each."""
    return pd.DataFrame(
        {
            "name": [r[0] for r in rows],
            "bytes": [r[1] for r in rows],
            "dur_ns": [r[2] for r in rows],
            "ts_ns": list(range(len(rows))),
            "correlation": pd.array([r[3] for r in rows], dtype="Int64"),
        }
    )


def runtime(*rows: tuple[str, int]) -> pd.DataFrame:
    return pd.DataFrame(
        {"name": [n for n, _ in rows], "correlation": pd.array([c for _, c in rows], "Int64")}
    )


RUNTIME = runtime(("cudaMemcpyAsync", 1), ("cudaMemcpyAsync", 2), ("cudaMemcpy", 3))


def test_direction_host_memory_and_waiting_are_read_from_each_copy():
    c = read_copies(
        copies(
            ("Memcpy HtoD (Pageable -> Device)", 4 << 20, 1_000_000, 1),  # async, staged
            ("Memcpy HtoD (Pinned -> Device)", 4 << 20, 400_000, 2),  # truly async
            ("Memcpy DtoH (Device -> Pinned)", 64, 2_000, 3),  # cudaMemcpy: waits
            ("Memcpy DtoD (Device -> Device)", 1 << 20, 5_000, 4),
            ("Memset (Device)", 1 << 10, 1_000, 5),
        ),
        RUNTIME,
    )
    assert list(c["direction"]) == ["HtoD", "HtoD", "DtoH", "DtoD", "memset"]
    assert list(c["host_memory"].fillna("-")) == ["pageable", "pinned", "pinned", "-", "-"]
    assert list(c["synchronous"]) == [True, False, True, False, False]
    assert list(c["launched_by"])[:3] == ["cudaMemcpyAsync", "cudaMemcpyAsync", "cudaMemcpy"]


def test_the_breakdown_sums_bytes_and_time_and_gives_the_bandwidth():
    b = copy_breakdown(
        copies(
            ("Memcpy HtoD (Pageable -> Device)", 10**9, 100_000_000, 1),
            ("Memcpy HtoD (Pageable -> Device)", 10**9, 100_000_000, 2),
            ("Memcpy DtoH (Device -> Pinned)", 10**6, 1_000_000, 3),
        ),
        RUNTIME,
    )
    top = b.iloc[0]
    assert (top["direction"], top["host_memory"], top["synchronous"]) == ("HtoD", "pageable", True)
    assert top["copies"] == 2 and top["bytes"] == 2 * 10**9
    assert top["gb_s"] == pytest.approx(10.0)
    assert copy_breakdown(copies(), RUNTIME).empty
    assert read_copies(copies(), RUNTIME).empty  # a trace without copies
