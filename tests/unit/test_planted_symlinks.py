"""Run directories travel (shared folders, tickets): a symlink planted in one under the
name of a file probe writes is never written through -- the file it points to, outside
the directory, stays as it was."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from probe.cli import cli
from probe.rundir import compact
from probe.rundir.writer import RunWriter
from probe.watchdog.session import check_writable

GOLDEN = Path(__file__).resolve().parents[1] / "data" / "cpu_python_postprocess"


def plant(directory: Path, name: str, victim: Path) -> None:
    (directory / name).unlink(missing_ok=True)
    (directory / name).symlink_to(victim)


@pytest.fixture
def victim(tmp_path) -> Path:
    path = tmp_path / "outside" / "precious.txt"
    path.parent.mkdir()
    path.write_text("precious")
    return path


@pytest.mark.parametrize(
    ("verb", "name"),
    [
        (["analyze"], "diagnosis.json"),
        (["report"], "report.html"),
        (["report"], ".report.html.tmp"),  # the temporary name it once used
    ],
)
def test_analyze_and_report_replace_a_planted_symlink_never_the_file_behind_it(
    tmp_path, victim, verb, name
):
    run = tmp_path / "run"
    shutil.copytree(GOLDEN, run)
    plant(run, name, victim)
    result = CliRunner().invoke(cli, [*verb, str(run)])
    assert result.exit_code == 0, result.output
    assert victim.read_text() == "precious"
    if not name.startswith("."):  # the output itself is now a plain file
        assert (run / name).is_file() and not (run / name).is_symlink()


def test_compaction_replaces_planted_table_symlinks_never_the_files_behind_them(tmp_path, victim):
    run = tmp_path / "run"
    run.mkdir()
    writer = RunWriter(run)
    writer.append("heap", [[1, 10, None], [2, 11, 5]])
    writer.close()
    plant(run, "heap.parquet", victim)
    compact(run)
    assert victim.read_text() == "precious" and not (run / "heap.parquet").is_symlink()


def test_a_journal_planted_as_a_symlink_is_refused_not_appended_through(tmp_path, victim):
    run = tmp_path / "run"
    run.mkdir()
    plant(run, "samples.jsonl", victim)
    with pytest.raises(OSError):
        RunWriter(run).append("samples", [[1, 2, 3, 4, 5, "", 1, ""]])
    assert victim.read_text() == "precious"


def test_the_watch_s_write_check_never_writes_through_a_planted_name(tmp_path, victim):
    out = tmp_path / "reports"
    out.mkdir()
    plant(out, ".probe-write-test", victim)
    check_writable(out)
    assert victim.read_text() == "precious"


@pytest.mark.parametrize("name", ["leak.json", "leak.html"])
def test_the_watch_s_leak_report_replaces_a_planted_symlink(tmp_path, victim, name):
    import numpy as np

    from probe.analyzers.leaks import judge_recorded
    from probe.reports.leak import write_leak_report

    t = np.arange(0.0, 30.0, 0.5)
    y = 1e8 + 1e6 * t
    report = {
        "verdict": judge_recorded(t, y).to_dict(),
        "series": {"t_s": list(t), "min": list(y), "median": list(y), "max": list(y)},
    }
    out = tmp_path / "reports"
    out.mkdir()
    plant(out, name, victim)
    write_leak_report(out, report)
    assert victim.read_text() == "precious"
    assert (out / name).is_file() and not (out / name).is_symlink()


def test_the_viztracer_trace_replaces_a_planted_symlink(tmp_path, victim):
    # viztracer opens its output by name: it is staged privately and renamed over it
    from probe.launcher import _Trace

    run = tmp_path / "run"
    run.mkdir()
    plant(run, "trace.json", victim)
    trace = _Trace(run / "trace.json", seconds=60)
    trace.start()
    sum(range(100))
    trace.finish()
    assert victim.read_text() == "precious"
    assert (run / "trace.json").is_file() and not (run / "trace.json").is_symlink()
    assert sorted(p.name for p in run.iterdir()) == ["trace.json"]  # nothing staged is left
