"""Where ``probe load`` sends: a URL on this host's loopback unless allowed otherwise, and
a wait for it to accept connections."""

from __future__ import annotations

import ipaddress
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass
from urllib.parse import urlsplit

from probe.errors import ProbeError

__all__ = ["Target", "listening", "parse_target", "wait_until_listening"]


@dataclass(frozen=True)
class Target:
    host: str
    port: int
    path: str  # the URL's path: the request when no mix is given


def parse_target(url: str, *, allow_remote: bool = False) -> Target:
    """``http://127.0.0.1:8000/path`` (or ``127.0.0.1:8000``). A host that does not resolve
    to a loopback address is refused unless ``allow_remote``: a load driver pointed at
    someone else's service by mistake is a denial of service."""
    parts = urlsplit(url if "://" in url else f"http://{url}")
    if parts.scheme != "http":
        raise ProbeError(f"{url}: only http:// is supported (TLS is not)")
    host = parts.hostname
    if not host:
        raise ProbeError(f"{url}: no host")
    try:
        port = parts.port or 80
    except ValueError:
        raise ProbeError(f"{url}: not a port number") from None
    try:
        address = str(socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0][4][0])
    except OSError as e:
        raise ProbeError(f"{url}: {host} does not resolve ({e.strerror or e})") from None
    if not ipaddress.ip_address(address).is_loopback and not allow_remote:
        raise ProbeError(
            f"{url}: {host} ({address}) is not this host's loopback; probe load drives "
            "services on 127.0.0.1 only, unless --allow-remote"
        )
    return Target(address, port, parts.path or "/")


def listening(target: Target) -> bool:
    """Does something accept TCP connections at the target now?"""
    try:
        socket.create_connection((target.host, target.port), timeout=0.5).close()
    except OSError:
        return False
    return True


def wait_until_listening(
    target: Target,
    timeout_s: float,
    *,
    alive: Callable[[], bool] = lambda: True,
    clock: Callable[[], float] = time.monotonic,
) -> None:
    """Until a TCP connection to the target succeeds; a ProbeError after ``timeout_s``, or
    as soon as ``alive()`` says the service is gone."""
    deadline = clock() + timeout_s
    while not listening(target):
        if not alive():
            raise ProbeError(
                f"the service exited before it listened on {target.host}:{target.port}"
            )
        if clock() >= deadline:
            raise ProbeError(
                f"nothing listens on {target.host}:{target.port} after {timeout_s:g} s"
            )
        time.sleep(0.05)
