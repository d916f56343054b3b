"""The finisher's rehearsal: the end of the run met with warm code, and nothing else."""

from __future__ import annotations

import shutil
import threading
from pathlib import Path

from probe import reports
from probe.cli import finisher

GOLDEN = Path(__file__).resolve().parents[1] / "data" / "cpu_python_postprocess"


def _files(folder: Path) -> dict[str, tuple[int, int]]:
    return {
        str(p.relative_to(folder)): (p.stat().st_size, p.stat().st_mtime_ns)
        for p in sorted(folder.rglob("*"))
    }


def test_the_rehearsal_renders_the_outputs_and_writes_nothing(tmp_path, monkeypatch):
    run_dir = tmp_path / "run"
    shutil.copytree(GOLDEN, run_dir)
    before = _files(run_dir)
    rendered: list[str] = []
    real_output = reports.output

    def counting_output(name: str):
        rendered.append(name)
        return real_output(name)

    monkeypatch.setattr(reports, "output", counting_output)
    finisher._rehearse(run_dir, threading.Event())
    assert rendered == ["json", "html"]
    assert _files(run_dir) == before


def test_a_rehearsal_the_run_s_end_overtakes_renders_nothing_more(tmp_path, monkeypatch):
    run_dir = tmp_path / "run"
    shutil.copytree(GOLDEN, run_dir)
    rendered: list[str] = []
    monkeypatch.setattr(reports, "output", lambda name: rendered.append(name))
    ended = threading.Event()
    ended.set()
    finisher._rehearse(run_dir, ended)
    assert rendered == []


def test_a_rehearsal_on_an_unreadable_run_changes_nothing_and_raises_nothing(tmp_path):
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "meta.json").write_text("{ not json")
    finisher._rehearse(run_dir, threading.Event())
    assert [p.name for p in run_dir.iterdir()] == ["meta.json"]
