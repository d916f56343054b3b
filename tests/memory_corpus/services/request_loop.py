"""The request loop the corpus's request-driven services share: ``--requests N`` requests
one after another, each a ``probe.request`` with an id that never repeats, handed to the
service's handler. (Each service is still run as a script of its own: its directory is
on ``sys.path`` then.)"""

from __future__ import annotations

import argparse
import uuid
from collections.abc import Callable

import probe


def run_requests(handle: Callable[[str], object], default_requests: int) -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--requests", type=int, default=default_requests)
    args = p.parse_args()
    for _ in range(args.requests):
        rid = uuid.uuid4().hex
        with probe.request(id=rid):
            handle(rid)
