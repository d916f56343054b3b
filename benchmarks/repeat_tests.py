"""Run the test command N times in a row and count the runs that passed: a suite that is
green once but red one run in twenty blocks every landing as surely as a red one.

    python benchmarks/repeat_tests.py                         # the full suite, 20 times
    python benchmarks/repeat_tests.py -n 20 tests/integration/test_watch.py

Each run is `python -m pytest -q -p no:cacheprovider [paths]` from the repository root;
a failing run's failures are printed with where and why they failed, and the loop goes on
(the count is the result). Each run has its own ``--basetemp`` under ``--keep``; a
passing run's is deleted, a failing run's kept, so that the failed tests' run
directories can be read afterwards (pytest's own keeps only the last three runs').
Exit status: 0 when every run passed, 1 otherwise.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _why(output: str) -> list[str]:
    """What a failing run's report says of each failure: the test, where it failed
    (``path:line: Error``) and the first lines of pytest's explanation (``E ...``), so
    that a flake seen once in twenty runs is seen with its figures."""
    lines = output.splitlines()
    why = [ln for ln in lines if ln.startswith("FAILED") or ln.startswith("ERROR")][:10]
    for i, ln in enumerate(lines):
        if ln.startswith("tests/") and ": " in ln and ln.split(":")[1].isdigit():
            start = max((j for j in range(i) if lines[j].startswith("____")), default=0)
            explained = [e for e in lines[start:i] if e.startswith("E ")]
            why += [ln, *explained[:8]]
    return why


def main() -> int:
    p = argparse.ArgumentParser(
        description=__doc__.splitlines()[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("-n", "--runs", type=int, default=20, help="how many runs (default 20)")
    p.add_argument(
        "--keep",
        type=Path,
        default=Path(tempfile.gettempdir()) / "repeat-tests",
        help="where each failing run's test directories are kept (default: %(default)s)",
    )
    p.add_argument("paths", nargs="*", help="test paths (default: the whole suite)")
    args = p.parse_args()
    args.keep.mkdir(parents=True, exist_ok=True)  # pytest makes the basetemp, not its parent
    passed = 0
    for i in range(1, args.runs + 1):
        started = time.monotonic()
        basetemp = args.keep / f"run-{i}"
        cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"]
        cmd += ["--basetemp", str(basetemp), *args.paths]
        result = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True)
        took = time.monotonic() - started
        tail = (result.stdout.strip().splitlines() or ["(no output)"])[-1]
        ok = result.returncode == 0
        passed += ok
        print(f"run {i:2d}/{args.runs}: {'pass' if ok else 'FAIL'} in {took:,.0f} s  ({tail})")
        if ok:
            shutil.rmtree(basetemp, ignore_errors=True)
        else:
            print("\n".join(f"    {ln}" for ln in _why(result.stdout)))
            print(f"    its test directories: {basetemp}")
        sys.stdout.flush()  # progress shows in a log file as each run ends
    print(f"{passed}/{args.runs} runs passed")
    return 0 if passed == args.runs else 1


if __name__ == "__main__":
    sys.exit(main())
