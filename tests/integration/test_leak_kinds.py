"""A leak outside Python's small objects is told apart from a container that grows, by
``probe run`` at its defaults (no ``--memory``, no gc counts), and the fix it proposes
fits: a bounded buffer and native memory freed, not a cache.

The service leaks 16 KiB of ctypes-malloc'd memory a request (its truth, measured from
outside: ``tests/memory_corpus/services/native_leak.py``, ``record.py --verify``).
"""

from __future__ import annotations

import json

import pytest

from .conftest import REPO

pytestmark = pytest.mark.integration

NATIVE_LEAK = REPO / "tests" / "memory_corpus" / "services" / "native_leak.py"


def test_a_native_leak_is_called_a_leak_outside_python_s_small_objects_with_a_fix_to_match(
    run_probe,
):
    r = run_probe(NATIVE_LEAK, "--requests", "700", timeout=180)
    assert r.returncode == 0, r.stderr
    leak = json.loads((r.run_dir / "diagnosis.json").read_text())["leak"]
    assert leak["state"] == "leak", leak["reason"]
    # 16 KiB a request by construction; the floor's per-request slope within a quarter
    assert 12_000 < leak["bytes_per_request"] < 20_500, leak
    low, high = leak["small_objects_share"]
    assert high <= 0.25, leak["small_objects_share"]
    assert "the rest large or native" in r.stdout
    recs = json.loads((r.run_dir / "diagnosis.json").read_text())["recommendations"]
    (fix,) = [rec for rec in recs if rec["id"] == "fix_leak"]
    assert fix["stage"] == "large buffers or native memory"
    assert "deque(maxlen" in fix["how"] and "lru_cache" not in fix["how"]
