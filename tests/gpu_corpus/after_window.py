"""What a torch.profiler window leaves behind: each run directory's median ``infer`` and
``preprocess`` span before its first window opened and from 1.5 s after it closed
(``gpu_service.py`` under ``probe run``; truth for the CUPTI teardown, README.md).

    python tests/gpu_corpus/after_window.py RUN_DIR...
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pandas as pd


def medians(run: Path) -> dict[str, object]:
    meta = json.loads((run / "meta.json").read_text())
    window = meta["collector"]["torch"]["windows"][0]
    spans = pd.read_parquet(run / "spans.parquet")
    # spans on perf_counter_ns; the windows in seconds from the session's start on it
    at = (spans["start_ns"] - int(meta["clock"]["perf_ns"])) / 1e9
    dur = (spans["end_ns"] - spans["start_ns"]) / 1e6
    before = at < window["start_s"]
    # closing's length: close_s (stall_s alone before closing could leave the GIL free)
    after = at > window["end_s"] + window.get("close_s", window["stall_s"]) + 1.5
    out: dict[str, object] = {"run": run.name}
    for name in ("infer", "preprocess"):
        named = spans["name"] == name
        out[name] = {
            "before_ms": round(float(dur[named & before].median()), 3),
            "after_ms": round(float(dur[named & after].median()), 3),
            "n": [int((named & before).sum()), int((named & after).sum())],
        }
    return out


if __name__ == "__main__":
    for arg in sys.argv[1:]:
        print(json.dumps(medians(Path(arg))))
