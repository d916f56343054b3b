"""One ``probe watch`` from its first reading to its exit status.

The loop is ``Monitor.run`` (the in-process watchdog runs the same one); what a watch
from outside adds is said here: each alert printed once as it goes out and the report
rewritten with it, status lines, when to stop (the command ended, ``--duration``,
``--fail-on-leak``, a signal -- passed on to a launched command, which decides how it
stops), the verdict at the end, and the exit status:

* the launched command's own (128+N when signal N ended it), or 0 for a ``--pid``;
* 3 with ``--fail-on-leak`` once a leak is found (a launched command is stopped): memory
  that grows, or threads or open descriptors that pile up (each ends the process as
  surely: the descriptors at its open-files limit);
* 128+N when signal N stopped the watch of a ``--pid``.
"""

from __future__ import annotations

import os
import signal
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from probe.errors import ProbeError
from probe.reports.leak import alert_text, growth_text, quiet_text, write_leak_report
from probe.watchdog.config import EXIT_LEAK, WatchConfig
from probe.watchdog.monitor import Monitor
from probe.watchdog.target import WatchedProcess

__all__ = ["alert_sinks", "check_writable", "run_watch"]

Say = Callable[[str], None]


def alert_sinks(config: WatchConfig, *, log_alerts: bool = True) -> list[Any]:
    """Where alerts go: a JSON log line (``probe.watch`` logger), and the webhook if given."""
    from probe.watchdog.alerts import LogAlert, WebhookAlert

    sinks: list[Any] = [LogAlert()] if log_alerts else []
    if config.alert_webhook:
        sinks.append(WebhookAlert(config.alert_webhook, allowed_hosts=config.webhook_hosts_allowed))
    return sinks


class _Watching:
    """Asked after every reading whether to stop; prints what happened since the last."""

    def __init__(self, config: WatchConfig, target: WatchedProcess, say: Say, status: Say):
        self.config, self.target, self.say, self.status = config, target, say, status
        self.announced = self.attributed = False
        self.piles_said = 0  # of monitor.piled
        self.next_status = config.status_every_s

    def __call__(self, monitor: Monitor) -> bool:
        # each alert once, as it was sent: printed, and in the report so far
        for done, sent, render in (
            (self.announced, monitor.alerted, alert_text),
            (self.attributed, monitor.attributed, lambda v: "what grows:" + growth_text(v)),
        ):
            if sent is not None and not done:
                verdict = sent.to_dict()
                self.say(render(verdict))
                write_report(self.config.out, monitor, verdict, self.say)
        self.announced = monitor.alerted is not None
        self.attributed = monitor.attributed is not None
        for pile in monitor.piled[self.piles_said :]:  # threads or descriptors: once each
            self.say(f"PILING UP: {monitor.pile_text(pile)}")
        self.piles_said = len(monitor.piled)
        if (self.announced or monitor.piled) and self.config.fail_on_leak:
            return True
        if self.target.exited():
            return True
        duration = self.config.duration_s
        if duration is not None and monitor.elapsed_s >= duration:
            self.status(f"watched for {duration:g} s (--duration): stopping")
            return True
        if self.next_status is not None and monitor.elapsed_s >= self.next_status:
            self.status(f"pid {self.target.pid}: {monitor.status_line()}")
            self.next_status += self.config.status_every_s or 0.0
        return False


def check_writable(out: Path) -> None:
    """Fail at the start, not at the first alert, when the report cannot be written."""
    try:
        out.mkdir(parents=True, exist_ok=True)
        # a fresh name, created exclusively: a file or symlink planted under a fixed
        # name in a shared folder is never written through
        fd, probe_file = tempfile.mkstemp(dir=out, prefix=".probe-write-test.")
        os.close(fd)
        os.unlink(probe_file)
    except OSError as e:
        raise ProbeError(f"cannot write the leak report to {out}: {e.strerror or e}") from e


def write_report(out: Path | None, monitor: Monitor, verdict: dict[str, Any], say: Say) -> Any:
    """The leak report so far (leak.json, leak.html), when ``out`` is given; a failure to
    write it is said, and the watch goes on."""
    if out is None:
        return None
    try:
        return write_leak_report(out, monitor.report(verdict))
    except ProbeError as e:
        say(str(e))
        return None


def run_watch(
    config: WatchConfig,
    target: WatchedProcess,
    monitor: Monitor,
    say: Say,
    status: Say,
    stop: threading.Event | None = None,
) -> int:
    """Watch until the end, print the verdict, write the report; the exit status.
    ``stop``: set by a signal when there is no launched command to pass it to."""
    stop = stop or threading.Event()
    received: list[int] = []

    def on_signal(signum: int, frame: Any) -> None:
        received.append(signum)
        if not target.forward(signum):
            stop.set()

    previous = {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        monitor.run(stop, _Watching(config, target, say, status))
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
    target.stop()
    leaked = _final_word(config, target, monitor, say)
    error = target.agent_error()
    if error:
        say(f"no attribution from the command: {error}")
    if leaked and config.fail_on_leak:
        return EXIT_LEAK
    status_code = target.exit_status()
    if status_code is not None:
        return status_code
    return 128 + received[0] if received else 0


def _final_word(config: WatchConfig, target: WatchedProcess, monitor: Monitor, say: Say) -> bool:
    """The verdict on the whole watch, printed (and sent, when a short life is found
    leaking only now) and written; whether anything leaked: memory, or threads or
    descriptors that piled up (alerted live, or found by the last word)."""
    final = monitor.verdict(final=True)
    verdict = final.to_dict()
    if final.detected and monitor.alerted is None:
        monitor.alert(final)  # a short life judged at its end
        say(alert_text(verdict))
    elif not final.detected:
        say(
            quiet_text(
                verdict, target.pid, monitor.elapsed_s, monitor.last_bytes, monitor.open_files_limit
            )
        )
    paths = write_report(config.out, monitor, verdict, say)
    if paths:
        say(f"report {paths[1]}")
    return final.detected or bool(monitor.piled or final.piling_up)
