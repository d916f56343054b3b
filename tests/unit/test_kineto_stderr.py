"""Kineto's lines kept off the target's stderr around the profiler's calls, and nothing
else written meanwhile lost (probe.samplers.kineto_stderr)."""

from __future__ import annotations

import os

from probe.samplers.kineto_stderr import kinetos_lines_held_back, without_kinetos_lines

# as torch 2.13's profiler printed them under probe run (2026-12-06)
INIT = b"ERROR: External init callback must run in same thread as registerClient (97 != 10)\n"
START = b"USDT:2026-12-06 02:14:45 31877:31882 SyncActivityProfilerHandler.cpp:52] profiler_start\n"
STOP = b"USDT:2026-12-06 02:14:45 31877:31882 SyncActivityProfilerHandler.cpp:59] profiler_stop\n"


def test_kinetos_lines_are_dropped_and_every_other_line_kept_in_order():
    written = b"worker 1 ready\n" + INIT + START + b"ERROR: the model failed\n" + STOP + b"tail"
    assert without_kinetos_lines(written) == b"worker 1 ready\nERROR: the model failed\ntail"


def test_an_error_line_of_the_target_s_own_is_never_taken_for_kineto_s():
    own = b"ERROR: External service unreachable\nUSDT: profiler_start was called by us\n"
    assert without_kinetos_lines(own) == own


def test_what_others_write_to_stderr_in_the_block_reaches_it_after_and_kineto_s_does_not(
    capfd,
):
    os.write(2, b"before\n")
    with kinetos_lines_held_back():
        os.write(2, INIT + b"a line of the service's\n" + START)
        os.write(2, STOP)
    os.write(2, b"after\n")
    assert capfd.readouterr().err == "before\na line of the service's\nafter\n"


def test_a_closed_stderr_leaves_the_block_to_run_as_it_is():
    read_end, write_end = os.pipe()
    os.close(write_end)
    os.close(read_end)  # a descriptor number nothing holds now
    ran = []
    with kinetos_lines_held_back(fd=read_end):
        ran.append(True)
    assert ran == [True]


def test_stderr_is_its_own_again_after_a_block_that_raised(capfd):
    try:
        with kinetos_lines_held_back():
            os.write(2, b"kept\n")
            raise RuntimeError("the profiler failed")
    except RuntimeError:
        pass
    os.write(2, b"then\n")
    assert capfd.readouterr().err == "kept\nthen\n"
