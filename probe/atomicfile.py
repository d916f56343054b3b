"""Writing a file atomically: readers see the old file or the new one, never half of it.

Every file probe writes whole (``meta.json``, the Parquet tables, ``diagnosis.json``,
``report.html``, the leak report, the watch agent's snapshots) goes through here. The
data goes to a temporary file created exclusively in the destination's directory
(``tempfile.mkstemp``: ``O_CREAT | O_EXCL`` under a random name, so a symlink planted
under a predictable name is never followed), which is then renamed over the destination
(``os.replace``: atomic on one filesystem). A failure removes the temporary file and
leaves the destination as it was.

Collection side: stdlib only.
"""

from __future__ import annotations

import functools
import json
import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

__all__ = ["atomic_output", "atomic_path", "write_atomic", "write_json_atomic"]


@functools.cache
def _default_mode() -> int:
    """0666 minus the umask: what ``open()`` would have created (mkstemp makes 0600).

    Read from /proc: ``os.umask`` can only read it by setting it, which would race with
    the service's own threads creating files (probe writes from inside services)."""
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return 0o666 & ~int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    return 0o644


@contextmanager
def atomic_output(path: Path) -> Iterator[IO[bytes]]:
    """A binary file that becomes ``path`` when the ``with`` block ends without error."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            yield f
        os.chmod(tmp, _default_mode())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise


@contextmanager
def atomic_path(path: Path) -> Iterator[Path]:
    """A fresh path that becomes ``path`` when the ``with`` block ends without error, for
    writers that open their output by name (viztracer's ``save``): it lies in a private
    directory (``mkdtemp``, mode 0700) beside ``path``, so nothing can be planted under it."""
    private = Path(tempfile.mkdtemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp"))
    try:
        staged = private / path.name
        yield staged
        os.chmod(staged, _default_mode())
        os.replace(staged, path)
    finally:
        for left in private.iterdir():
            left.unlink()
        private.rmdir()


def write_atomic(path: Path, data: str | bytes) -> Path:
    """Replace ``path`` by ``data`` (text is written as UTF-8); returns ``path``."""
    with atomic_output(path) as f:
        f.write(data.encode("utf-8") if isinstance(data, str) else data)
    return path


def write_json_atomic(path: Path, data: Any) -> Path:
    """``data`` as indented JSON (non-JSON values as their ``str``), atomically."""
    return write_atomic(path, json.dumps(data, indent=2, default=str) + "\n")
