"""What a leak watch is asked to do, validated once: ``WatchConfig``.

``probe watch`` builds one from its options and ``probe.watchdog.start()`` from its
arguments, through the same ``WatchConfig.build``: durations as seconds or "30m", sizes
as bytes or "2GiB", the detector's settings checked against each other. Bad values raise
``ProbeError`` (one line, exit status 2 on the command line) before anything is started.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal, cast

from probe.errors import ProbeError
from probe.watchdog.limits import parse_duration, parse_size

if TYPE_CHECKING:  # numpy's import is left to the watch itself, not to `probe --help`
    from probe.analyzers.leaks import DetectorSettings

__all__ = ["ATTRIBUTION_MODES", "EXIT_LEAK", "METRICS", "WatchConfig"]

EXIT_LEAK = 3  # probe watch --fail-on-leak, once a leak is found

Attribution = Literal["auto", "always", "off"]
Metric = Literal["rss", "uss"]
ATTRIBUTION_MODES: tuple[Attribution, ...] = ("auto", "always", "off")
METRICS: tuple[Metric, ...] = ("rss", "uss")


def _seconds(value: float | str | None, name: str, *, zero_ok: bool = False) -> float | None:
    if value is None:
        return None
    try:
        seconds = parse_duration(value) if isinstance(value, str) else float(value)
    except ValueError as e:
        raise ProbeError(f"{name}: {e}") from e
    if not math.isfinite(seconds) or seconds < 0 or (seconds == 0 and not zero_ok):
        raise ProbeError(f"{name}: must be a finite duration greater than 0, not {value!r}")
    return seconds


def _bytes(value: float | str | None, name: str) -> int | None:
    if value is None:
        return None
    try:
        size = parse_size(value) if isinstance(value, str) else int(value)
    except (ValueError, OverflowError) as e:
        raise ProbeError(f"{name}: {e}") from e
    if size <= 0:
        raise ProbeError(f"{name}: must be greater than 0, not {value!r}")
    return size


@dataclass(frozen=True)
class WatchConfig:
    """One watch: the detector's settings and everything around them.

    ``limit_bytes``: the limit for the time-to-limit estimate as given (None: the
    cgroup's, looked up once the process is known). ``status_every_s``: None for no
    status lines. ``fail_on_leak``, ``duration_s`` and ``status_every_s`` concern
    ``probe watch`` only; an in-process watchdog runs until stopped."""

    detector: DetectorSettings
    limit_bytes: int | None = None
    metric: Metric = "rss"
    alert_webhook: str | None = None
    webhook_hosts_allowed: tuple[str, ...] = ()
    metrics_port: int | None = None
    metrics_host: str = "127.0.0.1"
    attribution: Attribution = "auto"
    frames: int = 8
    out: Path | None = None
    fail_on_leak: bool = False
    duration_s: float | None = None
    status_every_s: float | None = 60.0

    @classmethod
    def build(
        cls,
        *,
        interval: float | str = 1.0,
        window: float | str = "30m",
        warmup: float | str = "10m",
        limit: float | str | None = None,
        metric: str = "rss",
        alert_webhook: str | None = None,
        webhook_hosts_allowed: tuple[str, ...] = (),
        metrics_port: int | None = None,
        metrics_host: str = "127.0.0.1",
        attribution: str = "auto",
        frames: int = 8,
        out: str | os.PathLike[str] | None = None,
        fail_on_leak: bool = False,
        duration: float | str | None = None,
        status_every: float | str | None = 60.0,
    ) -> WatchConfig:
        """A config from user-facing values; ``ProbeError`` names the first bad one."""
        from probe.analyzers.leaks import DetectorSettings

        if attribution not in ATTRIBUTION_MODES:
            raise ProbeError(f"attribution must be auto, always or off, not {attribution!r}")
        if metric not in METRICS:
            raise ProbeError(f"metric must be rss or uss, not {metric!r}")
        if metrics_port is not None and not 0 <= metrics_port <= 65535:
            raise ProbeError(f"metrics port must be 0-65535, not {metrics_port}")
        if not 1 <= frames <= 100:
            raise ProbeError(f"frames must be 1-100, not {frames}")
        try:
            detector = DetectorSettings(
                interval_s=cast(float, _seconds(interval, "interval")),
                window_s=cast(float, _seconds(window, "window")),
                warmup_s=cast(float, _seconds(warmup, "warmup", zero_ok=True)),
            )
        except ValueError as e:
            raise ProbeError(str(e)) from e
        return cls(
            detector=detector,
            limit_bytes=_bytes(limit, "limit"),
            metric=cast(Metric, metric),
            alert_webhook=alert_webhook,
            webhook_hosts_allowed=tuple(webhook_hosts_allowed),
            metrics_port=metrics_port,
            metrics_host=metrics_host,
            attribution=cast(Attribution, attribution),
            frames=frames,
            out=Path(out) if out is not None else None,
            fail_on_leak=fail_on_leak,
            duration_s=_seconds(duration, "duration"),
            status_every_s=_seconds(status_every, "status interval"),
        )

    @property
    def traced_start_s(self) -> float:
        """How long attribution traces from the start: ``always`` for ever, ``auto`` and
        ``off`` never. ``auto`` once traced the first 10 s, so that a command gone before
        any live judgement had its sites; measured on the memory corpus under probe watch
        at defaults, that start cost the verdict more than the sites were worth:
        tracemalloc slowed the service ~3-10x (torch's import and a memo filling then
        climbed as steadily as a leak), and its stop copied every trace (leaky sample:
        +67 MB, 7.6 s) into memory the service refilled with its RSS flat (a 2 MB/s leak
        read as 0.3 MB/s for 12 s: "no leak"). A short life is named instead by the gc
        census the agent takes at its start and at its exit (what holds the growth, not
        where it was allocated)."""
        return math.inf if self.attribution == "always" else 0.0

    @property
    def snapshot_s(self) -> float:
        """Seconds between attribution snapshots once armed."""
        from probe.watchdog.monitor import attribution_interval

        return attribution_interval(self.detector)
