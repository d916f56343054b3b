"""The leak watchdog, built into a service: ``probe.watchdog.start(...)`` / ``stop()``.

    import probe.watchdog
    probe.watchdog.start(limit="2GiB", alert_webhook="http://alerts.internal/hook",
                         metrics_port=9464)
    ...                      # serve
    probe.watchdog.stop()    # returns the last verdict (a dict)

A daemon thread reads the process's own RSS every ``interval``, runs the live leak
detector (``analyzers.leaks.LiveLeakDetector``), counts the requests the service finishes
(``probe.request``, and each HTTP request of an app served by a server ``probe run``
wraps, undecorated, as ``probe watch``'s agent counts them: the axis a leak's retention is
judged on at the end), and on a leak logs one JSON line on the
``probe.watch`` logger, posts to the webhook and flips the Prometheus gauges; then it
arms tracemalloc and, a snapshot later, sends what grows (``probe.leak.attribution``),
and stops tracing (sooner where tracemalloc's tables pass their bound).
Once started, nothing it does raises into the service: failures are logged. ``start``
itself raises ``ProbeError`` for bad settings and a metrics port already in use, so
misconfiguration shows at start-up.

Starting it imports ``analyzers.leaks`` (numpy only), not pandas: cheap in a service.
It is the one place probe's collection side uses the analysis side, because the
decision to alert has to be taken live.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

from probe.errors import ProbeError
from probe.osthreads import begin_probes_thread

if TYPE_CHECKING:
    from collections.abc import Callable

    from probe.watchdog.monitor import Monitor
    from probe.watchdog.work import RequestCounter

__all__ = ["Watchdog", "start", "stop"]

log = logging.getLogger("probe.watch")
_lock = threading.Lock()
_current: Watchdog | None = None


def _own_rss() -> float | None:
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except OSError:
        import psutil

        return float(psutil.Process().memory_info().rss)


def _own_counts() -> Callable[[], dict[str, float] | None]:
    """This process's threads and open descriptors (what may pile up with a leak)."""
    import psutil

    from probe.watchdog.target import counts_reader

    return counts_reader(psutil.Process())


class Watchdog:
    """A running in-process watchdog (see ``start``)."""

    def __init__(
        self, monitor: Monitor, out: Path | None, work: RequestCounter | None = None
    ) -> None:
        self.monitor = monitor
        self.out = out
        self.work = work  # its request counter, stopped with it
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="probe-watchdog", daemon=True)

    def _run(self) -> None:
        begin_probes_thread()
        try:
            self.monitor.run(self._stop)
        except Exception as e:  # the service must outlive its watchdog
            log.warning("probe: watchdog stopped: %r", e)

    def verdict(self) -> dict[str, Any]:
        return self.monitor.verdict_dict()

    def stop(self, timeout: float = 5.0) -> dict[str, Any]:
        self._stop.set()
        self._thread.join(timeout)
        verdict = self.monitor.verdict_dict(final=True)
        if self.work is not None:
            self.work.stop()
        if self.out is not None:
            try:
                from probe.reports.leak import write_leak_report

                write_leak_report(self.out, self.monitor.report(verdict))
            except Exception as e:
                log.warning("probe: watchdog report to %s failed: %r", self.out, e)
        self.monitor.close(timeout)
        return verdict


def start(
    *,
    interval: float | str = 1.0,
    window: float | str = "30m",
    warmup: float | str = "10m",
    limit: float | str | None = None,
    alert_webhook: str | None = None,
    webhook_hosts_allowed: tuple[str, ...] = (),
    metrics_port: int | None = None,
    metrics_host: str = "127.0.0.1",
    attribution: str = "auto",
    out: str | os.PathLike[str] | None = None,
    log_alerts: bool = True,
) -> Watchdog:
    """Start watching this process's memory; returns the running ``Watchdog``.

    ``interval``/``window``/``warmup``: seconds or "30m"-style durations. ``limit``:
    bytes or "2GiB" (default: the cgroup's memory limit, if any). ``attribution``:
    "auto" (tracemalloc traces from a leak's alert until its sites are sent),
    "always", or "off". ``webhook_hosts_allowed``: hosts the webhook may post to although
    link-local or cloud-metadata addresses (refused otherwise).
    ``out``: a directory for the leak report (JSON and HTML), written by ``stop()``.
    """
    global _current
    # imported here, not at the top: ``probe watch``'s agent imports this package into
    # the watched child, which needs none of it
    from probe.watchdog.alerts import Metrics
    from probe.watchdog.attribution import SiteTracker
    from probe.watchdog.config import WatchConfig
    from probe.watchdog.limits import memory_limit
    from probe.watchdog.monitor import Monitor
    from probe.watchdog.session import alert_sinks
    from probe.watchdog.work import RequestCounter, count_served_requests

    config = WatchConfig.build(
        interval=interval,
        window=window,
        warmup=warmup,
        limit=limit,
        alert_webhook=alert_webhook,
        webhook_hosts_allowed=webhook_hosts_allowed,
        metrics_port=metrics_port,
        metrics_host=metrics_host,
        attribution=attribution,
        out=out,
    )
    limits = memory_limit(config.limit_bytes, "limit")
    with _lock:
        if _current is not None:
            raise ProbeError("the watchdog is already running (call probe.watchdog.stop() first)")
        process = {"pid": os.getpid(), "name": Path(sys.argv[0] or "python").name}
        metrics = (
            Metrics(config.metrics_port, config.metrics_host, os.getpid())
            if config.metrics_port is not None
            else None
        )
        tracker = None
        if config.attribution != "off":
            # the requests it finishes (probe.request) are the leak's work axis, as probe
            # watch's agent counts them; none while another recorder (probe run) is in place
            work = RequestCounter()
            counted = work.start()
            if counted:  # an undecorated served app's requests too, as the agent counts them
                count_served_requests()
            tracker = SiteTracker(snapshot_s=config.snapshot_s, work=work if counted else None)
            if config.traced_start_s > 0:
                tracker.arm()
        monitor = Monitor.from_config(
            config,
            _own_rss,
            process,
            limit=limits,
            sinks=alert_sinks(config, log_alerts=log_alerts),
            metrics=metrics,
            attribution=tracker,
            read_counts=_own_counts(),
        )
        _current = Watchdog(monitor, config.out, tracker.work if tracker is not None else None)
        _current._thread.start()
        return _current


def stop(timeout: float = 5.0) -> dict[str, Any] | None:
    """Stop the watchdog started by ``start``; returns its last verdict (None if none ran).

    It makes a full collection (``gc.collect()``, as CPython's shutdown does): a process
    watched for less than warm-up plus a window and a half is judged here on its whole
    series, with
    what that collection frees as the witness of garbage in reference cycles. So call it
    while the service still holds its state (a shutdown hook, the end of ``main``): what
    it dropped before the call reads as garbage."""
    global _current
    with _lock:
        dog, _current = _current, None
    return dog.stop(timeout) if dog is not None else None
