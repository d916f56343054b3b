"""probe batch-sweep's collection side: the timed calls on an injected clock, the batches
made from each kind of input, and the sweep's file read back."""

from __future__ import annotations

import json

import numpy as np
import pytest

from probe.batching import SweepSettings, batch_maker, read_sweep, sweep, write_sweep
from probe.batching.sweep import parse_sizes
from probe.errors import ProbeError


class Clock:
    """A clock the function under test advances: 1 ms a call plus 0.5 ms a request."""

    def __init__(self) -> None:
        self.now = 0

    def __call__(self) -> int:
        return self.now

    def model(self, batch: list[int]) -> None:
        self.now += 1_000_000 + 500_000 * len(batch)


def test_each_size_is_warmed_up_then_timed_for_its_budget():
    clock = Clock()
    settings = SweepSettings(sizes=(1, 4), min_time_s=0.01, min_calls=3, warmup_calls=2, passes=1)
    calls, notes = sweep(clock.model, lambda b: [0] * b, settings, clock=clock)
    assert notes == []
    by_size = calls.groupby("batch")["latency_s"]
    # 1.5 ms a call at batch 1: the 10-ms budget is passed on the 7th call
    assert by_size.size().to_dict() == {1: 7, 4: 4}
    assert by_size.median().to_dict() == pytest.approx({1: 1.5e-3, 4: 3e-3})


def test_the_sizes_are_timed_in_turn_each_pass_with_its_share_of_the_budget():
    clock, seen = Clock(), []

    def model(batch: list[int]) -> None:
        seen.append(len(batch))
        clock.model(batch)

    settings = SweepSettings(sizes=(1, 4), min_time_s=0.03, min_calls=3, warmup_calls=1)
    calls, _ = sweep(model, lambda b: [0] * b, settings, clock=clock)
    # each pass: a warm-up call, then 10 ms of calls (7 at 1.5 ms, 4 at 3 ms), size by size
    one_pass = [1] * 8 + [4] * 5
    assert seen == one_pass * 3
    assert calls.groupby(["pass", "batch"]).size().to_dict() == {
        (k, b): n for k in range(3) for b, n in ((1, 7), (4, 4))
    }


def test_a_pass_stops_at_its_share_of_the_most_calls():
    settings = SweepSettings(sizes=(1,), min_time_s=10.0, min_calls=1, max_calls=10, warmup_calls=0)
    calls, _ = sweep(lambda b: None, lambda b: [0] * b, settings)
    assert calls.groupby("pass").size().to_list() == [3, 3, 3]  # 10 // 3 a pass


def test_a_size_that_runs_out_of_memory_ends_the_sweep_and_says_so():
    def model(batch: list[int]) -> None:
        if len(batch) > 2:
            raise RuntimeError("CUDA out of memory. Tried to allocate 2.00 GiB")

    settings = SweepSettings(sizes=(1, 2, 4, 8), min_time_s=0, min_calls=1, warmup_calls=0)
    calls, notes = sweep(model, lambda b: [0] * b, settings)
    assert sorted(calls["batch"].unique()) == [1, 2]
    assert notes == ["batch 4 ran out of memory: the sweep ends at the sizes before it"]


def test_a_function_that_fails_at_the_first_size_is_an_error():
    def model(batch: list[int]) -> None:
        raise TypeError("expected a tensor")

    with pytest.raises(ProbeError, match="raised TypeError at batch 1: expected a tensor"):
        sweep(model, lambda b: [0] * b, SweepSettings(sizes=(1, 2)))


def test_sizes_are_a_list_or_a_doubling_range():
    assert parse_sizes("1-64") == (1, 2, 4, 8, 16, 32, 64)
    assert parse_sizes("3-20") == (3, 6, 12, 20)
    assert parse_sizes("8, 1,4,4") == (1, 4, 8)
    for bad in ("0-4", "8-2", "a,b", ""):
        with pytest.raises(ValueError):
            parse_sizes(bad)


