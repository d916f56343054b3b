"""Worker shards merged into their run on load (probe.rundir.shards): written with the
collector's own writer, then read back through probe.rundir.load and compact."""

from __future__ import annotations

from pathlib import Path

from probe.rundir import compact, load
from probe.rundir.schema import SCHEMA_NAME, SCHEMA_VERSION
from probe.rundir.writer import RunWriter, prepare_run_dir


def write_process(path: Path, pid: int, tid: int, function: str, *, closed: bool = True) -> None:
    """One process's records: a thread, a span, and two samples in two stacks whose
    frame ids (1, 2) every process numbers alike."""
    path.mkdir(parents=True, exist_ok=True)
    w = RunWriter(path)
    worker = {"pid": pid, "ppid": 1, "started_by": "fork"}
    meta = {"schema": SCHEMA_NAME, "schema_version": SCHEMA_VERSION, "pid": pid}
    meta.update(start_unix_ns=pid, worker=worker)
    if closed:
        meta.update(end="2026-11-24T00:00:00Z", end_unix_ns=1, exit={"status": 0})
    w.write_meta(meta)
    w.append("threads", [(tid, tid, "MainThread", 0)])
    w.append("spans", [((pid << 32) + 1, None, "GET /a", "request", 0, 10, None, None)], (tid,))
    w.append("frames", [(1, "serve", "server.py", 1), (2, function, "app.py", 10)])
    w.append("stacks", [(1, "1", 0, ""), (2, "1;2", 0, "")])
    w.append("samples", [(5, tid, 1, 10, 10, "", 1, ""), (9, tid, 2, 10, 10, "", 1, "")])
    w.append("gc_pauses", [(7, 2, 1, pid * 1000, pid * 1000, tid)])
    w.flush()
    w.close()


def make_run(tmp_path: Path, *, closed: bool = True) -> Path:
    root = prepare_run_dir(tmp_path / "run")
    write_process(root, 100, 1000, "root_work")
    for pid, tid, fn in ((200, 2000, "handler"), (300, 3000, "handler")):
        write_process(root / "workers" / str(pid), pid, tid, fn, closed=closed or pid == 200)
    return root


def functions_of_samples(run) -> list[tuple[int, str]]:
    """(thread, the leaf function of its sample's stack) for every sample."""
    names = dict(zip(run.frames["frame_id"], run.frames["function"], strict=True))
    leaf = {
        int(s): names[int(ids.split(";")[-1])]
        for s, ids in zip(run.stacks["stack_id"], run.stacks["frame_ids"], strict=True)
        if ids
    }
    rows = zip(run.samples["thread_id"], run.samples["stack_id"], strict=True)
    return [(int(t), leaf[int(s)]) for t, s in rows]


def test_every_process_s_samples_keep_their_own_stacks_after_the_merge(tmp_path):
    run = load(make_run(tmp_path))
    assert functions_of_samples(run) == [
        (1000, "serve"), (1000, "root_work"), (2000, "serve"), (2000, "handler"),
        (3000, "serve"), (3000, "handler"),
    ]  # fmt: skip
    assert run.stacks["stack_id"].is_unique
    # a function every process recorded is one frame
    assert sorted(run.frames["function"]) == ["handler", "root_work", "serve"]


def test_threads_say_their_process_and_spans_keep_their_ids(tmp_path):
    run = load(make_run(tmp_path))
    assert dict(zip(run.threads["thread_id"], run.threads["pid"], strict=True)) == {
        1000: 100,
        2000: 200,
        3000: 300,
    }
    assert run.spans["span_id"].is_unique and len(run.spans) == 3
    assert [w["pid"] for w in run.workers] == [200, 300]


def test_each_process_s_collections_are_merged_with_the_pid_they_paused(tmp_path):
    # a collection stops its own process only: the analysis takes the one they held longest
    run = load(make_run(tmp_path))
    pauses = run.tables["gc_pauses"]
    assert dict(zip(pauses["pid"], pauses["pause_ns"], strict=True)) == {
        100: 100_000, 200: 200_000, 300: 300_000,
    }  # fmt: skip


def test_a_worker_that_never_closed_its_shard_is_salvaged_and_named(tmp_path):
    run = load(make_run(tmp_path, closed=False))
    assert len(run.spans) == 3  # its records up to its last flush are there
    assert [w["closed"] for w in run.workers] == [True, False]
    assert any("1 of 2 worker process(es) ended without closing" in n and "300" in n
               for n in run.notes)  # fmt: skip


def test_an_unreadable_shard_is_a_note_and_the_rest_of_the_run_stands(tmp_path):
    root = make_run(tmp_path)
    (root / "workers" / "300" / "meta.json").write_text("{not json")
    run = load(root)
    assert sorted(run.threads["pid"]) == [100, 200]
    assert any("worker shard 300 unreadable, left out" in n for n in run.notes)


def test_compaction_turns_every_finished_shard_to_parquet_and_reads_the_same(tmp_path):
    root = make_run(tmp_path)
    before = functions_of_samples(load(root))
    compact(root)
    assert (
        sorted(p.name for p in (root / "workers" / "200").iterdir() if p.suffix == ".jsonl") == []
    )
    assert (root / "workers" / "300" / "samples.parquet").is_file()
    assert functions_of_samples(load(root)) == before


def test_a_run_of_one_process_reads_as_before_with_its_pid_on_its_threads(tmp_path):
    root = prepare_run_dir(tmp_path / "run")
    write_process(root, 100, 1000, "root_work")
    run = load(root)
    assert list(run.threads["pid"]) == [100] and run.workers == []
