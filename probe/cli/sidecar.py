"""The sidecar: samples the target from outside and completes its run directory.

``probe run`` starts it (niced) beside the target, and with it, when the run is to be
diagnosed, the finisher (``probe.cli.finisher``), which imports the analysis stack on
idle cores meanwhile. While the target runs, the sidecar samples the target's process
tree (psutil) and the GPUs (NVML) at ``--resource-hz`` and writes those tables itself:
from outside, sampling never takes the target's GIL (see ``probe.samplers.tree``), and
it goes on until the target's very end.

When told that the target ended, it stops sampling and adds what it knows to
``meta.json`` (GPUs found, peak RSS); ``probe run`` then has the finisher diagnose the
run (``Sidecar.finish``; this process does it if the finisher failed), or, where the run
has nothing to judge, says so itself and ends the finisher (``reports.empty_run``). A run not
diagnosed (``--no-report``) ends there: its journals are compacted to Parquet when first
loaded (``probe.rundir.reader``), so ending it imports neither pandas nor pyarrow. If
the ``probe run`` process dies without telling it (SIGKILL, ``os._exit``), the sidecar
sees end-of-file on its stdin, marks the run as killed and compacts what was flushed: a
killed run still leaves a complete, readable run directory.

With ``--prometheus-port`` it also serves the run's live metrics, with ``--otlp`` it
streams the run's spans to a collector (``probe.live``), both read from the span
journals once a second.

Invocation: ``python -m probe.cli.sidecar RUN_DIR TARGET_PID RESOURCE_HZ GPU(0|1)
FINISHER_PID(0: none) [host_cpu=TICKS] [prometheus=HOST:PORT] [otlp=URL]``
(``host_cpu``: the host's CPU counters when ``probe run`` started it, the start of its
first reading's interval; ``otlp=`` alone: the OpenTelemetry SDK's standard endpoint);
stdin carries one JSON line when the target ended, or end-of-file.
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
    # read as plain JSON: the reader's checks import pyarrow (0.1 s), and this file is
    # the one the target's own process wrote
    from probe.atomicfile import write_json_atomic

    meta = json.loads((run_dir / "meta.json").read_text(encoding="utf-8"))
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


def _idle() -> None:
    """In the child, before exec: the whole process at SCHED_IDLE (its interpreter's
    start-up included, ~50 ms of CPU a busy target would otherwise give up)."""
    try:
        os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))
    except (AttributeError, OSError):
        pass


# The sidecar's nice value, from its first instruction: at nice 0 its interpreter's
# start-up took a third of a busy target's only core for its first quarter second
# (taskset to one CPU, 2026-11-28: the target's share 0.63-0.71 there, then 0.91 while
# it imported at nice 10, 0.97-0.98 once sampling). Nice 10 weighs ~1/10 of nice 0
# under CFS: enough for sampling at --resource-hz on a saturated core.
SIDECAR_NICE = 10


def _niced() -> None:
    """In the child, before exec: the sidecar at ``SIDECAR_NICE``."""
    try:
        os.nice(SIDECAR_NICE)
    except OSError:
        pass


def _spawn(
    module: str, args: list[str], env: dict[str, str] | None = None, *, idle: bool = False
) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        # -P: no working directory on sys.path. The user's folder may hold packages of
        # its own named like ours (a `reports/`, `analyzers/`).
        [sys.executable, "-P", "-m", module, *args],
        stdin=subprocess.PIPE,
        # its own process group: a Ctrl-C at the terminal goes to the target's group
        # only. Ours ignore SIGINT too, but only once their interpreter is up: a Ctrl-C
        # in the first ~0.1 s killed the sidecar.
        process_group=0,
        env=env,
        preexec_fn=_idle if idle else _niced,
    )


def _send(proc: subprocess.Popen[bytes] | None, message: dict[str, Any] | None) -> None:
    """Send ``message`` (None: end-of-file alone), then end-of-file."""
    if proc is None or proc.stdin is None:
        return
    try:
        if message is not None:
            proc.stdin.write(json.dumps(message).encode() + b"\n")
        proc.stdin.close()
    except OSError:
        pass


def _tell(proc: subprocess.Popen[bytes] | None, message: dict[str, Any] | None) -> int | None:
    """Send ``message`` (None: end-of-file alone) and wait for the process; its exit
    status, None where there is no process."""
    _send(proc, message)
    return None if proc is None else proc.wait()


def _stop(proc: subprocess.Popen[bytes] | None) -> None:
    """End a helper whose work is not wanted, at once: the finisher may be in the middle
    of an import, which end-of-file would wait for."""
    if proc is None:
        return
    proc.kill()
    _tell(proc, None)


def _failed(what: str, code: int) -> None:
    how = f"killed by signal {-code}" if code < 0 else f"exit status {code}"
    print(f"probe: the {what} process failed ({how}); finishing here", file=sys.stderr)


class Sidecar:
    """Handles on the sidecar and finisher processes, held by ``probe run``."""

    def __init__(
        self,
        run_dir: Path,
        proc: subprocess.Popen[bytes] | None,
        finisher: subprocess.Popen[bytes] | None = None,
    ) -> None:
        self.run_dir = run_dir
        self._proc = proc
        self._finisher = finisher
        self._cwd = os.getcwd()  # the run directory is shown from here, as the finisher does
        if proc is not None or finisher is not None:
            os.register_at_fork(after_in_child=self._after_fork_child)

    @property
    def running(self) -> bool:
        return self._proc is not None

    @classmethod
    def spawn(
        cls,
        run_dir: Path,
        *,
        resource_hz: float,
        gpu: bool,
        report: bool,
        prometheus: str | None = None,
        otlp: str | None = None,
    ) -> Sidecar:
        """The sidecar, and with ``report`` the finisher (``probe.cli.finisher``), both
        started now: the finisher's imports overlap the run from its first moment.
        ``prometheus``: HOST:PORT to serve the live metrics on; ``otlp``: the collector's
        URL to stream spans to ("": the SDK's standard endpoint)."""
        from probe.pids import HELPER_ENV
        from probe.samplers.host_cpu import host_cpu_jiffies

        finisher = None
        if report:
            env = {**os.environ, HELPER_ENV: "finisher"}  # not one of the target's processes
            try:
                live_verdict = ["--live-verdict"] if prometheus else []
                finisher = _spawn(
                    "probe.cli.finisher", [str(run_dir), *live_verdict], env, idle=True
                )
            except OSError:
                pass  # this process finishes the run
        helper = str(finisher.pid) if finisher is not None else "0"
        args = [str(run_dir), str(os.getpid()), repr(resource_hz), "1" if gpu else "0", helper]
        host_cpu = host_cpu_jiffies()  # before its start-up, which a busy host delays
        args += [f"host_cpu={host_cpu}"] if host_cpu else []
        args += [f"prometheus={prometheus}"] if prometheus else []
        args += [f"otlp={otlp}"] if otlp is not None else []
        try:
            proc = _spawn("probe.cli.sidecar", args)
        except OSError:
            proc = None  # the session samples the tree in this process
        return cls(run_dir, proc, finisher)

    def _after_fork_child(self) -> None:
        # A forked child must not hold the pipes open: end-of-file is how the sidecar and
        # the finisher learn that the profiled process died.
        for proc in (self._proc, self._finisher):
            if proc is not None and proc.stdin is not None:
                stdin, proc.stdin = proc.stdin, None
                stdin.close()
        self._proc = self._finisher = None

    def finish(self, *, report: bool) -> None:
        """The target ended: the sidecar completes its tables and meta.json; then, with
        ``report``, the finisher diagnoses the run (or this process, if it failed)."""
        sys.stdout.flush()
        sys.stderr.flush()
        _send(self._proc, {"ended": True})
        from probe.rundir.glance import may_be_empty

        # A run with nothing to judge is told so here, without the analysis stack the
        # finisher may still be importing (a 0.03-s script's end waited ~0.45 s for it)
        quick = report and may_be_empty(self.run_dir)
        if quick:  # imported while the sidecar completes its tables (~15 ms)
            from probe.reports.empty_run import finish_empty_run
        code = self._proc.wait() if self._proc is not None else None
        if code:
            _failed("sidecar", code)
        if not report:
            _tell(self._finisher, None)  # nothing to do: it ends at end-of-file
            return
        if quick and finish_empty_run(self.run_dir, cwd=self._cwd):
            _stop(self._finisher)
            return
        code = _tell(self._finisher, {"ended": True})
        if code == 0:
            return
        if code is not None:
            _failed("finisher", code)
        from probe.reports.pipeline import finish_run

        finish_run(self.run_dir)


def _helper_cpu(finisher_pid: int) -> Callable[[], float]:
    """CPU seconds of the sidecar and the finisher: probe's own, on the host's cores."""
    import psutil

    try:
        theirs = psutil.Process(finisher_pid) if finisher_pid else None
    except psutil.Error:
        theirs = None

    def spent() -> float:
        total = sum(os.times()[:2])
        if theirs is not None:
            try:
                total += sum(theirs.cpu_times()[:2])
            except psutil.Error:
                pass
        return total

    return spent


def _sample_until_told(
    run_dir: Path,
    pid: int,
    hz: float,
    gpu: bool,
    own_cpu: Callable[[], float],
    live: Any = None,
    host_cpu: str | None = None,
) -> dict[str, Any]:
    """Sample the target's tree on a thread until stdin says stop; returns the message.
    ``live``: the live outputs (``probe.live.LiveOutputs``) to feed each second;
    ``host_cpu``: the host's CPU counters at the sidecar's spawn (``host_cpu_jiffies``)."""
    from probe.rundir.writer import RunWriter
    from probe.samplers.host_cpu import host_times_from_jiffies
    from probe.samplers.resources import ResourceSampler
    from probe.samplers.ticker import Ticker
    from probe.samplers.tree import TreeSampler

    since = host_times_from_jiffies(host_cpu) if host_cpu else None
    resources = ResourceSampler(pid, own_cpu=own_cpu, host_since=since)
    tree = TreeSampler(pid, gpu=gpu, resources=resources)
    gpu_status = tree.start()
    writer = RunWriter(run_dir)
    flush_every = max(1, round(hz))  # ticks: about once a second
    ticks = 0

    def flush() -> None:
        for table, rows in tree.drain().items():
            writer.append(table, rows)
        writer.flush()
        if live is not None:
            live.poll()

    def tick() -> None:
        nonlocal ticks
        tree.sample()
        ticks += 1
        if ticks % flush_every == 0:
            flush()

    sampler = Ticker("probe-tree-sampler", 1.0 / hz, tick)
    sampler.start()
    line = sys.stdin.readline()
    sampler.stop()
    tree.sample()
    flush()
    writer.close()
    figures = tree.stop()
    streamed = live.close() if live is not None else {}
    message: dict[str, Any] = json.loads(line) if line.strip() else {}

    def record(meta: dict[str, Any]) -> None:
        meta["gpus"] = gpu_status
        meta.setdefault("collector", {})["tree"] = figures
        meta["collector"].update(streamed)
        if not message:
            _mark_killed(meta, run_dir)

    _update_meta(run_dir, record)
    return message


def _live(run_dir: Path, pid: int, asked: dict[str, str], own_cpu: Callable[[], float]) -> Any:
    """The live outputs ``asked`` for (``prometheus``: HOST:PORT, ``otlp``: URL); one
    that cannot start is said and left out. None when none is asked for."""
    if not asked:
        return None
    from probe.live import LiveOutputs
    from probe.printable import printable

    live = LiveOutputs(run_dir, pid)
    if "prometheus" in asked:
        from probe.live.metrics import LiveMetrics

        host, _, port = asked["prometheus"].rpartition(":")
        metrics = LiveMetrics(own_cpu, verdicts=run_dir)
        try:
            metrics.serve(host.strip("[]"), int(port))
            live.metrics = metrics
        except (OSError, ValueError) as e:
            where = asked["prometheus"]
            print(printable(f"probe: could not serve metrics on {where}: {e}"), file=sys.stderr)
    if "otlp" in asked:
        try:
            from probe.live.traces import LiveTraces

            live.traces = LiveTraces(run_dir, asked["otlp"] or None)
        except Exception as e:  # the SDK missing or refusing the URL: the run goes on
            print(printable(f"probe: otlp: cannot stream spans: {e}"), file=sys.stderr)
    return live


def main(argv: list[str]) -> int:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is for the target, not for us
    run_dir, pid, hz = Path(argv[0]), int(argv[1]), float(argv[2])
    gpu, finisher_pid = argv[3] == "1", int(argv[4])
    from probe.printable import printable  # what it says names paths: escaped

    options = dict(option.partition("=")[::2] for option in argv[5:])
    host_cpu = options.pop("host_cpu", None)
    own_cpu = _helper_cpu(finisher_pid)
    live = _live(run_dir, pid, options, own_cpu)
    try:
        message = _sample_until_told(run_dir, pid, hz, gpu, own_cpu, live, host_cpu)
        if not message:  # killed: compacted now (nobody waits for it), no diagnosis
            from probe.rundir.reader import compact

            compact(run_dir)
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
    from probe.pids import exit_after

    exit_after(main)