def test_examples_are_taken_in_turn_and_kept_in_their_kind(tmp_path):
    array = np.arange(6).reshape(3, 2)
    np.save(tmp_path / "x.npy", array)
    make = batch_maker(str(tmp_path / "x.npy"))
    assert make(4).tolist() == [[0, 1], [2, 3], [4, 5], [0, 1]]
    (tmp_path / "x.jsonl").write_text('{"text": "a"}\n\n{"text": "b"}\n')
    assert batch_maker(str(tmp_path / "x.jsonl"))(3) == [{"text": "a"}, {"text": "b"}] + [
        {"text": "a"}
    ]
    (tmp_path / "x.json").write_text("[1, 2")
    with pytest.raises(ProbeError, match="is not a readable json file"):
        batch_maker(str(tmp_path / "x.json"))
    (tmp_path / "empty.json").write_text("[]")
    with pytest.raises(ProbeError, match="holds no examples"):
        batch_maker(str(tmp_path / "empty.json"))


def test_a_sweep_file_reads_back_and_a_damaged_one_is_named(tmp_path):
    calls, _ = sweep(
        lambda b: None, lambda b: [0] * b, SweepSettings(sizes=(1, 2), min_time_s=0, min_calls=2)
    )
    path = write_sweep(tmp_path / "s", calls, {"target": "m:f"})
    document, back = read_sweep(tmp_path / "s")
    assert document["target"] == "m:f" and len(back) == len(calls)
    # each call back in its pass
    assert (
        back.sort_values(["batch", "pass"])
        .reset_index(drop=True)
        .equals(calls.sort_values(["batch", "pass"]).reset_index(drop=True))
    )
    body = json.loads(path.read_text())
    body["calls_per_pass"]["1"] = [1, 1]
    path.write_text(json.dumps(body))
    with pytest.raises(ProbeError, match=r"calls_per_pass\['1'\] does not count"):
        read_sweep(path)
    del body["calls_per_pass"]  # a sweep written before passes: its calls, pooled
    path.write_text(json.dumps(body))
    assert list(read_sweep(path)[1].columns) == ["batch", "latency_s"]
    body["calls_s"]["2"] = [0.001, "fast"]
    path.write_text(json.dumps(body))
    with pytest.raises(ProbeError, match="holds 'fast', not a latency"):
        read_sweep(path)
    with pytest.raises(ProbeError, match="holds no batch_sweep.json"):
        read_sweep(tmp_path)


def test_an_interrupted_sweep_keeps_the_sizes_it_measured():
    def model(batch: list[int]) -> None:
        if len(batch) == 4:
            raise KeyboardInterrupt

    settings = SweepSettings(sizes=(1, 2, 4, 8), min_time_s=0, min_calls=1, warmup_calls=0)
    calls, notes = sweep(model, lambda b: [0] * b, settings)
    assert sorted(calls["batch"].unique()) == [1, 2]
    assert notes == ["interrupted at batch 4: the sweep ends at the sizes before it"]


def test_interrupted_in_a_later_pass_every_size_keeps_the_passes_it_finished():
    calls_made = []

    def model(batch: list[int]) -> None:
        calls_made.append(len(batch))
        if len(calls_made) == 6:  # pass 2's batch 4 (one call a size and pass)
            raise KeyboardInterrupt

    settings = SweepSettings(sizes=(1, 2, 4), min_time_s=0, min_calls=1, warmup_calls=0)
    calls, notes = sweep(model, lambda b: [0] * b, settings)
    assert calls.groupby("batch")["pass"].apply(list).to_dict() == {1: [0, 1], 2: [0, 1], 4: [0]}
    assert notes == ["interrupted at batch 4 in pass 2 of 3: each size keeps its passes"]


def test_an_unwritable_output_is_one_error(tmp_path):
    (tmp_path / "file").write_text("")
    calls, _ = sweep(lambda b: None, lambda b: [0] * b, SweepSettings(sizes=(1,), min_time_s=0))
    with pytest.raises(ProbeError, match="cannot write"):
        write_sweep(tmp_path / "file" / "sweep", calls, {})
