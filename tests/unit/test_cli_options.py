"""Numeric options refused before anything starts: one line, exit status 2, no run
directory (``--hz inf`` used to crash with a traceback and leave one without meta.json)."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from probe.cli import cli, main
from probe.cli.options import FiniteFloat


@pytest.mark.parametrize(
    ("option", "value", "says"),
    [
        ("--hz", "inf", "is not a finite number"),
        ("--hz", "nan", "is not a finite number"),
        ("--duration", "nan", "is not a finite number"),
        ("--duration", "-inf", "is not a finite number"),
        ("--hz", "0", "is not > 0"),
        ("--hz", "1e6", "<= 1000"),
        ("--resource-hz", "abc", "is not a number"),
        ("--memory-interval", "1e300", "<= 3.1536e+07"),
        ("--switch-interval", "-0.5", "is not >= 0"),
        ("--trace", "NaN", "is not a finite number"),
    ],
)
def test_a_bad_number_is_one_line_and_exit_2_with_no_run_directory(tmp_path, option, value, says):
    out = tmp_path / "run"
    result = CliRunner().invoke(cli, ["run", option, value, "-o", str(out), "x.py"])
    assert result.exit_code == 2, result.output
    assert f"Invalid value for '{option}'" in result.output and says in result.output
    assert "Traceback" not in result.output
    assert not out.exists()


def test_watch_durations_past_a_year_are_refused():
    result = CliRunner().invoke(cli, ["watch", "--duration", "1000000d", "--", "true"])
    assert result.exit_code == 2 and "longer than a year" in result.output


def test_bounds_are_inclusive_above_and_open_or_closed_below_as_asked():
    assert FiniteFloat(0, 10).convert("10", None, None) == 10.0
    assert FiniteFloat(0, 1, low_open=False).convert(0, None, None) == 0.0


@pytest.mark.parametrize("verb", [["analyze"], ["report"], ["diff", "elsewhere"]])
def test_errors_naming_a_hostile_path_show_its_control_characters_escaped(tmp_path, capsys, verb):
    hostile = str(tmp_path / "\x1b[2J\x1b[31mFAKE\u202erun")
    with pytest.raises(SystemExit) as exited:
        main([verb[0], hostile, *verb[1:]])
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert "\x1b" not in err and "\u202e" not in err
    assert "\\x1b[2J\\x1b[31mFAKE\\u202erun" in err, err
