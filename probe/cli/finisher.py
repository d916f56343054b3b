"""The finisher: completes a run directory as the run ends, its imports paid on idle cores.

``probe run`` starts it beside the target and the sidecar when the run is to be
diagnosed, at ``SCHED_IDLE``: the kernel gives it only CPU time no other thread wants, so
a service keeping every core busy loses nothing to it. While the target runs, a thread of
it imports the analysis stack (pandas, pyarrow, the analyzers, the report: ~0.35 s of
CPU); where a core is idle (W1: one BLAS thread on two cores) the imports are done before
the target ends, and where none is (W2) they wait for its end instead of slowing it.
Under a cgroup CPU quota that allows fewer cores than the CPUs it may run on, an idle
CPU is not idle quota: the imports then wait for the run's end (``_quota_binds``).
Done early, it then rehearses the end once on what the run has flushed so far, in memory
(``_rehearse``), so that the verdict does not pay the pipeline's first-pass costs; and
from then on it parses the run's journals as they grow, once a second
(``probe.rundir.journals.JournalFollower``), so that the end parses only the last of them. The
sidecar imported them at nice 10, which still takes ~10% of a core from a nice-0 thread.
The imports run in a process of their own, not in the sidecar: a thread at idle priority
holding the GIL would stall the sidecar's sampling thread with it.

When ``probe run`` says the run ended (a line on stdin), its
threads are lifted back to normal scheduling where the system allows it (CAP_SYS_NICE,
or an RLIMIT_NICE of 20), so that a host busy with other work does not hold the verdict
back; otherwise the end of the run is done at idle priority, which is full speed on the
cores the ended target no longer uses. Then the end-of-run pipeline runs
(``probe.reports.pipeline.finish_run``): compaction, the diagnosis, the verdict on stdout
and ``report.html``. End-of-file instead of a line (no report wanted after all, or
``probe run`` died): it exits at once. A run with nothing to judge (no stack sample, no
span) is told by ``probe run`` itself, which then kills this process, its imports
unfinished (``probe.reports.empty_run``).

With ``--live-verdict`` (``probe run --prometheus-port``) it also diagnoses the run as it
goes, for the live metrics' verdict gauges: every so often a forked child of it (its
imports already paid, at the same idle priority) reads what the run has flushed and
writes ``live-verdict.json`` (``probe.reports.pipeline.write_live_verdict``), which the
sidecar serves. The next one waits until the last one's CPU is at most
``LIVE_VERDICT_BUDGET`` of the time since it started, so a long run's growing analysis
stays a bounded share of the idle CPU it may use; the run's end kills one under way.

Invocation: ``python -P -m probe.cli.finisher RUN_DIR [--live-verdict]``; exit status 0
when finished.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from probe.rundir.journals import JournalFollower

__all__ = ["main"]

# The first live verdict after this long (a verdict on less says little), the next ones
# no sooner than LIVE_VERDICT_EVERY_S after the last and when the last one's CPU is at
# most LIVE_VERDICT_BUDGET of the time since it began: 5%, the share of a core the
# sidecar's own sampling is held to (README, overhead).
LIVE_VERDICT_FIRST_S = 10.0
LIVE_VERDICT_EVERY_S = 10.0
LIVE_VERDICT_BUDGET = 0.05
# The rehearsal (_rehearse) runs only when the imports were done this soon after the
# start: it diagnoses what was flushed by then, and a verdict that arrives during it
# waits for it. Five seconds of a run analyse in ~0.1 s (W1's 2-s run: 0.085 s warm);
# later, on a host too busy to import sooner, it is skipped.
REHEARSE_WITHIN_S = 5.0
# Then the journals are parsed as they grow (``probe.rundir.journals.JournalFollower``),
# as often as the collector flushes them: the end of the run parses only the last second
# (a 30-s decorated loop's 700,000 spans took 1.4 s to parse at its end, 2026-12-02).
FOLLOW_EVERY_S = 1.0


def _quota_binds() -> bool:
    """Whether a cgroup CPU quota (a container's CPU limit) allows fewer cores than the
    CPUs this process may run on: then the cores the target leaves idle are not free, the
    quota is shared by the whole group, and SCHED_IDLE on another CPU does not yield it.
    ``tagging_cpu_bound.py`` (one busy thread) under a 0.5-core quota on 2 CPUs: plain
    1.8-2.0 s, under ``probe run`` 4.1-5.3 s with the imports overlapping the run (the
    target itself at 0.27 cores of its 0.5), 2.1-2.3 s with ``--no-report``."""
    from probe.watchdog.limits import cores_allowed

    return cores_allowed()["cpu_limit"] == "cgroup quota"


class _Warm:
    """What the imports thread shares with the rest: when the imports (and the
    rehearsal) are done, the journal follower it then runs, and the lock a live verdict's
    fork takes so that no fork copies a follower's parse half done (a child of a process
    whose other thread held an allocator's lock would wait on it for ever)."""

    def __init__(self) -> None:
        self.imported = threading.Event()
        self.forking = threading.Lock()
        self.follower: JournalFollower | None = None


def _warm(run_dir: Path, ended: threading.Event, warm: _Warm, wait_for_end: bool = False) -> None:
    if wait_for_end:
        ended.wait()
    started = time.monotonic()
    import probe.reports.html  # noqa: F401
    import probe.reports.pipeline  # noqa: F401
    from probe.reports.page import installed_plotly_js
    from probe.rundir.journals import JournalFollower

    installed_plotly_js()  # plotly.js (4.8 MB, read without importing plotly), once
    if not ended.is_set() and time.monotonic() - started <= REHEARSE_WITHIN_S:
        _rehearse(run_dir, ended)
    warm.follower = follower = JournalFollower(run_dir)
    warm.imported.set()
    while not ended.is_set():
        with warm.forking:
            follower.catch_up()
        ended.wait(FOLLOW_EVERY_S)


def _rehearse(run_dir: Path, ended: threading.Event) -> None:
    """Diagnose what the run has flushed so far and render its outputs in memory, once,
    while the target runs: the end of the run then meets warm code. The first pass
    through the pipeline costs ~1.5x the next (lazy imports, pandas' and pyarrow's
    first-use set-up, the interpreter's specialisation: 0.13 s against 0.085 s on W1's
    run directory), and that first pass was the verdict's. Nothing is written; each step
    is skipped once the run has ended (the verdict waits at most for the one under way);
    a rehearsal that fails changes nothing."""
    from probe.analyzers.analysis import analyze
    from probe.reports import output
    from probe.rundir.reader import load

    try:
        analysis = analyze(load(run_dir))
        for name in ("json", "html"):
            if ended.is_set():
                return
            output(name).from_analysis(analysis).render()
    except Exception:
        pass


def _lift() -> None:
    """Every thread of this process back to normal scheduling (its nice value kept),
    where permitted; unprivileged, the rest runs at idle priority."""
    for tid in os.listdir("/proc/self/task") if os.path.isdir("/proc/self/task") else []:
        try:
            os.sched_setscheduler(int(tid), os.SCHED_OTHER, os.sched_param(0))
        except (AttributeError, OSError):
            return


def _verdict_once(run_dir: Path) -> tuple[int, float] | None:
    """Fork a child that writes the run's live verdict; (its pid, when it began)."""
    started = time.monotonic()
    try:
        pid = os.fork()
    except OSError:
        return None
    if pid == 0:  # the child: diagnose, write, and leave without running any cleanup
        code = 1
        try:
            from probe.reports.pipeline import write_live_verdict

            write_live_verdict(run_dir)
            code = 0
        except Exception as e:  # said; the next one may do better with more data
            print(f"probe: no live verdict this time: {e!r}", file=sys.stderr, flush=True)
        finally:
            os._exit(code)
    return pid, started


def _live_verdicts(run_dir: Path, warm: _Warm, ended: threading.Event) -> None:
    """Until ``ended``: a live verdict now and then, within LIVE_VERDICT_BUDGET."""
    while not warm.imported.wait(0.1):
        if ended.is_set():
            return
    wait = LIVE_VERDICT_FIRST_S
    while not ended.wait(wait):
        with warm.forking:
            child = _verdict_once(run_dir)
        if child is None:
            return
        pid, started = child
        cpu_s = 0.0
        while True:
            try:
                done, _, usage = os.wait4(pid, os.WNOHANG)
            except ChildProcessError:
                break
            if done:
                cpu_s = usage.ru_utime + usage.ru_stime
                break
            if ended.wait(0.1):  # the run ended: its verdict is the final one
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
                return
        took = time.monotonic() - started
        wait = max(LIVE_VERDICT_EVERY_S, cpu_s / LIVE_VERDICT_BUDGET - took)


def main(argv: list[str]) -> int:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is for the target, not for us
    run_dir = Path(argv[0])
    ended = threading.Event()
    live_verdicts = "--live-verdict" in argv[1:]
    # under a binding quota the imports wait for the run's end, unless live verdicts are
    # asked for (they need them during the run, and cost what they cost)
    warm = _Warm()
    imports = threading.Thread(
        target=_warm,
        args=(run_dir, ended, warm, not live_verdicts and _quota_binds()),
        name="probe-finisher-imports",
        daemon=True,
    )
    imports.start()
    live = None
    if live_verdicts:
        live = threading.Thread(
            target=_live_verdicts, args=(run_dir, warm, ended), name="probe-live-verdict"
        )
        live.start()
    message = sys.stdin.readline().strip()
    ended.set()
    if live is not None:
        live.join()
        from probe.live import LIVE_VERDICT_FILE

        (run_dir / LIVE_VERDICT_FILE).unlink(missing_ok=True)  # diagnosis.json supersedes
    if not message:
        return 0
    _lift()
    imports.join()
    try:
        from probe.reports.pipeline import finish_run

        finish_run(run_dir, follower=warm.follower)
    except Exception as e:  # `probe run` says so and finishes the run itself
        print(f"probe: the finisher failed: {e!r}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    from probe.pids import exit_after

    exit_after(main)
