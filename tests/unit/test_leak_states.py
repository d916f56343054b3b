"""Three leak states, shown distinctly everywhere, and an open question never ranked as a
leak: ``fix_leak`` only on a leak; the terminal, report.html and leak.html say
"undetermined" with what would settle it; diagnosis.json keeps ``detected`` beside the
state."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from probe.analyzers.analysis import analyze
from probe.analyzers.diagnosis import diagnose, run_facts
from probe.analyzers.leaks import UNDETERMINED, judge_recorded
from probe.analyzers.recommendations import recommend
from probe.reports.html import HtmlReport
from probe.reports.json import DiagnosisJson
from probe.reports.leak import growth_text, render_leak_html
from probe.reports.terminal import Verdict
from probe.rundir import load

LEAKING = Path(__file__).resolve().parents[1] / "data" / "leaking_cache"


def undetermined_diagnosis():
    run = load(LEAKING)
    d = diagnose(run)
    assert d.leak.state == "leak"  # the golden run leaks: now make it an open question
    open_question = replace(
        d.leak, state=UNDETERMINED, reason="growth is slowing down", settle="a longer run"
    )
    recs = recommend(
        d.findings,
        d.breakdown,
        run_facts(run, d.breakdown),
        leak=open_question.to_dict(),
    )
    return replace(d, leak=open_question, recommendations=recs), d


def test_fix_leak_comes_first_on_a_leak_and_not_at_all_on_an_undetermined_verdict():
    undetermined, leaking = undetermined_diagnosis()
    assert leaking.recommendations[0].id == "fix_leak"
    assert "fix_leak" not in [r.id for r in undetermined.recommendations]


def test_the_terminal_says_undetermined_and_what_would_settle_it():
    undetermined, leaking = undetermined_diagnosis()
    text = Verdict.from_diagnosis(undetermined).render()
    assert "Leak: undetermined: growth is slowing down." in text
    assert "to settle it: a longer run" in text
    assert "Leak: memory grows" in Verdict.from_diagnosis(leaking).render()
    assert "a request" in Verdict.from_diagnosis(leaking).render()  # judged per request


def test_diagnosis_json_keeps_detected_beside_the_state():
    undetermined, leaking = undetermined_diagnosis()
    leak = DiagnosisJson.from_diagnosis(undetermined).document["leak"]
    assert leak["detected"] is False and leak["state"] == "undetermined"
    assert leak["settle"] == "a longer run"
    # no confidence in a leak it did not find; the rise's own is kept beside
    assert leak["confidence"] == 0.0 and leak["rise_confidence"] > 0.99
    leak = DiagnosisJson.from_diagnosis(leaking).document["leak"]
    assert leak["detected"] is True and leak["state"] == "leak" and leak["basis"] == "requests"


def test_the_watch_report_has_a_card_for_each_state():
    t = np.arange(0.0, 60.0, 0.5)
    cards = {}
    for name, y in {
        "leak": 1e8 + 1e6 * t,
        "no_leak": 1e8 + 1e5 * np.sin(t),
        "undetermined": 1e8 + 3e7 * np.sqrt(t),  # still climbing, ever more slowly
    }.items():
        v = judge_recorded(t, y)
        assert v.state == name, v.reason
        series = {"t_s": list(t), "min": list(y), "median": list(y), "max": list(y)}
        report = {"verdict": v.to_dict(), "series": series}
        cards[name] = render_leak_html(report, plotly_js="")
    assert "Leak: memory grows" in cards["leak"]
    assert "No leak" in cards["no_leak"] and "Leak: undetermined" not in cards["no_leak"]
    assert "Leak: undetermined" in cards["undetermined"] and "To settle it" in cards["undetermined"]


def test_the_watch_s_text_and_report_say_how_long_it_traced_and_why_it_stopped():
    t = np.arange(0.0, 60.0, 0.5)
    y = 1e8 + 1e6 * t
    note = "sites over 25 s traced from the alert; tracing stopped once they were sent"
    v = replace(judge_recorded(t, y), attribution_note=note)
    series = {"t_s": list(t), "min": list(y), "median": list(y), "max": list(y)}
    page = render_leak_html({"verdict": v.to_dict(), "series": series}, plotly_js="")
    assert f"Attribution: {note}." in page
    assert growth_text(v.to_dict()).endswith(f"({note})")
    assert "Attribution:" not in render_leak_html(
        {"verdict": judge_recorded(t, y).to_dict(), "series": series}, plotly_js=""
    )


def test_report_html_says_undetermined_and_what_would_settle_it():
    undetermined, _ = undetermined_diagnosis()
    page = HtmlReport.from_analysis(analyze(load(LEAKING), undetermined)).render(plotly_js="")
    assert "Leak: undetermined" in page and "To settle it: a longer run" in page


def test_a_start_up_step_then_a_steady_climb_is_judged_on_the_climb():
    # a model loads (a 50 MB jump), then the service leaks 1 MB/s: the climb decides
    t = np.arange(0.0, 30.0, 0.1)
    y = 30e6 + np.where(t >= 12.0, 50e6 + 1e6 * (t - 12.0), 0.0)
    v = judge_recorded(t, y)
    assert v.state == "leak", v.reason
    assert "after a one-off step of" in v.reason
    assert abs(v.slope_bytes_per_s - 1e6) < 0.05e6
    flat_after = 30e6 + np.where(t >= 12.0, 50e6, 0.0)  # the same jump, then flat
    assert judge_recorded(t, flat_after).state == "no_leak"


def test_memory_that_rises_while_modules_import_is_start_up_however_long_they_take():
    # a 1.5-s job whose memory series ran 1.2 s: importing torch climbs ~130 MB until
    # 1.1 s, then its work runs flat (the run that read "grows 126 MiB/s, confidence 99%")
    t = np.arange(0.0, 1.25, 0.1)
    y = 30e6 + 130e6 * np.minimum(t / 1.1, 1.0)
    assert judge_recorded(t, y).state == "leak"  # the series alone cannot tell
    v = judge_recorded(t, y, started_s=1.1)
    assert v.state == UNDETERMINED and "after start-up's imports" in v.reason, v.reason
    assert v.settle


def test_imports_inside_the_first_quarter_change_nothing_and_a_leak_after_them_stands():
    t = np.arange(0.0, 30.0, 0.1)
    y = 100e6 + 1e6 * t + (np.arange(len(t)) % 5) * 1e4
    assert judge_recorded(t, y, started_s=2.0) == judge_recorded(t, y)
    # imports until 10 s, then the leak: judged on what follows them
    late = judge_recorded(t, y, started_s=10.0)
    assert late.state == "leak" and abs(late.slope_bytes_per_s - 1e6) < 0.05e6


def test_start_up_s_imports_end_where_they_no_longer_hold_half_the_time_sampled():
    import pandas as pd

    from probe.analyzers.diagnosis import _imports_end_s

    # 10 ms samples: 1 s importing, 4 s of work, a lazy import at 3 s, 0.1 s of it
    ts = np.arange(1, 501) * 10_000_000
    stage = np.where(ts <= 1_000_000_000, "<imports>", "work (job.py)")
    stage[(ts > 3_000_000_000) & (ts <= 3_100_000_000)] = "<imports>"
    samples = pd.DataFrame(
        {"ts_ns": ts, "user_function": stage, "cpu_ns": 9_000_000, "wait_ns": 1_000_000}
    )
    assert _imports_end_s(samples) == pytest.approx(1.0)
    assert _imports_end_s(samples.assign(user_function="work (job.py)")) is None


def test_a_leak_read_from_readings_that_stop_early_in_the_run_is_undetermined():
    from probe.analyzers.leaks import LEAK, covering_the_run

    t = np.arange(0, 4.6, 0.1)
    y = 100e6 + 2e6 * t + (np.arange(len(t)) % 5) * 1e4
    v = judge_recorded(t, y)
    assert v.state == LEAK
    cut = covering_the_run(v, t, duration_s=13.0)
    assert cut.state == UNDETERMINED and "cover only 4.5 s of the 13.0-s run" in cut.reason
    assert cut.settle
    assert covering_the_run(v, t, duration_s=6.0).state == LEAK


def test_a_fall_near_the_end_is_called_a_fall_never_a_rise_of_minus_so_many_mb():
    # a warm-up's rise, flat, then the teardown lets 40 MB go in the last half second
    t = np.arange(0, 12, 0.1)
    y = 100e6 + 15e6 * np.minimum(t / 6, 1) + 2e5 * np.sin(t * 7)
    v = judge_recorded(t, np.where(t < 11.5, y, y - 40e6))
    assert v.state == UNDETERMINED
    assert v.reason.startswith("the floor rose, then fell 39.9 MB in one step near the end")
    assert v.settle


def paced_leak(
    heap_hz: float = 10.0, heap_levels_off: bool = False
) -> tuple[np.ndarray, np.ndarray, np.ndarray, tuple[np.ndarray, np.ndarray]]:
    """6 s at 200 requests/s. RSS keeps ~10 KB a request, but its pace falls from 11 to
    8.5 KB a request halfway through the judged part: allocator reuse and steps move it
    (seen on the leaky sample in CI: the newer half at 0.77 of the older). The live heap
    keeps 250 blocks a request throughout -- or, with ``heap_levels_off``, stops growing
    after 600 requests (a warm-up)."""
    t = np.arange(0.0, 6.0, 0.1)
    done = 200 * t
    rss = 80e6 + 11e3 * np.minimum(done, 750) + 8.5e3 * np.maximum(done - 750, 0)
    rss += (np.arange(len(t)) % 3) * 1e4  # a small saw-tooth
    ht = np.arange(0.0, 6.0, 1.0 / heap_hz)
    kept = np.minimum(200 * ht, 600) if heap_levels_off else 200 * ht
    return t, rss, np.arange(1, 1201) / 200, (ht, 200_000 + 250 * kept)


def test_a_floor_whose_pace_the_allocator_moves_is_a_leak_when_the_live_heap_keeps_pace():
    t, rss, ends, heap = paced_leak()
    alone = judge_recorded(t, rss, request_end_s=ends)
    assert alone.state == UNDETERMINED and "growth slowed to" in alone.reason
    v = judge_recorded(t, rss, request_end_s=ends, heap=heap)
    assert v.state == "leak", v.reason
    assert "live heap grew steadily with it, 250 blocks a request" in v.reason
    assert v.bytes_per_request is not None and 8e3 < v.bytes_per_request < 11e3


def test_a_live_heap_that_levels_off_or_is_read_too_rarely_leaves_the_verdict_open():
    t, rss, ends, warming = paced_leak(heap_levels_off=True)
    assert judge_recorded(t, rss, request_end_s=ends, heap=warming).state == UNDETERMINED
    t, rss, ends, rare = paced_leak(heap_hz=1.0)  # 5 readings in the judged part
    assert judge_recorded(t, rss, request_end_s=ends, heap=rare).state == UNDETERMINED


def test_a_steady_rise_while_the_live_heap_shrinks_is_not_called_a_leak_of_python_objects():
    t = np.arange(0.0, 10.0, 0.1)
    rss = 100e6 + 3e6 * t + (np.arange(len(t)) % 3) * 1e4
    assert judge_recorded(t, rss).state == "leak"
    shrinking = (t, 550_000 - 30_000 * t)  # freed objects the allocator keeps
    v = judge_recorded(t, rss, heap=shrinking)
    assert v.state == UNDETERMINED and "Python's live heap shrank meanwhile" in v.reason


def arena_retention(swing: float = 40e6):
    """RSS climbing 3 MB/s for 10 s (freed memory kept by the allocator), the bytes in use
    going up and down by ``swing`` around 150 MB with the requests in flight, the live
    blocks flat."""
    t = np.arange(0.0, 10.0, 0.1)
    rss = 200e6 + 3e6 * t + (np.arange(len(t)) % 3) * 1e4
    rng = np.random.default_rng(7)
    in_use = 150e6 + rng.uniform(-swing, swing, len(t))
    blocks = 150_000 + rng.integers(-2_000, 2_000, len(t))
    return t, rss, (t, blocks), in_use


def test_a_rise_that_nothing_alive_follows_is_undetermined_as_memory_the_allocator_kept():
    t, rss, heap, in_use = arena_retention()
    assert judge_recorded(t, rss, heap=heap).state == "leak"  # RSS and blocks alone
    v = judge_recorded(t, rss, heap=heap, malloc_in_use=in_use)
    assert v.state == UNDETERMINED, v.reason
    assert "what is alive did not rise with it" in v.reason
    assert "MALLOC_ARENA_MAX" in v.settle


def test_a_rise_the_bytes_in_use_follow_is_a_native_leak():
    # (under swings of 80 MB a 22-MB climb over the judged 7.5 s is beyond telling: open)
    t, rss, heap, in_use = arena_retention(swing=5e6)
    v = judge_recorded(t, rss, heap=heap, malloc_in_use=in_use + 3e6 * t)
    assert v.state == "leak", v.reason


def test_a_rise_the_live_blocks_follow_by_a_tenth_is_a_leak_of_python_objects():
    t, rss, (ht, blocks), in_use = arena_retention()
    v = judge_recorded(t, rss, heap=(ht, blocks + 3_000 * ht), malloc_in_use=in_use)
    assert v.state == "leak", v.reason


def store_that_follows_the_load(keeps_climbing: bool = False):
    """session_api.py's app_ttl under probe run (10 s, 2026-12-01): the store of the last
    2 s of sessions fills over the first 6 s (longer on a slower host), then its size
    moves with the request rate while RSS keeps setting new highs, 3 MB/s here (the
    allocator keeps each high).
    ``keeps_climbing``: the live blocks climb on instead, 3,000 a second (sessions kept)."""
    t = np.arange(0.0, 10.0, 0.1)
    rss = 200e6 + 3e6 * t + (np.arange(len(t)) % 3) * 1e4
    rng = np.random.default_rng(11)
    filled = np.minimum(t, 6.0) / 6.0
    blocks = 150_000 + 150_000 * filled + rng.integers(-8_000, 8_000, len(t))
    if keeps_climbing:
        blocks = blocks + 3_000 * t
    in_use = 150e6 + 10e6 * filled + rng.uniform(-0.3e6, 0.3e6, len(t))
    return t, rss, (t, blocks), in_use


def test_a_rise_whose_live_heap_paused_after_filling_is_undetermined_as_a_load_sized_heap():
    t, rss, heap, in_use = store_that_follows_the_load()
    v = judge_recorded(t, rss, heap=heap, malloc_in_use=in_use)
    assert v.state == UNDETERMINED, v.reason
    assert "what is alive did not keep climbing with it" in v.reason
    assert "levels off" in v.settle


def test_a_rise_whose_live_blocks_climb_in_both_halves_stays_a_leak():
    t, rss, heap, in_use = store_that_follows_the_load(keeps_climbing=True)
    v = judge_recorded(t, rss, heap=heap, malloc_in_use=in_use)
    assert v.state == "leak", v.reason


def garbage_in_cycles():
    """search_flask in a 6-s run: RSS, malloc's bytes and the live blocks all climbing
    together (connections and their page caches in reference cycles, no full collection
    during the run)."""
    t = np.arange(0.0, 10.0, 0.1)
    rss = 200e6 + 3e6 * t + (np.arange(len(t)) % 3) * 1e4
    in_use = 120e6 + 2.5e6 * t + (np.arange(len(t)) % 4) * 2e5
    blocks = 150_000 + 3_000 * t
    return t, rss, (t, blocks), in_use


def full_collection(malloc_after: float, blocks_after: float) -> dict:
    return {
        "blocks_before": 180_000,
        "blocks_after": blocks_after,
        "malloc_in_use_before": 145e6,
        "malloc_in_use_after": malloc_after,
        "objects_freed": 40_000,
        "seconds": 0.05,
    }


def test_a_rise_a_full_collection_at_the_end_frees_is_undetermined_as_garbage_in_cycles():
    t, rss, heap, in_use = garbage_in_cycles()
    assert judge_recorded(t, rss, heap=heap, malloc_in_use=in_use).state == "leak"
    freed = full_collection(malloc_after=125e6, blocks_after=152_000)
    v = judge_recorded(t, rss, heap=heap, malloc_in_use=in_use, full_collection=freed)
    assert v.state == UNDETERMINED, v.reason
    assert "a full collection at the run's end freed 20 MB" in v.reason
    assert "full passes" in v.settle


def test_a_rise_that_survives_the_full_collection_stays_a_leak():
    t, rss, heap, in_use = garbage_in_cycles()
    for kept in (
        full_collection(malloc_after=143e6, blocks_after=152_000),  # native memory kept
        full_collection(malloc_after=125e6, blocks_after=179_000),  # Python objects kept
    ):
        v = judge_recorded(t, rss, heap=heap, malloc_in_use=in_use, full_collection=kept)
        assert v.state == "leak", (kept, v.reason)
    # a target that turned the collector off made no full collection: nothing to read
    v = judge_recorded(t, rss, heap=heap, malloc_in_use=in_use, full_collection=None)
    assert v.state == "leak"


def test_bytes_in_use_read_too_rarely_or_not_at_all_leave_the_verdict_to_the_floor():
    t, rss, heap, in_use = arena_retention()
    rare = np.where(np.arange(len(t)) % 20 == 0, in_use, np.nan)  # 4 in the judged part
    assert judge_recorded(t, rss, heap=heap, malloc_in_use=rare).state == "leak"
    unread = np.full(len(t), np.nan)
    assert judge_recorded(t, rss, heap=heap, malloc_in_use=unread).state == "leak"


def test_a_rise_freed_before_the_full_collection_is_no_evidence_of_garbage():
    # a batch job's main() held its leak in a local: gone by reference counts when main
    # returned, before the collection, which then freed nothing
    t, rss, heap, in_use = garbage_in_cycles()
    already_gone = full_collection(malloc_after=124e6, blocks_after=151_000)
    already_gone.update(malloc_in_use_before=125e6, blocks_before=151_500)
    v = judge_recorded(t, rss, heap=heap, malloc_in_use=in_use, full_collection=already_gone)
    assert v.state == "leak", v.reason


def test_a_fall_then_a_climb_is_told_as_a_fall():
    # floors that fall in one step (memory given back), then climb: the reason says the
    # floor fell, never that it "rose" a negative amount
    from probe.analyzers.leaks.recorded import RecordedSettings, _one_step

    fx = np.arange(0.0, 20.0, 1.0)
    for floors_after in (6, 8):  # too few to judge the climb alone; enough
        k = 20 - floors_after
        fy = np.where(fx < k, 100e6 + 0.1e6 * fx, 80e6 + 3e6 * (fx - k))
        _, reason, _ = _one_step(fx, fy, fx, fy, RecordedSettings(), False, "")
        assert "rose -" not in reason and "of -" not in reason, reason
        assert "fell" in reason or "fall of" in reason, reason


def _bursts(seed: int) -> tuple[np.ndarray, np.ndarray]:
    """36 s read 10 times a second of a worker busy in bursts (0.3-2.5 s of a full core,
    then 0.2-1.5 s idle, as bursty_ledger.py): the readings' times and the CPU seconds
    it had used by each."""
    rng = np.random.default_rng(seed)
    t = np.arange(0.0, 36.0, 0.1)
    busy = np.zeros_like(t)
    start = 0.5
    while start < 36.0:
        length = rng.uniform(0.3, 2.5)
        busy[(t >= start) & (t < start + length)] = 1.0
        start += length + rng.uniform(0.2, 1.5)
    return t, np.cumsum(busy * 0.1)


@pytest.mark.parametrize("seed", range(4))
def test_an_undecorated_leak_that_follows_bursty_work_is_judged_along_the_cpu_it_used(seed):
    t, cpu = _bursts(seed)
    rng = np.random.default_rng(100 + seed)
    # 1 MB kept a CPU second of work, on a 60-MB base with a 2-MB saw-tooth
    y = 60e6 + 1e6 * cpu + 2e6 * ((t * 0.9) % 1.0) + rng.normal(0, 1e5, len(t))
    v = judge_recorded(t, y, cpu=(t, cpu))
    assert v.state == "leak" and v.basis == "cpu", v.reason
    # a store bounded at 8 MB that the same work fills: warm-up along the CPU too
    bounded = 60e6 + np.minimum(1e6 * cpu, 8e6) + 2e6 * ((t * 0.9) % 1.0)
    assert judge_recorded(t, bounded, cpu=(t, cpu)).state != "leak"


def test_a_process_that_hardly_used_a_cpu_is_judged_in_time():
    t = np.arange(0.0, 20.0, 0.1)
    y = 60e6 + 1e6 * t
    v = judge_recorded(t, y, cpu=(t, 0.01 * t))  # 0.2 s of CPU in 20 s: a coarse clock
    assert v.state == "leak" and v.basis == "time"
    requests = (t, 50.0 * t)  # counted requests come first
    assert judge_recorded(t, y, requests_done=requests, cpu=(t, t)).basis == "requests"


def rate_ramp(kept_per_request: float = 0.0, imports_bytes: float = 0.0):
    """A served app's 11 s read 10 times a second: requests finishing from 0.5 s on at
    970 a second, the rate climbing from 3 s on to 1,170 at the end (other work on the
    host easing off: session_api's app_ttl in the clean-clone CI run of 2026-12-02 went
    from ~950-1,020 to ~1,160 a second). Its store holds the last 2 s of sessions, 9 KB
    each (17 MB at 970 a second, on a 45-MB process), so it grows with the rate; the
    allocator's creep adds 0.15 MB a second (app_ttl's floor crept ~1.6 MB in a quiet
    10-s run). ``kept_per_request``: bytes a request kept for good on top (a leak);
    ``imports_bytes``: what the process loads at 0.45 s, just before its first requests
    (a series that begins with the process, as the in-process watchdog's does).
    (t, rss, the requests' end times)."""
    t = np.arange(0.0, 11.0, 0.1)
    fine = np.arange(0.5, 11.0, 0.001)  # the rate on a millisecond grid
    rate = 970 + np.clip(fine - 3.0, 0.0, None) / 8.0 * 200
    done = np.cumsum(rate * 0.001)
    ends = np.interp(np.arange(1.0, done[-1]), done, fine)  # request k ends when done hits k
    served = np.interp(t, fine, done, left=0.0)
    in_the_last_2s = served - np.interp(t - 2.0, fine, done, left=0.0)
    rss = 45e6 + 9e3 * in_the_last_2s + 0.15e6 * t + kept_per_request * served
    rss += (np.arange(len(t)) % 3) * 2e4  # a small saw-tooth
    rss += np.where(t >= 0.45, imports_bytes, 0.0)
    return t, rss, ends


def test_a_store_of_the_last_seconds_that_grows_with_a_rising_request_rate_is_not_a_leak():
    t, rss, ends = rate_ramp()
    v = judge_recorded(t, rss, request_end_s=ends)
    assert v.state == UNDETERMINED, v.reason
    assert "memory floor rises steadily" in v.reason  # what the floor alone had said
    assert "the request rate rose" in v.reason and "a store bounded in time" in v.reason
    assert "steady request rate" in v.settle


def test_a_leak_under_the_same_rising_rate_stays_a_leak():
    # 300 bytes a request kept: ~2.5 MB more over the judged part (7.1 MB in all), beyond
    # what the store's growth with the rate (up to ~2.6 MB) and a growth too small to
    # matter (2 MiB) account for
    t, rss, ends = rate_ramp(kept_per_request=300.0)
    v = judge_recorded(t, rss, request_end_s=ends)
    assert v.state == "leak", v.reason
    assert v.bytes_per_request is not None and v.bytes_per_request > 300.0


def test_a_rise_with_the_rate_steady_is_not_put_down_to_the_rate():
    # the same floor, the requests at a steady 3,200 a second: its rise is the count's
    t, rss, _ = rate_ramp()
    v = judge_recorded(t, rss, request_end_s=np.arange(0.5, 11.0, 1.0 / 3_200))
    assert v.state == "leak" and "the request rate rose" not in v.reason, v.reason


def test_what_loaded_before_the_first_request_is_not_counted_as_the_store():
    # leaky_cache.py under the in-process watchdog: its series starts with the process,
    # and the imports and model (45 MB) land within one reading of the first requests; a
    # store bounded from the series' start counted them ("at most the 66 MB the requests
    # had added") and excused a leak of 1 KB a request under the ramp (1 in 6-8 runs of
    # test_watch here, and a clean-clone CI run)
    t, rss, ends = rate_ramp(kept_per_request=1_000.0, imports_bytes=45e6)
    v = judge_recorded(t, rss, request_end_s=ends)
    assert v.state == "leak", v.reason
    t, rss, ends = rate_ramp(imports_bytes=45e6)  # the store alone, the same imports
    v = judge_recorded(t, rss, request_end_s=ends)
    assert v.state == UNDETERMINED and "a store bounded in time" in v.reason, v.reason
