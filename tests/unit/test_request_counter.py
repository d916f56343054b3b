"""probe watch's work axis: the requests a process finishes, counted in it into a shared
8-byte file and read from outside with ``pread``."""

from __future__ import annotations

import os
import threading

import pytest

import probe
from probe import spans
from probe.watchdog.work import RequestCounter, read_count


@pytest.fixture
def counter(tmp_path):
    made = RequestCounter(tmp_path / "requests")
    fd = os.open(tmp_path / "requests", os.O_RDONLY)
    yield made, fd
    os.close(fd)
    spans.activate(None)


def test_finished_requests_are_counted_from_every_thread_and_stages_are_not(counter):
    made, fd = counter
    assert made.start()
    assert read_count(fd) == 0

    @probe.stage
    def work() -> None:
        pass

    def serve(n: int) -> None:
        for i in range(n):
            with probe.request(id=i):
                work()

    threads = [threading.Thread(target=serve, args=(250,)) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    serve(10)
    assert read_count(fd) == 1010


def test_the_decorated_forms_count_too(counter):
    made, fd = counter
    made.start()

    @probe.request
    def handle() -> int:
        return 1

    assert sum(handle() for _ in range(7)) == 7
    assert read_count(fd) == 7


def test_another_recorder_in_place_leaves_the_count_unknown(counter):
    made, fd = counter
    spans.activate(spans.SpanRecorder())  # e.g. probe run's session in the same process
    assert not made.start()
    assert read_count(fd) is None


def test_a_counter_replaced_later_can_mark_its_count_unknown(counter):
    made, fd = counter
    made.start()
    with probe.request():
        pass
    spans.activate(spans.SpanRecorder())
    assert not made.in_place
    made.give_up()
    with probe.request():
        pass
    assert read_count(fd) is None


def test_an_unreadable_or_short_file_reads_as_unknown(tmp_path):
    short = tmp_path / "short"
    short.write_bytes(b"\x01\x02")
    fd = os.open(short, os.O_RDONLY)
    try:
        assert read_count(fd) is None
    finally:
        os.close(fd)
    assert read_count(10_000) is None  # a closed descriptor


def test_a_forked_child_s_requests_do_not_overwrite_the_watched_process_s_count(counter):
    made, fd = counter
    made.start()
    for i in range(5):
        with probe.request(id=i):
            pass
    pid = os.fork()
    if pid == 0:  # the child (a gunicorn worker, a pool's process): serves 50 of its own
        code = 1
        try:
            for i in range(50):
                with probe.request(id=i):
                    pass
            code = 0 if made.count == 55 else 2  # it still counts, in its own memory
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert read_count(fd) == 5
