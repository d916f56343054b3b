"""A load run's requests on disk: one Parquet row per request sent."""

from __future__ import annotations

from pathlib import Path

from probe.atomicfile import atomic_output
from probe.errors import ProbeError
from probe.load.driver import Record

__all__ = ["COLUMNS", "write_records"]

COLUMNS = ("label", "request_id", "intended_ns", "sent_ns", "done_ns", "status", "error",
           "resent", "warmup")  # fmt: skip


def write_records(records: list[Record], path: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pa.table({c: [getattr(r, c) for r in records] for c in COLUMNS})
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with atomic_output(path) as f:
            pq.write_table(table, f)
    except OSError as e:
        raise ProbeError(f"{path}: cannot write the requests ({e.strerror or e})") from None
