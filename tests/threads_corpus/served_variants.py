"""Outside truth for a served corpus app's variants: the requests ``drive.py``'s clients
get answered in a fixed time, for each variant alternated over rounds, no probe.

    python tests/threads_corpus/served_variants.py embed_api \\
        --variant "--workers 1" --variant "--workers 2" [--rounds 3] [--seconds 6]
    python tests/threads_corpus/served_variants.py score_api \\
        --variant "" --variant "SCORE_TORCH_THREADS=1"

A variant is uvicorn arguments and ``NAME=value`` environment settings, space-separated.
Each server gets ``--settle`` seconds after its port opens before the clients start, so
that every worker a ``--workers N`` variant starts is up. Prints one line a run and, at
the end, the counts as JSON (for the app's ``.truth.json`` ``variants``).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
try:  # imported by the tests
    from tests.threads_corpus.drive import drive, free_port, wait_for_port
except ModuleNotFoundError:  # run as a script from anywhere
    sys.path.insert(0, str(HERE))
    from drive import drive, free_port, wait_for_port  # type: ignore[no-redef]


def answered(
    app: str,
    args: list[str] | tuple[str, ...] = (),
    env: dict[str, str] | None = None,
    *,
    seconds: float,
    settle: float = 0.0,
    warm_up: float = 0.0,
    clients: int = 8,
) -> int:
    """Requests answered to ``clients`` in ``seconds`` by ``app`` under plain uvicorn (its
    ``args`` added, ``env`` over this environment), no probe: started in a session of its
    own, given ``settle`` seconds once its port opens and ``warm_up`` seconds of the same
    load first, then stopped as Ctrl-C would and what is left of its session ended (a
    helper process an app's lifespan starts)."""
    port = free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "uvicorn", f"{app}:app", "--app-dir", str(HERE / "services"),
         "--port", str(port), "--log-level", "warning", *args],
        env={**os.environ, **(env or {})}, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        start_new_session=True,
    )  # fmt: skip
    try:
        wait_for_port(port, timeout=60)
        time.sleep(settle)
        if warm_up:
            drive(port, clients=clients, seconds=warm_up)
        return drive(port, clients=clients, seconds=seconds)
    finally:
        stop(server)


def stop(server: subprocess.Popen) -> None:
    """Stop a server started in a session of its own as Ctrl-C would (killed after 30 s),
    then end what is left of its session."""
    server.send_signal(signal.SIGINT)
    try:
        server.wait(timeout=30)
    except subprocess.TimeoutExpired:
        server.kill()
        server.wait()
    with contextlib.suppress(ProcessLookupError):
        os.killpg(server.pid, signal.SIGKILL)


def variant_answered(app: str, variant: str, **load: float) -> int:
    """``answered`` for a variant: uvicorn arguments and ``NAME=value`` settings."""
    words = variant.split()
    settings = [w for w in words if "=" in w and not w.startswith("-")]
    env = dict(w.split("=", 1) for w in settings)
    return answered(app, [w for w in words if w not in settings], env, **load)  # type: ignore[arg-type]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("app", help="a module of tests/threads_corpus/services with an `app`")
    parser.add_argument("--variant", action="append", required=True)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=6.0)
    parser.add_argument("--settle", type=float, default=6.0)
    parser.add_argument("--clients", type=int, default=8)
    a = parser.parse_args()
    counts: dict[str, list[int]] = {v: [] for v in a.variant}
    for round_ in range(1, a.rounds + 1):
        for variant in a.variant:
            load = {"seconds": a.seconds, "settle": a.settle, "clients": a.clients}
            n = variant_answered(a.app, variant, **load)
            counts[variant].append(n)
            print(f"round {round_} [{variant or 'as it comes'}]: {n} requests", flush=True)
    print(json.dumps(counts))


if __name__ == "__main__":
    main()
