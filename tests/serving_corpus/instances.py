"""Outside truth for one instance against two: a serving-corpus app under plain uvicorn
with ``--workers 1`` and ``--workers 2``, alternated, driven by ``drive.py``'s clients
(half their requests the CPU route, half the route that sleeps 10 ms), no probe.

    python tests/serving_corpus/instances.py shop_api:app [--clients 4] [--rounds 2]
    python tests/serving_corpus/instances.py shop_django:asgi_application --clients 4

Each server gets 4 s once its port opens (both workers up) and 80 requests of warm-up;
then 1,600 requests are timed. Prints the requests a second of each run.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1]))

from tests.serving_corpus.drive import drive  # noqa: E402
from tests.threads_corpus.drive import free_port, wait_for_port  # noqa: E402
from tests.threads_corpus.served_variants import stop  # noqa: E402


def requests_a_second(app: str, workers: int, clients: int) -> float:
    port = free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "uvicorn", app, "--app-dir", str(HERE), "--port", str(port),
         "--log-level", "critical", "--workers", str(workers)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
    )  # fmt: skip
    try:
        wait_for_port(port, timeout=60)
        time.sleep(4)
        drive(port, clients=4, per_client=20)
        began = time.perf_counter()
        answers, _ = drive(port, clients=clients, per_client=1600 // clients)
        return sum(answers.values()) / (time.perf_counter() - began)
    finally:
        stop(server)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("app", help="MODULE:APP of tests/serving_corpus")
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=2)
    a = parser.parse_args()
    for round_ in range(1, a.rounds + 1):
        for workers in (1, 2):
            rate = requests_a_second(a.app, workers, a.clients)
            print(f"round {round_}: --workers {workers}: {rate:.1f} requests/s", flush=True)


if __name__ == "__main__":
    main()
