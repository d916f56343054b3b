"""The finisher: the process that completes a run directory after the target ends.

``probe run`` starts it (niced) next to the target. While the target runs it imports the
heavy analysis stack (pandas, pyarrow), which would otherwise add most of a second to
every run. When told the target ended, it compacts the tables to Parquet and prints the
summary. If the ``probe run`` process dies without telling it (SIGKILL, ``os._exit``),
it sees end-of-file on its stdin, marks the run as killed, and compacts what was
flushed: a killed run still leaves a complete, readable run directory.

Protocol on stdin: one JSON line ``{"report": bool}``, or end-of-file.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import IO, Any

__all__ = ["Finisher", "finish_run"]


def _mark_killed(run_dir: Path) -> None:
    from probe.rundir.reader import read_meta
    from probe.rundir.writer import write_json_atomic

    meta = read_meta(run_dir)
    if "end" in meta:
        return
    flushed = [p.stat().st_mtime_ns for p in run_dir.glob("*.jsonl")]
    end_ns = max(flushed) if flushed else meta.get("start_unix_ns", time.time_ns())
    meta["end_unix_ns"] = end_ns
    meta["end"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(end_ns / 1e9))
    meta["duration_s"] = round((end_ns - meta.get("start_unix_ns", end_ns)) / 1e9, 6)
    meta["exit"] = {"status": None, "ended_by": "killed"}
    meta.setdefault("notes", []).append(
        "the profiled process ended without stopping collection (killed?); "
        "data is complete up to its last flush"
    )
    write_json_atomic(run_dir / "meta.json", meta)


def finish_run(
    run_dir: Path, *, report: bool, killed: bool = False, out: IO[str] | None = None
) -> None:
    """Compact ``run_dir`` to Parquet and, with ``report``, print its summary."""
    from probe.rundir.reader import compact, load, read_meta
    from probe.rundir.writer import write_json_atomic

    if killed:
        _mark_killed(run_dir)
    notes = compact(run_dir)
    if notes:
        meta = read_meta(run_dir)
        meta.setdefault("notes", []).extend(notes)
        write_json_atomic(run_dir / "meta.json", meta)
    if report:
        from analyzers.summary import summarize
        from reports.terminal import render_summary

        text = render_summary(summarize(load(run_dir)))
        print(text, file=out or sys.stdout, flush=True)


class Finisher:
    """Handle on the finisher process, held by ``probe run``."""

    def __init__(self, run_dir: Path, proc: subprocess.Popen[bytes] | None) -> None:
        self.run_dir = run_dir
        self._proc = proc
        if proc is not None:
            os.register_at_fork(after_in_child=self._after_fork_child)

    @classmethod
    def spawn(cls, run_dir: Path) -> Finisher:
        try:
            proc = subprocess.Popen(
                [sys.executable, "-m", "probe.cli.finish", str(run_dir)],
                stdin=subprocess.PIPE,
            )
        except OSError:
            proc = None  # finish in this process instead
        return cls(run_dir, proc)

    def _after_fork_child(self) -> None:
        # A forked child must not hold the pipe open: its end-of-file is how the
        # finisher learns that the profiled process died.
        proc = self._proc
        if proc is not None and proc.stdin is not None:
            stdin, proc.stdin = proc.stdin, None
            stdin.close()
        self._proc = None

    def finish(self, *, report: bool, status: int) -> None:
        sys.stdout.flush()
        sys.stderr.flush()
        proc = self._proc
        if proc is not None and proc.stdin is not None:
            try:
                proc.stdin.write(json.dumps({"report": report, "status": status}).encode() + b"\n")
                proc.stdin.close()
                if proc.wait() == 0:
                    return
            except (BrokenPipeError, OSError):
                proc.wait()
            print("probe: the finisher process failed; finishing here", file=sys.stderr)
        finish_run(self.run_dir, report=report)

    def abandon(self) -> None:
        proc = self._proc
        if proc is not None:
            proc.kill()
            proc.wait()


def main(argv: list[str]) -> int:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is for the target, not for us
    try:
        os.nice(10)
    except OSError:
        pass
    run_dir = Path(argv[0])
    # Warm the analysis stack while the target runs; that is this process's purpose.
    import analyzers.summary  # noqa: F401
    import probe.rundir.reader  # noqa: F401
    import reports.terminal  # noqa: F401

    line = sys.stdin.readline()
    message: dict[str, Any] = json.loads(line) if line.strip() else {}
    killed = not message
    try:
        finish_run(run_dir, report=bool(message.get("report")), killed=killed)
    except Exception as e:
        print(f"probe: could not finish {run_dir}: {e}", file=sys.stderr)
        return 1
    if killed:
        print(
            f"probe: profiled process ended abruptly; data up to its last flush is in {run_dir}",
            file=sys.stderr,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
