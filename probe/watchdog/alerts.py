"""Where a leak verdict goes: a structured log line, a webhook, Prometheus gauges.

None of them may block or crash the watched service: the webhook posts from its own
daemon thread through a bounded queue (the newest alert wins when it is full), with a
timeout and bounded retries, and every failure becomes a log line. The metrics
endpoint is prometheus-client's own server on a private registry, bound to 127.0.0.1
unless told otherwise.

A webhook URL is http(s) to a host that is not link-local nor a cloud's instance-metadata
service (169.254.169.254 and the rest of 169.254/16, fe80::/10, AWS's fd00:ec2::254,
Alibaba's 100.100.100.200): those hand out the machine's credentials to whoever can
make it send a request, and an alert's POST is one. A host named with
``--allow-webhook-host`` is let through. Names are resolved and checked at start and
again before every post (a name can be pointed elsewhere in between).
"""

from __future__ import annotations

import json
import logging
import math
import queue
import socket
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterable
from ipaddress import ip_address, ip_network
from typing import Any
from urllib.parse import urlsplit

from probe.analyzers.leaks import what_holds
from probe.errors import ProbeError
from probe.osthreads import begin_probes_thread
from probe.redact import redact_url

__all__ = [
    "LogAlert",
    "Metrics",
    "WebhookAlert",
    "alert_payload",
    "check_webhook_url",
    "pile_payload",
]

_LINK_LOCAL = (ip_network("169.254.0.0/16"), ip_network("fe80::/10"))
_METADATA = {ip_address("fd00:ec2::254"), ip_address("100.100.100.200")}

Resolve = Callable[[str], list[str]]


def _addresses(host: str) -> list[str]:
    """The addresses ``host`` resolves to (none when it does not: the post fails later,
    and says so)."""
    try:
        return [str(info[4][0]) for info in socket.getaddrinfo(host, None)]
    except (OSError, UnicodeError):
        return []


def _refused(address: str) -> bool:
    try:
        ip = ip_address(address.split("%", 1)[0])  # fe80::1%eth0: the zone is no part
    except ValueError:
        return False
    mapped = getattr(ip, "ipv4_mapped", None)  # ::ffff:169.254.169.254
    ip = mapped or ip
    return ip in _METADATA or any(ip in net for net in _LINK_LOCAL if ip.version == net.version)


def check_webhook_url(
    url: str, allowed_hosts: Iterable[str] = (), resolve: Resolve = _addresses
) -> str:
    """``url`` when a webhook may post to it; else ``ProbeError`` saying why."""
    shown = redact_url(url)
    try:
        parts = urlsplit(url)
        host = parts.hostname
    except ValueError:
        raise ProbeError(f"--alert-webhook {shown!r} is not a URL") from None
    if parts.scheme not in ("http", "https") or not host:
        raise ProbeError(f"--alert-webhook must be an http(s) URL with a host, not {shown!r}")
    if host.lower() in {h.lower().strip("[]") for h in allowed_hosts}:
        return url
    if _refused(host) or any(map(_refused, resolve(host))):
        raise ProbeError(
            f"--alert-webhook {shown}: {host} is a link-local or cloud-metadata address "
            f"(it hands out the machine's credentials); --allow-webhook-host {host} lets it "
            "through if that is really meant"
        )
    return url


log = logging.getLogger("probe.watch")


def alert_payload(
    verdict: dict[str, Any], process: dict[str, Any], event: str = "probe.leak"
) -> dict[str, Any]:
    """The JSON every sink sends: the process, rate, confidence, time to limit, top sites.

    ``event`` is ``probe.leak`` when a leak is flagged, ``probe.leak.attribution`` when the
    growing sites follow (attribution is armed by the first alert)."""
    return {
        "event": event,
        "process": process,
        "detected": verdict["detected"],
        "state": verdict.get("state", "leak" if verdict["detected"] else "no_leak"),
        "rate_bytes_per_s": verdict["slope_bytes_per_s"],
        "rate_interval_bytes_per_s": verdict["slope_interval_bytes_per_s"],
        "confidence": verdict["confidence"],
        "level_bytes": verdict["level_bytes"],
        "onset_s": verdict["onset_s"],
        "seconds_to_limit": verdict["seconds_to_limit"],
        "limit_bytes": verdict["limit_bytes"],
        "test": verdict["test"],
        "reason": verdict["reason"],
        "top_sites": verdict["top_sites"],
        "growing_types": verdict["growing_types"],
        "growing_containers": verdict.get("growing_containers", []),
        # what holds the growth: what piled up with it, or small objects against large
        # and native memory (analyzers.leaks.what_holds), and the sentence that says it
        "piling_up": verdict.get("piling_up", []),
        "small_objects_share": verdict.get("small_objects_share"),
        "malloc_share": verdict.get("malloc_share"),
        "held_by": what_holds(verdict)[1],
        "attribution_note": verdict.get("attribution_note", ""),
    }


def pile_payload(pile: dict[str, Any], process: dict[str, Any], text: str) -> dict[str, Any]:
    """The JSON every sink sends when the process's threads or open descriptors pile up
    (``probe.pile``): what, from how many to how many over the window, how fast, and the
    line that says it (with the time to the descriptor limit)."""
    return {"event": "probe.pile", "process": process, **pile, "text": text}


