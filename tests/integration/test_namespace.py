"""Everything probe imports lives under ``probe.``: a user's own ``reports/`` or
``analyzers/`` package (common names) is never imported in place of ours."""

from __future__ import annotations

import subprocess
import sys

import pytest

from .conftest import write_script

pytestmark = pytest.mark.integration

HOSTILE = """
import pathlib
pathlib.Path(__file__).parent.parent.joinpath("imported-{name}").write_text("")
raise ImportError("the user's own {name} package was imported by probe")
"""


def plant_hostile_packages(folder):
    for name in ("reports", "analyzers"):
        (folder / name).mkdir()
        (folder / name / "__init__.py").write_text(HOSTILE.format(name=name))


def test_a_run_from_a_folder_with_its_own_reports_and_analyzers_still_writes_its_report(
    tmp_path, run_probe
):
    plant_hostile_packages(tmp_path)
    write_script(
        tmp_path,
        """
        import probe

        @probe.stage("work")
        def work():
            return sum(i * i for i in range(20000))

        for _ in range(50):
            with probe.request():
                work()
        """,
        name="service.py",
    )
    # -m puts the working directory first on sys.path, as python -m does
    r = run_probe("-m", "service", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "probe: CPU-bound in `work`" in r.stdout
    assert (r.run_dir / "diagnosis.json").is_file() and (r.run_dir / "report.html").is_file()
    assert not list(tmp_path.glob("imported-*")), r.stderr


@pytest.mark.parametrize("name", ["analyzers", "reports"])
def test_analysis_and_rendering_are_not_top_level_names(tmp_path, name):
    result = subprocess.run(
        [sys.executable, "-c", f"import {name}"], cwd=tmp_path, capture_output=True, text=True
    )
    assert result.returncode != 0
    assert f"No module named '{name}'" in result.stderr
    ours = subprocess.run(
        [sys.executable, "-c", f"import probe.{name}"], cwd=tmp_path, capture_output=True
    )
    assert ours.returncode == 0
