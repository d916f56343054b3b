"""The live detector held to real ``probe watch`` series: ``tests/memory_corpus/watch``
keeps the binned series of real runs (each file says how it was recorded and how its
truth was measured), replayed through ``LiveLeakDetector.add``.

A report keeps bins, not readings: each bin is replayed as ten readings at its times --
its least, its median eight times, its most -- with the request count interpolated
between the bins' counts and the bin's least live blocks. The slow test reads bins (the
same floors, counts and blocks as live); the fast test reads these stand-in readings.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from probe.analyzers.leaks import DetectorSettings, LiveLeakDetector

CORPUS = Path(__file__).resolve().parents[1] / "memory_corpus" / "watch"


def _readings(
    report: dict, heap: bool = True
) -> Iterator[tuple[float, float, float | None, float | None]]:
    """(t, bytes, requests done, live blocks) readings standing in for a report's bins."""
    settings, series = report["settings"], report["series"]
    step = settings["interval_s"]
    per = int(round(settings["bin_s"] / step))
    done = np.array([np.nan if d is None else d for d in series["requests_done"]])
    counted = np.isfinite(done)
    done_t = np.asarray(series["requests_done_t_s"])[counted]
    blocks = series.get("python_blocks_min") if heap else None
    for k, t in enumerate(series["t_s"]):
        at = t + (np.arange(per) - (per - 1) / 2) * step
        ys = [series["min"][k]] + [series["median"][k]] * (per - 2) + [series["max"][k]]
        count = np.interp(at, done_t, done[counted]) if counted[k] else [None] * per
        block = None if blocks is None else blocks[k]
        for a, y, c in zip(at.tolist(), ys, count, strict=True):
            yield a, y, None if c is None else float(c), block


def _first_leak(report: dict, heap: bool = True) -> float | None:
    s = report["settings"]
    detector = LiveLeakDetector(
        DetectorSettings(
            interval_s=s["interval_s"],
            window_s=s["window_s"],
            fast_window_s=s["fast_window_s"],
            warmup_s=s["warmup_s"],
        )
    )
    for t, y, done, blocks in _readings(report, heap):
        if detector.add(t, y, done, blocks) is not None:
            return t
    return None


def _load(name: str) -> dict:
    return json.loads((CORPUS / f"{name}.json").read_text())


def test_the_corpus_says_how_each_series_was_recorded_and_its_truth_measured():
    files = sorted(CORPUS.glob("*.json"))
    assert files
    for path in files:
        report = json.loads(path.read_text())
        assert report["truth"] in ("leak", "no_leak") and report["truth_how"] and report["how"]
        assert len(report["series"]["t_s"]) == len(report["series"]["requests_done"]) > 100


@pytest.mark.parametrize("path", sorted(CORPUS.glob("*.json")), ids=lambda p: p.stem)
def test_each_real_watch_series_gets_its_truth(path):
    report = json.loads(path.read_text())
    first = _first_leak(report)
    if report["truth"] == "no_leak":
        assert first is None, f"flagged at {first / 60:.1f} min"
    else:
        assert first is not None and first / 60 <= report["live_first_leak_min"] + 1.0


def test_the_store_on_a_staircase_needs_its_heap_to_be_told_from_a_leak():
    # replayed on its memory alone, watch_ramp's store reads as a leak (the rate check is
    # exact for a store of constant bytes a session; this one's crept): the heap's
    # blocks are what hold it
    assert _first_leak(_load("watch_ramp-store"), heap=False) is not None
