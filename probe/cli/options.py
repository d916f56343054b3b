"""Option types shared by the verbs: numbers refused before anything starts.

``float`` alone takes ``nan`` and ``inf``: ``--hz inf`` crashed with a traceback and left
a run directory without ``meta.json``, ``--hz nan`` ran and changed the verdict,
``--duration nan`` stopped the target at once. A bounded, finite number or one clear
line and exit status 2 (click's usage error).
"""

from __future__ import annotations

import math
from typing import Any

import click

__all__ = ["MAX_SECONDS", "CollectorUrl", "FiniteFloat", "Latency", "need_opentelemetry"]

# The longest duration an option takes: a year. Threading's timers accept far more (a
# wait past ~9e12 s overflows), but no profile or watch is meant to run longer.
MAX_SECONDS = 365 * 24 * 3600.0


class FiniteFloat(click.ParamType):
    """A finite number within ``low`` (excluded when ``low_open``) and ``high``."""

    name = "number"

    def __init__(self, low: float, high: float, *, low_open: bool = True) -> None:
        self.low, self.high, self.low_open = low, high, low_open

    def convert(
        self, value: Any, param: click.Parameter | None, ctx: click.Context | None
    ) -> float:
        try:
            number = float(value)
        except (TypeError, ValueError):
            self.fail(f"{value!r} is not a number", param, ctx)
        if not math.isfinite(number):
            self.fail(f"{value!r} is not a finite number", param, ctx)
        below = number <= self.low if self.low_open else number < self.low
        if below or number > self.high:
            bound = ">" if self.low_open else ">="
            self.fail(f"{number:g} is not {bound} {self.low:g} and <= {self.high:g}", param, ctx)
        return number


class Latency(click.ParamType):
    """A latency with its unit: ``200ms``, ``0.2s``, ``1500us``; in seconds. A bare number
    is refused: an SLA of "200" is 200 ms to some and 200 s to others."""

    name = "latency"
    _UNITS = (("ms", 1e-3), ("us", 1e-6), ("s", 1.0))

    def convert(
        self, value: Any, param: click.Parameter | None, ctx: click.Context | None
    ) -> float:
        if isinstance(value, float):
            return value
        text = str(value).strip().lower()
        for unit, scale in self._UNITS:
            if text.endswith(unit):
                number = text[: -len(unit)].strip()
                try:
                    seconds = float(number) * scale
                except ValueError:
                    break
                if not math.isfinite(seconds) or seconds <= 0 or seconds > MAX_SECONDS:
                    self.fail(f"{value!r} is not a positive, finite latency", param, ctx)
                return seconds
        self.fail(f"{value!r} is not a latency with its unit (200ms, 0.2s, 1500us)", param, ctx)


class CollectorUrl(click.ParamType):
    """An OTLP/HTTP collector's base URL: ``http(s)://host[:port][/path]``. A URL the
    exporter could not post to (no scheme, another scheme, no host) is refused before
    anything runs, not found out when the first spans fail."""

    name = "url"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> str:
        from urllib.parse import urlsplit

        text = str(value).strip()
        try:
            url = urlsplit(text)
            url.port  # noqa: B018 - a port out of range or not a number raises here
        except ValueError as e:
            self.fail(f"{text!r} is not a URL: {e}", param, ctx)
        if url.scheme not in ("http", "https") or not url.hostname:
            self.fail(f"{text!r} is not an http(s)://HOST[:PORT] URL", param, ctx)
        return text.rstrip("/")


def need_opentelemetry(option: str) -> None:
    """Raise the one-line error saying how to install the OTLP extra, where it is missing."""
    from probe.errors import ProbeError

    try:
        import opentelemetry.exporter.otlp.proto.http  # noqa: F401
        import opentelemetry.sdk  # noqa: F401
    except ImportError:
        raise ProbeError(
            f"{option} needs the OpenTelemetry SDK and its OTLP/HTTP exporter: "
            "pip install 'probe-profiler[otlp]'"
        ) from None
