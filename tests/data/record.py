"""Re-record the golden run directories: ``python tests/data/record.py [SCENARIO...]``.

Each scenario runs a sample under ``probe run`` with few requests and keeps its run
directory (meta.json and the Parquet tables; no diagnosis) under ``tests/data/<name>/``,
with ``expected.json``: the verdict its diagnosis must give. Record on a quiet machine:
the CPU other processes use is part of the recording (it decides, for instance, whether
a second core is free for another instance). Review every ``expected.json`` against the
sample's documented bottleneck before committing: the golden tests hold the analysis
to these verdicts, so a wrong one recorded here would be enforced.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
SAMPLES = HERE.parents[1] / "sample_services"

SCENARIOS = {  # name -> (sample, requests)
    "cpu_python_postprocess": ("tagging_cpu_bound.py", 80),
    "io_network_download": ("image_io_bound.py", 60),
    "cpu_native_model": ("translation_model_bound.py", 40),
    "io_network_with_cold_start": ("multimodal_pipeline.py", 80),
    "leaking_cache": ("leaky_cache.py", 1200),
    "balanced_no_spans": ("healthy_service.py", 2500),
}


def expected(diagnosis: dict) -> dict:
    primary = diagnosis["primary"]
    return {
        "kind": primary["kind"],
        "subkind": primary["subkind"],
        "stage": primary["stage"],
        "recommendations": [r["id"] for r in diagnosis["recommendations"]],
        "leak": diagnosis["leak"]["detected"],
    }


def record(name: str) -> None:
    sample, requests = SCENARIOS[name]
    with tempfile.TemporaryDirectory() as tmp:
        run_dir = Path(tmp) / name
        subprocess.run(
            ["probe", "run", "--out", run_dir, str(SAMPLES / sample), "--requests", str(requests)],
            check=True,
            capture_output=True,
        )
        diagnosis = json.loads((run_dir / "diagnosis.json").read_text())
        # the inputs only: the diagnosis is recomputed by the tests, and the report (5 MB
        # with plotly inlined) is rendered from them
        (run_dir / "diagnosis.json").unlink()
        (run_dir / "report.html").unlink(missing_ok=True)
        target = HERE / name
        shutil.rmtree(target, ignore_errors=True)
        shutil.copytree(run_dir, target)
    (target / "expected.json").write_text(json.dumps(expected(diagnosis), indent=2) + "\n")
    print(f"{name}: {expected(diagnosis)}")


if __name__ == "__main__":
    for scenario in sys.argv[1:] or SCENARIOS:
        record(scenario)
