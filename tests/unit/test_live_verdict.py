"""The live verdict the finisher writes while a run goes on is the run's diagnosis of what
it has so far: on a recorded run, the verdict its golden data says."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from probe.reports.pipeline import write_live_verdict

DATA = Path(__file__).resolve().parents[1] / "data"


def test_the_live_verdict_is_the_diagnosis_of_what_the_run_has(tmp_path: Path) -> None:
    run = shutil.copytree(DATA / "cpu_python_postprocess", tmp_path / "run")
    expected = json.loads((run / "expected.json").read_text())
    document = write_live_verdict(run, unix_ns=1_700_000_000 * 10**9)
    primary = document["primary"]
    assert (primary["kind"], primary["subkind"], primary["stage"]) == (
        expected["kind"], expected["subkind"], expected["stage"])  # fmt: skip
    assert document["leak"]["detected"] is expected["leak"]
    assert document["unix_ns"] == 1_700_000_000 * 10**9
    assert json.loads((run / "live-verdict.json").read_text()) == document
