"""The cyclic collector held off while other threads' frames are read (a crash on 3.11
otherwise: probe.samplers.collection), and given back as it was found."""

from __future__ import annotations

import gc
import sys

import pytest

from probe.samplers.collection import collector_held_off
from probe.samplers.stacks import StackSampler


@pytest.fixture
def collector_enabled():
    was = gc.isenabled()
    gc.enable()
    yield
    if not was:
        gc.disable()


def test_no_collection_inside_the_block_and_the_collector_back_after(collector_enabled):
    with collector_held_off():
        assert not gc.isenabled()
    assert gc.isenabled()
    with pytest.raises(ValueError), collector_held_off():
        raise ValueError("a read failed")
    assert gc.isenabled()


def test_a_collector_the_target_disabled_stays_disabled(collector_enabled):
    gc.disable()
    with collector_held_off():
        assert not gc.isenabled()
    assert not gc.isenabled()


def test_the_stack_sampler_reads_and_walks_frames_with_the_collector_held_off(
    collector_enabled,
):
    seen: list[bool] = []

    def current_frames():
        seen.append(gc.isenabled())
        return {1: sys._getframe()}

    sampler = StackSampler(current_frames=current_frames, thread_cpu=lambda tid: 0)
    sampler.sample()
    sampler.sample()
    assert seen == [False, False] and gc.isenabled()
