"""The end of a run, and of every re-analysis: load -> diagnose -> write the outputs.

``probe run`` (through its finisher), ``probe analyze`` and ``probe report`` all go
through here, so each writes the same files the same way:

* ``finish_run(run_dir)``: compact the journals to Parquet, diagnose, write
  ``diagnosis.json``, print the verdict, then write ``report.html`` (after the verdict:
  the page takes longer, and the verdict names it);
* ``load_analysis(run_dir)``: load a run directory and diagnose it;
* ``write_output(analysis, name, path)``: render one registered output to a file,
  atomically;
* ``write_live_verdict(run_dir)``: diagnose what a run still going on has flushed so
  far, for ``probe run --prometheus-port``'s verdict gauges (``probe.live.metrics``).
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import IO, Any

from probe.analyzers.analysis import Analysis, analyze
from probe.analyzers.diagnosis import diagnose
from probe.atomicfile import write_atomic
from probe.live import LIVE_VERDICT_FILE
from probe.printable import printable, shown_path
from probe.reports import output
from probe.reports.json import json_safe
from probe.reports.terminal import Verdict, with_run_dir
from probe.rundir.journals import JournalFollower
from probe.rundir.reader import Run, compacting, load

__all__ = ["finish_run", "load_analysis", "shown_path", "verdict_text", "write_output"]


def write_output(analysis: Analysis, name: str, path: Path) -> Path:
    """Render the output registered as ``name`` into ``path`` (atomically)."""
    data = output(name).from_analysis(analysis).render()
    if isinstance(data, str) and not data.endswith("\n"):
        data += "\n"
    return write_atomic(path, data)


def verdict_text(
    analysis: Analysis, *, run_dir: Path | None = None, written: tuple[str, ...] = ()
) -> str:
    """The terminal verdict, with where its files are when ``run_dir`` is given."""
    text = Verdict.from_analysis(analysis).render()
    return text if run_dir is None else with_run_dir(text, run_dir, written)


def _warn(message: str) -> None:
    print(printable(f"probe: {message}"), file=sys.stderr)


def _diagnosed(
    run: Run, run_dir: Path, *, write_json: bool, sla_s: float | None = None
) -> Analysis:
    analysis = analyze(run, diagnose(run, sla_s=sla_s) if sla_s is not None else None)
    if write_json:
        try:
            write_output(analysis, "json", run_dir / "diagnosis.json")
        except OSError as e:
            _warn(f"could not write {run_dir / 'diagnosis.json'}: {e}")
    return analysis


def load_analysis(
    run_dir: Path, *, write_json: bool = False, sla_s: float | None = None
) -> Analysis:
    """Load ``run_dir`` and diagnose it; ``write_json``: (re)write its diagnosis.json;
    ``sla_s``: the SLA to judge its capacity by, in place of the run's own (--sla)."""
    return _diagnosed(load(run_dir), run_dir, write_json=write_json, sla_s=sla_s)


def finish_run(
    run_dir: Path, *, out: IO[str] | None = None, follower: JournalFollower | None = None
) -> list[str]:
    """Compact ``run_dir`` to Parquet, diagnose it, print the verdict and write
    ``diagnosis.json`` and ``report.html``. Returns the notes compaction made. (A run not
    diagnosed is compacted on its first load: ``probe.rundir.reader``.) ``follower``:
    its journals as parsed while the run went on."""

    def unwritten(table: str, error: Exception) -> None:
        _warn(f"could not write {table}.parquet in {run_dir}: {error}; its journal is kept")

    with compacting(run_dir, unwritten, follower) as (run, compaction_notes):
        analysis = _diagnosed(run, run_dir, write_json=True)
        written = ("diagnosis.json", "report.html")
        text = verdict_text(analysis, run_dir=run_dir, written=written)
        print(text, file=out or sys.stdout, flush=True)
        try:
            write_output(analysis, "html", run_dir / "report.html")
        except OSError as e:
            _warn(f"could not write {run_dir / 'report.html'}: {e}")
    return compaction_notes


def write_live_verdict(run_dir: Path, *, unix_ns: int | None = None) -> dict[str, Any]:
    """Diagnose what the run at ``run_dir``, still going on, has flushed so far (its
    journals read as they are, not compacted) and write the verdict to
    ``LIVE_VERDICT_FILE`` there, atomically: the primary limit, the run's figures, the
    leak's state, and when (``unix_ns``, now by default). Returns the document."""
    diagnosis = analyze(load(run_dir)).diagnosis
    leak = diagnosis.leak.to_dict()
    document = json_safe(
        {
            "schema": "probe.live-verdict/1",
            "unix_ns": time.time_ns() if unix_ns is None else unix_ns,
            "run": diagnosis.run,
            "primary": diagnosis.primary,
            "leak": {"state": leak.get("state"), "detected": leak.get("detected")},
        }
    )
    write_atomic(run_dir / LIVE_VERDICT_FILE, json.dumps(document).encode())
    return document
