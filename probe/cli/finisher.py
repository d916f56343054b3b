"""The finisher: completes a run directory as the run ends, its imports paid on idle cores.

``probe run`` starts it beside the target and the sidecar when the run is to be
diagnosed, at ``SCHED_IDLE``: the kernel gives it only CPU time no other thread wants, so
a service keeping every core busy loses nothing to it. While the target runs, a thread of
it imports the analysis stack (pandas, pyarrow, the analyzers, the report: ~0.35 s of
CPU); where a core is idle (W1: one BLAS thread on two cores) the imports are done before
the target ends, and where none is (W2) they wait for its end instead of slowing it. The
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
``probe run`` died): it exits at once.

Invocation: ``python -P -m probe.cli.finisher RUN_DIR``; exit status 0 when finished.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from pathlib import Path

__all__ = ["main"]


def _warm() -> None:
    import probe.reports.html  # noqa: F401
    import probe.reports.pipeline  # noqa: F401


def _lift() -> None:
    """Every thread of this process back to normal scheduling (its nice value kept),
    where permitted; unprivileged, the rest runs at idle priority."""
    for tid in os.listdir("/proc/self/task") if os.path.isdir("/proc/self/task") else []:
        try:
            os.sched_setscheduler(int(tid), os.SCHED_OTHER, os.sched_param(0))
        except (AttributeError, OSError):
            return


def main(argv: list[str]) -> int:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is for the target, not for us
    run_dir = Path(argv[0])
    warm = threading.Thread(target=_warm, name="probe-finisher-imports", daemon=True)
    warm.start()
    if not sys.stdin.readline().strip():
        return 0
    _lift()
    warm.join()
    try:
        from probe.reports.pipeline import finish_run

        finish_run(run_dir)
    except Exception as e:  # `probe run` says so and finishes the run itself
        print(f"probe: the finisher failed: {e!r}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    from probe.pids import exit_after

    exit_after(main)
