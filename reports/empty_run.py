"""The end of a run with nothing to judge: its outputs written without the analysis stack.

``finish_empty_run(run_dir)`` is ``probe.reports.pipeline.finish_run`` for a run that
recorded no stack sample and no span (``analyzers.empty_run``): the same diagnosis.json,
the same verdict on stdout, and a report.html with the same verdict, leak and run
sections and no chart (the process was read once at most). It imports neither numpy,
pandas, pyarrow nor plotly, and leaves the journals as they are: a later load compacts
them (``probe.rundir.reader``), as it does a ``--no-report`` run's.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import IO

from probe.analyzers.empty_run import nothing_to_judge
from probe.atomicfile import write_atomic
from probe.printable import printable
from probe.reports.html import HtmlReport
from probe.reports.json import DiagnosisJson
from probe.reports.terminal import Verdict, with_run_dir
from probe.rundir.glance import glance

__all__ = ["finish_empty_run"]


def finish_empty_run(run_dir: Path, *, out: IO[str] | None = None, cwd: str | None = None) -> bool:
    """Where the finished run at ``run_dir`` had nothing to judge: write diagnosis.json,
    print the verdict, write report.html, and return True. Else False, nothing written:
    the full analysis is the run's (``finish_run``). An output that cannot be written is
    said, as ``finish_run`` says it. ``cwd``: the directory the run directory is shown
    from (``probe run``'s own, which its target may have left)."""
    seen = glance(run_dir)
    document = None if seen is None else nothing_to_judge(*seen)
    if seen is None or document is None:
        return False
    meta = seen[0]
    _write(run_dir / "diagnosis.json", DiagnosisJson(document).render())
    verdict = Verdict.of_nothing_to_judge(document).render()
    written = ("diagnosis.json", "report.html")
    print(with_run_dir(verdict, run_dir, written, cwd), file=out or sys.stdout, flush=True)
    page = HtmlReport.of_nothing_to_judge(document, meta, run_dir)
    _write(run_dir / "report.html", page.render())
    return True


def _write(path: Path, text: str) -> None:
    try:
        write_atomic(path, text)
    except OSError as e:
        print(printable(f"probe: could not write {path}: {e}"), file=sys.stderr)
