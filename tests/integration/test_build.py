"""probe's compiled parts (the span hot path, ``probe/_fastspans.c``; the stack sampler's
reads at the tick, ``probe/_tickpeek.c``; a torch window's closing without the GIL,
``probe/_torchclose.cpp``) are optional: the sdist builds them where a compiler is and
installs without them where none is, and spans work either way."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from tests.build_env import c_compiler_and_headers, cxx_compiler

from .conftest import REPO

pytestmark = pytest.mark.integration

SOURCES = ("pyproject.toml", "setup.py", "README.md", "probe", "analyzers", "reports")

SPANS_AT_WORK = """
import probe, probe.spans as spans
rec = spans.SpanRecorder(); spans.activate(rec)

@probe.stage("work")
def work(x):
    return x + 1

with probe.request(id="r1"):
    assert work(1) == 2
[(_, rows)] = rec.drain()
print(probe.__file__, spans.uses_compiled_path(), [(r[2], r[6]) for r in rows])
"""


def _sdist(tmp_path: Path) -> Path:
    """The sdist of this checkout, as `python -m build --sdist` makes it."""
    src = tmp_path / "src"
    src.mkdir()
    for name in SOURCES:
        path = REPO / name
        if path.is_dir():
            shutil.copytree(path, src / name, symlinks=True, ignore=shutil.ignore_patterns(
                "*.so", "__pycache__", "*.egg-info"))  # fmt: skip
        else:
            shutil.copy2(path, src / name)
    out = tmp_path / "sdist"
    code = f"from setuptools import build_meta; print(build_meta.build_sdist({str(out)!r}))"
    made = subprocess.run(
        [sys.executable, "-c", code], cwd=src, capture_output=True, text=True, timeout=120
    )
    assert made.returncode == 0, made.stderr[-2000:]
    return out / made.stdout.strip().splitlines()[-1]


def _wheel_from(sdist: Path, tmp_path: Path, env: dict[str, str]) -> Path:
    out = tmp_path / "wheel"
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
         "-w", str(out), str(sdist)],
        env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert built.returncode == 0, built.stdout[-2000:] + built.stderr[-2000:]
    [wheel] = out.glob("*.whl")
    return wheel


def _spans_from(wheel: Path, tmp_path: Path) -> list[str]:
    site = tmp_path / "site"
    with zipfile.ZipFile(wheel) as archive:
        archive.extractall(site)
    # -S: no site-packages, where this checkout's editable install would find the
    # compiled module for a wheel that lacks it (spans need the standard library only)
    ran = subprocess.run(
        [sys.executable, "-S", "-c", SPANS_AT_WORK],
        cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(site)},
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert ran.returncode == 0, ran.stderr[-2000:]
    where, compiled, rows = ran.stdout.strip().split(" ", 2)
    assert where.startswith(str(site)), where
    return [compiled, rows]


def test_without_a_c_compiler_the_sdist_installs_and_spans_run_in_pure_python(tmp_path):
    sdist = _sdist(tmp_path)
    # no compiler at all: C++ sources are compiled by CXX's (g++), not CC's
    no_compiler = {**os.environ, "CC": "/bin/false", "CXX": "/bin/false"}
    wheel = _wheel_from(sdist, tmp_path, no_compiler)
    assert not [n for n in zipfile.ZipFile(wheel).namelist() if n.endswith(".so")]
    assert _spans_from(wheel, tmp_path) == ["False", "[('work', 'r1'), ('request', 'r1')]"]


@pytest.mark.skipif(not c_compiler_and_headers(), reason="no C compiler or Python headers here")
def test_with_a_c_compiler_the_sdist_builds_the_compiled_parts(tmp_path):
    sdist = _sdist(tmp_path)
    wheel = _wheel_from(sdist, tmp_path, dict(os.environ))
    built = [n.split(".")[0] for n in zipfile.ZipFile(wheel).namelist() if n.endswith(".so")]
    # the C++ one where a C++ compiler is too
    expected = ["probe/_fastspans", "probe/_tickpeek", *(["probe/_torchclose"] * cxx_compiler())]
    assert sorted(built) == expected, built
    assert _spans_from(wheel, tmp_path) == ["True", "[('work', 'r1'), ('request', 'r1')]"]
