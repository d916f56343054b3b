"""A batch job that enriches records and logs each one, as a JSON line of ~2 KB, through
the standard ``logging`` module to a log shipper: a child process reading the job's log
pipe and forwarding it at ~400 KB/s (``forward``: 8 KB every 20 ms).

Its bottleneck is the shipper: the job's main thread sits in ``write`` on the full pipe
(``anon_pipe_write``) nearly all the time, behind the logging handler's ``emit``; its
own work (``enrich``, ~0.1 ms a record) is a sliver. Not the disk: nothing here touches
one. Truth, measured from outside: ``ship_logs.truth.json``
(``python tests/threads_corpus/measure.py ship_logs``).

    python ship_logs.py [--records 1000]
"""

from __future__ import annotations

import argparse
import json
import logging
import subprocess
import sys

SHIPPER = """
import sys, time
while sys.stdin.buffer.read1(8192):
    time.sleep(0.020)
"""


def enrich(record_id: int) -> dict[str, object]:
    fields = {f"f{k}": (record_id * 31 + k) % 997 for k in range(40)}
    return {"id": record_id, "fields": fields, "note": "x" * 1400}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=1000)
    args = parser.parse_args()
    shipper = subprocess.Popen([sys.executable, "-c", SHIPPER], stdin=subprocess.PIPE)
    assert shipper.stdin is not None
    log = logging.getLogger("ship_logs")
    log.addHandler(logging.StreamHandler(open(shipper.stdin.fileno(), "w", closefd=False)))
    log.setLevel(logging.INFO)
    try:
        for record_id in range(args.records):
            log.info(json.dumps(enrich(record_id)))
    finally:
        shipper.stdin.close()
        shipper.wait()
    print(f"shipped {args.records} records")


if __name__ == "__main__":
    main()
