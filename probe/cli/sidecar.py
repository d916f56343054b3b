"""The sidecar: samples the target from outside and completes its run directory.

``probe run`` starts it (niced) beside the target. While the target runs, it

* samples the target's process tree (psutil) and the GPUs (NVML) at ``--resource-hz``
  and writes those tables itself: from outside, sampling never takes the target's GIL
  (see ``probe.samplers.tree``), and it goes on until the target's very end;
* imports the analysis stack (pandas, pyarrow), so that finishing costs no import time.

When told that the target ended, it stops sampling, adds what it knows to ``meta.json``
(GPUs found, peak RSS), and runs the end-of-run pipeline (``probe.reports.pipeline``):
compacts the tables to Parquet, writes ``diagnosis.json``, prints the verdict and writes
``report.html``. If the ``probe run`` process dies without telling
it (SIGKILL, ``os._exit``), it sees end-of-file on its stdin, marks the run as killed and
compacts what was flushed: a killed run still leaves a complete, readable run directory.

Invocation: ``python -m probe.cli.sidecar RUN_DIR TARGET_PID RESOURCE_HZ GPU(0|1)``;
stdin carries one JSON line ``{"report": bool}``, or end-of-file.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

__all__ = ["Sidecar"]


def _update_meta(run_dir: Path, update: Callable[[dict[str, Any]], None]) -> None:
    from probe.atomicfile import write_json_atomic
    from probe.rundir.reader import read_meta

    meta = read_meta(run_dir)
    update(meta)
    write_json_atomic(run_dir / "meta.json", meta)


def _mark_killed(meta: dict[str, Any], run_dir: Path) -> None:
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


class Sidecar:
    """Handle on the sidecar process, held by ``probe run``."""

    def __init__(self, run_dir: Path, proc: subprocess.Popen[bytes] | None) -> None:
        self.run_dir = run_dir
        self._proc = proc
        if proc is not None:
            os.register_at_fork(after_in_child=self._after_fork_child)

    @property
    def running(self) -> bool:
        return self._proc is not None

    @classmethod
    def spawn(cls, run_dir: Path, *, resource_hz: float, gpu: bool) -> Sidecar:
        try:
            proc = subprocess.Popen(
                [
                    sys.executable,
                    # -P: no working directory on sys.path. The user's folder may hold
                    # packages of its own named like ours (a `reports/`, `analyzers/`).
                    "-P",
                    "-m",
                    "probe.cli.sidecar",
                    str(run_dir),
                    str(os.getpid()),
                    repr(resource_hz),
                    "1" if gpu else "0",
                ],
                stdin=subprocess.PIPE,
                # its own process group: a Ctrl-C at the terminal goes to the target's
                # group only. The sidecar also ignores SIGINT, but only once its
                # interpreter is up: a Ctrl-C in the first ~0.1 s killed it.
                process_group=0,
            )
        except OSError:
            proc = None  # the session samples the tree and finishes in this process
        return cls(run_dir, proc)

    def _after_fork_child(self) -> None:
        # A forked child must not hold the pipe open: its end-of-file is how the
        # sidecar learns that the profiled process died.
        proc = self._proc
        if proc is not None and proc.stdin is not None:
            stdin, proc.stdin = proc.stdin, None
            stdin.close()
        self._proc = None

    def finish(self, *, report: bool) -> None:
        sys.stdout.flush()
        sys.stderr.flush()
        proc = self._proc
        if proc is not None and proc.stdin is not None:
            try:
                proc.stdin.write(json.dumps({"report": report}).encode() + b"\n")
                proc.stdin.close()
            except OSError:
                pass
            code = proc.wait()
            if code == 0:
                return
            how = f"killed by signal {-code}" if code < 0 else f"exit status {code}"
            print(f"probe: the sidecar process failed ({how}); finishing here", file=sys.stderr)
        from probe.reports.pipeline import finish_run

        finish_run(self.run_dir, report=report)


def _sample_until_told(run_dir: Path, pid: int, hz: float, gpu: bool) -> dict[str, Any]:
    """Sample the target's tree on a thread until stdin says stop; returns the message."""
    from probe.rundir.writer import RunWriter
    from probe.samplers.ticker import Ticker
    from probe.samplers.tree import TreeSampler

    tree = TreeSampler(pid, gpu=gpu)
    gpu_status = tree.start()
    writer = RunWriter(run_dir)
    flush_every = max(1, round(hz))  # ticks: about once a second
    ticks = 0

    def flush() -> None:
        for table, rows in tree.drain().items():
            writer.append(table, rows)
        writer.flush()

    def tick() -> None:
        nonlocal ticks
        tree.sample()
        ticks += 1
        if ticks % flush_every == 0:
            flush()

    sampler = Ticker("probe-tree-sampler", 1.0 / hz, tick)
    sampler.start()
    # Warm the analysis stack while the target runs; sampling goes on meanwhile.
    import probe.reports.html  # noqa: F401
    import probe.reports.pipeline  # noqa: F401

    line = sys.stdin.readline()
    sampler.stop()
    tree.sample()
    flush()
    writer.close()
    figures = tree.stop()
    message: dict[str, Any] = json.loads(line) if line.strip() else {}

    def record(meta: dict[str, Any]) -> None:
        meta["gpus"] = gpu_status
        meta.setdefault("collector", {})["tree"] = figures
        if not message:
            _mark_killed(meta, run_dir)

    _update_meta(run_dir, record)
    return message


def main(argv: list[str]) -> int:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is for the target, not for us
    try:
        os.nice(10)
    except OSError:
        pass
    run_dir, pid, hz, gpu = Path(argv[0]), int(argv[1]), float(argv[2]), argv[3] == "1"
    from probe.reports.terminal import printable  # what it says names paths: escaped

    try:
        message = _sample_until_told(run_dir, pid, hz, gpu)
        from probe.reports.pipeline import finish_run

        finish_run(run_dir, report=bool(message.get("report")))
    except Exception as e:
        print(printable(f"probe: could not finish {run_dir}: {e}"), file=sys.stderr)
        return 1
    if not message:
        print(
            printable(
                f"probe: profiled process ended abruptly; data up to its last flush is in {run_dir}"
            ),
            file=sys.stderr,
        )
    return 0


if __name__ == "__main__":
    code = main(sys.argv[1:])
    sys.stdout.flush()
    sys.stderr.flush()
    # Every file is closed and meta.json replaced atomically by now; skipping the
    # interpreter's teardown of pandas/pyarrow saves ~150 ms that `probe run` waits for.
    os._exit(code)