class LogAlert:
    """One JSON line on the ``probe.watch`` logger (stderr unless the service routes it)."""

    def __init__(self, logger: logging.Logger = log) -> None:
        self._log = logger

    def send(self, payload: dict[str, Any]) -> None:
        self._log.warning(json.dumps(payload, sort_keys=True, default=str))

    def close(self, timeout: float = 0.0) -> None:
        pass


class WebhookAlert:
    """POSTs alerts as JSON from a daemon thread; ``send`` never blocks and never raises."""

    def __init__(
        self,
        url: str,
        *,
        timeout_s: float = 5.0,
        retries: int = 3,
        backoff_s: float = 1.0,
        sleep: Callable[[float], None] = time.sleep,
        logger: logging.Logger = log,
        allowed_hosts: Iterable[str] = (),
        resolve: Resolve = _addresses,
    ) -> None:
        self._allowed = tuple(allowed_hosts)
        self._resolve = resolve
        self.url = check_webhook_url(url, self._allowed, resolve)
        self.shown_url = redact_url(url)  # what log lines say: no credentials
        self._timeout = timeout_s
        self._retries = retries
        self._backoff = backoff_s
        self._sleep = sleep
        self._log = logger
        self._queue: queue.Queue[dict[str, Any] | None] = queue.Queue(maxsize=8)
        self.delivered = 0
        self.failed = 0
        self._thread = threading.Thread(target=self._loop, name="probe-webhook", daemon=True)
        self._thread.start()

    def send(self, payload: dict[str, Any]) -> None:
        while True:
            try:
                self._queue.put_nowait(payload)
                return
            except queue.Full:
                try:
                    self._queue.get_nowait()  # drop the oldest: the newest says more
                except queue.Empty:
                    pass

    def _loop(self) -> None:
        begin_probes_thread()
        while True:
            payload = self._queue.get()
            if payload is None:
                return
            try:
                self._post(payload)
            except Exception as e:  # never let the thread die: the next alert must go out
                self._log.warning("probe: webhook %s: unexpected %r", self.shown_url, e)

    def _post(self, payload: dict[str, Any]) -> None:
        try:
            check_webhook_url(self.url, self._allowed, self._resolve)
        except ProbeError as e:  # its name now points at a refused address
            self._log.warning("probe: webhook not posted: %s", e)
            self.failed += 1
            return
        body = json.dumps(payload, default=str).encode()
        for attempt in range(1, self._retries + 1):
            request = urllib.request.Request(
                self.url,
                data=body,
                headers={"Content-Type": "application/json", "User-Agent": "probe-watch"},
                method="POST",
            )
            try:
                with urllib.request.urlopen(request, timeout=self._timeout) as response:
                    response.read()
                self.delivered += 1
                return
            except (urllib.error.URLError, OSError, ValueError) as e:
                reason = getattr(e, "reason", e)
                self._log.warning(
                    "probe: webhook %s failed (attempt %d of %d): %s",
                    self.shown_url,
                    attempt,
                    self._retries,
                    reason,
                )
                if attempt < self._retries:
                    self._sleep(self._backoff * 2 ** (attempt - 1))
        self.failed += 1

    def close(self, timeout: float = 10.0) -> None:
        """Deliver what is queued, waiting at most ``timeout`` seconds."""
        try:
            self._queue.put(None, timeout=max(0.0, timeout))
        except queue.Full:
            return
        self._thread.join(timeout)


class Metrics:
    """Prometheus gauges for one watched process (label ``pid``), served over HTTP.

    The endpoint is bound at construction, so a port in use is an error before anything
    is launched; the process it speaks for is named then or later (``watch``), once a
    launched command has a pid."""

    def __init__(self, port: int, host: str = "127.0.0.1", pid: int | None = None):
        from prometheus_client import CollectorRegistry, Gauge, start_http_server

        self.registry = CollectorRegistry()
        docs = {
            "probe_watch_memory_bytes": "Memory of the watched process (bytes)",
            "probe_watch_memory_slope_bytes_per_second": (
                "Growth rate of the memory floor (Theil-Sen, bytes per second)"
            ),
            "probe_watch_leak": "1 when a leak has been flagged, else 0",
            "probe_watch_seconds_to_limit": (
                "Seconds until the memory limit at the current rate (+Inf: never, or no limit)"
            ),
        }
        self._gauges = [
            Gauge(name, doc, ["pid"], registry=self.registry) for name, doc in docs.items()
        ]
        try:
            self._server, self._thread = start_http_server(port, addr=host, registry=self.registry)
        except OSError as e:
            raise ProbeError(f"cannot serve metrics on {host}:{port}: {e.strerror or e}") from e
        self.port = self._server.server_port
        if pid is not None:
            self.watch(pid)

    def watch(self, pid: int) -> None:
        """Name the watched process: the gauges appear, labelled with its pid."""
        self.memory, self.slope, self.leak, self.to_limit = (
            g.labels(str(pid)) for g in self._gauges
        )
        self.to_limit.set(math.inf)

    def update(self, memory_bytes: float, verdict: dict[str, Any]) -> None:
        self.memory.set(memory_bytes)
        self.slope.set(verdict["slope_bytes_per_s"])
        self.leak.set(1.0 if verdict["detected"] else 0.0)
        to_limit = verdict["seconds_to_limit"]
        self.to_limit.set(math.inf if to_limit is None else to_limit)

    def close(self, timeout: float = 0.0) -> None:
        self._server.shutdown()
        self._server.server_close()
