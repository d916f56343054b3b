"""The in-process watchdog's work axis: the requests the service finishes, counted by the
watchdog's own span recorder (no file), unknown while another recorder is in place."""

from __future__ import annotations

import probe
from probe import spans
from probe.watchdog.attribution import SiteTracker
from probe.watchdog.work import RequestCounter


def test_an_in_process_counter_counts_finished_requests_until_stopped():
    counter = RequestCounter()
    tracker = SiteTracker(work=counter if counter.start() else None)
    for i in range(5):
        with probe.request(id=i), probe.span("stage"):
            pass
    assert tracker.requests_done() == 5
    counter.stop()
    assert spans.active_recorder() is None
    assert tracker.requests_done() is None  # stopped: no longer counted


def test_with_another_recorder_in_place_the_work_is_unknown():
    other = spans.SpanRecorder()
    spans.activate(other)
    try:
        counter = RequestCounter()
        assert not counter.start()
        with probe.request():
            pass
        assert counter.done() is None and counter.count == 0
        assert spans.active_recorder() is other  # probe run's recorder is left alone
    finally:
        spans.activate(None)
