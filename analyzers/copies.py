"""GPU copies from a Kineto trace: direction, host memory kind, and whether the host waited.

Kineto names each copy by its direction and the memory at both ends ("Memcpy HtoD
(Pageable -> Device)", "Memcpy DtoH (Device -> Pinned)"). A copy to or from pageable host
memory is staged by the driver through a pinned buffer, so it is synchronous with the
host even when launched with ``cudaMemcpyAsync``/``non_blocking=True`` and cannot overlap
compute (CUDA C++ Best Practices Guide, "Asynchronous and Overlapping Transfers with
Computation": overlap needs pinned host memory). The runtime call that made each copy
(by ``correlation``) says whether it was a synchronous ``cudaMemcpy`` or an async one.
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

__all__ = ["copy_breakdown", "read_copies"]

_DIRECTION = re.compile(r"\b(HtoD|DtoH|DtoD|HtoH|PtoP|DtoA|AtoD)\b")
_MEMORY = re.compile(r"\((\w+)\s*->\s*(\w+)\)")


def read_copies(copies: pd.DataFrame, runtime: pd.DataFrame) -> pd.DataFrame:
    """``copies`` with ``direction`` (HtoD, DtoH, DtoD, ..., ``memset``), ``host_memory``
    (``pageable``, ``pinned``, or None for device-only copies), and ``launched_by`` (the
    runtime call that made it, when the trace has it); ``synchronous`` is True when the
    host could not go on before the copy ended (a synchronous call, or pageable memory)."""
    out = copies.copy()
    if out.empty:  # a trace without copies: the columns, no rows
        return out.assign(direction=[], host_memory=[], launched_by=[], synchronous=[])
    names = out["name"].astype(str)
    direction = names.str.extract(_DIRECTION, expand=False)
    out["direction"] = direction.where(~names.str.startswith("Memset"), "memset")
    ends = names.str.extract(_MEMORY)
    host_end = ends[0].where(out["direction"] == "HtoD", ends[1])
    host_end = host_end.where(out["direction"].isin(["HtoD", "DtoH", "HtoH"]))
    out["host_memory"] = host_end.str.lower()
    calls = runtime.dropna(subset=["correlation"]).drop_duplicates("correlation")
    by_corr = dict(zip(calls["correlation"], calls["name"].astype(str), strict=True))
    out["launched_by"] = [
        by_corr.get(c) if c is not pd.NA and c == c else None for c in out["correlation"]
    ]
    sync_call = out["launched_by"].fillna("").str.fullmatch(r"(cuda|hip|cu)Memcpy(2D|3D)?")
    out["synchronous"] = sync_call | (out["host_memory"] == "pageable")
    return out


def copy_breakdown(copies: pd.DataFrame, runtime: pd.DataFrame) -> pd.DataFrame:
    """Copies by direction, host memory and synchronicity: count, bytes, GPU time, the
    achieved bandwidth (GB/s), largest GPU time first; empty without copies."""
    columns = ["direction", "host_memory", "synchronous", "copies", "bytes", "total_ns", "gb_s"]
    if copies.empty:
        return pd.DataFrame(columns=columns)
    c = read_copies(copies, runtime)
    c["host_memory"] = c["host_memory"].fillna("-")
    g = c.groupby(["direction", "host_memory", "synchronous"], dropna=False)
    out = g.agg(copies=("dur_ns", "size"), bytes=("bytes", "sum"), total_ns=("dur_ns", "sum"))
    out = out.reset_index()
    seconds = out["total_ns"].astype("float64") / 1e9
    out["gb_s"] = np.where(seconds > 0, out["bytes"].astype("float64") / 1e9 / seconds, np.nan)
    return out.sort_values("total_ns", ascending=False, ignore_index=True)[columns]
