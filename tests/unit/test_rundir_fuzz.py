"""1,000 damaged run directories, seeded: each ends in a diagnosis or in one clear line
(``ProbeError``, exit status 2), never in a traceback or a hang.

The mutations are what travels badly or is made by hand: meta.json replaced by null, a
list, a number, nested thousands deep, a section or a field of the wrong type, NaN,
Infinity, numbers past 2**63, fields deleted; Parquet tables swapped, emptied, replaced
by garbage, columns retyped to text, filled with NaN/Inf/huge/negative values, nulled or
dropped; journals of junk rows, wrong widths and deep nesting. Before the reader checked
what it reads (``probe.rundir.validate``), 129 of 300 ended in a traceback.
"""

from __future__ import annotations

import json
import math
import multiprocessing
import random
import shutil
import signal
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from probe.analyzers.analysis import analyze
from probe.errors import ProbeError
from probe.reports.json import DiagnosisJson
from probe.reports.terminal import Verdict
from probe.rundir import load
from tests.synthetic import MS, T0, RunBuilder

VARIANTS = 1000
SEED = 20261123
BAD = [
    None, [], {}, "x", -1, 0, 1.5, 1e308, float("nan"), float("inf"), -float("inf"),
    2**70, True, [1, "a"], {"a": {"b": []}},
]  # fmt: skip


def base_run(path: Path) -> Path:
    """A small run with every table the analysis reads: requests of two stages on two
    threads, their samples, the process's resources, the host, the heap."""
    b = RunBuilder(duration_s=1.0)
    work = b.stack("main", "handle", "postprocess")
    wait = b.stack("main", "handle", "fetch", leaf_call="sock.recv_into")
    for k in range(20):
        start = k * 50.0
        rid = b.span("request", start, start + 45, category="request")
        b.span("fetch", start, start + 20, parent=rid)
        b.span("postprocess", start + 20, start + 45, parent=rid)
        b.sample(1, start + 10, wait, cpu_ms=0.0, reason="network")
        b.sample(1, start + 30, work)
        b.sample(2, start + 30, wait, cpu_ms=0.0, reason="lock")
    for k in range(0, 1001, 100):
        b.resources(k, 0.4 * k / 1000, (100 << 20) + k * 1000)
        b.system(k, 30.0)
        b.rows["heap"].append((T0 + k * MS, 50_000 + k, 10_000_000 + k))
    return b.write(path)


def _mutate_meta(rng: random.Random, d: Path) -> None:
    p = d / "meta.json"
    try:
        meta = json.loads(p.read_text())
    except (ValueError, RecursionError):
        return
    if not isinstance(meta, dict) or not meta:
        return
    r = rng.random()
    if r < 0.1:
        p.write_text(json.dumps(rng.choice([None, [], "x", 1, 1.5, True])))
        return
    if r < 0.15:
        p.write_text('{"a": ' + "[" * 5000 + "]" * 5000 + "}")
        return
    key = rng.choice(sorted(meta))
    if rng.random() < 0.3 and isinstance(meta[key], dict) and meta[key]:
        meta[key][rng.choice(sorted(meta[key]))] = rng.choice(BAD)
    elif rng.random() < 0.2:
        del meta[key]
    else:
        meta[key] = rng.choice(BAD)
    p.write_text(json.dumps(meta))


def _number(rng: random.Random, v: object, *, integer: bool) -> float | int:
    if rng.random() < 0.3:
        return rng.choice(
            [-(2**62), 2**62, -1, 0] if integer else [math.nan, math.inf, 1e300, -1.0]
        )
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return 0
    if integer:
        return int(v) if math.isfinite(v) and abs(v) < 2**62 else 0
    return float(v)


def _mutate_table(rng: random.Random, d: Path) -> None:
    tables = sorted(d.glob("*.parquet"))
    if not tables:
        return
    t = rng.choice(tables)
    r = rng.random()
    if r < 0.15 and len(tables) > 1:
        u = rng.choice([x for x in tables if x != t])
        tmp = d / "swap.tmp"
        t.rename(tmp)
        u.rename(t)
        tmp.rename(u)
        return
    if r < 0.25:
        t.write_bytes(rng.choice([b"", b"garbage", b"PAR1" + rng.randbytes(64)]))
        return
    try:
        table = pq.read_table(t)
    except (OSError, pa.ArrowException):
        return
    if not table.num_rows:
        return
    col = rng.randrange(table.num_columns)
    name, values = table.column_names[col], table.column(col).to_pylist()
    kind = rng.random()
    if kind < 0.3:
        arr = pa.array([str(v) for v in values])
    elif kind < 0.5:
        arr = pa.array([_number(rng, v, integer=False) for v in values], pa.float64())
    elif kind < 0.7:
        arr = pa.array([_number(rng, v, integer=True) for v in values], pa.int64())
    elif kind < 0.85:
        pq.write_table(table.drop([name]), t)
        return
    else:
        arr = pa.nulls(table.num_rows)
    pq.write_table(table.set_column(col, name, arr), t)


def _mutate_journal(rng: random.Random, d: Path) -> None:
    table = rng.choice(["samples", "spans", "stacks", "frames", "heap", "resources", "threads"])
    lines = [
        json.dumps([[], [[rng.choice(BAD) for _ in range(rng.randrange(1, 12))]]], default=str)
        for _ in range(3)
    ]
    lines.append(json.dumps([[1, 2], [[3]]]))
    depth = rng.choice([10, 3000])
    lines.append("[" * depth + "]" * depth if rng.random() < 0.3 else "not json")
    (d / f"{table}.jsonl").write_text("\n".join(lines) + "\n")
    (d / f"{table}.parquet").unlink(missing_ok=True)


class _Hang(Exception):
    pass


def _alarm(signum, frame):
    raise _Hang


def _variants(base: Path, work: Path, ks: range) -> list[str]:
    """Variants ``ks`` (each seeded by its number: one reproduces alone); what failed."""
    failures: list[str] = []
    previous = signal.signal(signal.SIGALRM, _alarm)
    try:
        for k in ks:
            rng = random.Random(SEED * 100_003 + k)
            d = work / f"v{k}"
            shutil.copytree(base, d)
            for _ in range(rng.choice([1, 1, 2, 3])):
                rng.choice([_mutate_meta, _mutate_table, _mutate_table, _mutate_journal])(rng, d)
            signal.alarm(10)
            try:
                analysis = analyze(load(d))
                Verdict.from_analysis(analysis).render()
                DiagnosisJson.from_analysis(analysis).render()
            except ProbeError as e:
                if "\n" in str(e):
                    failures.append(f"v{k}: a ProbeError of several lines: {e}"[:200])
            except _Hang:
                failures.append(f"v{k}: hung")
            except Exception as e:  # noqa: BLE001 -- every one is the failure reported
                failures.append(f"v{k}: {type(e).__name__}: {e}"[:200])
            finally:
                signal.alarm(0)
            shutil.rmtree(d)
    finally:
        signal.signal(signal.SIGALRM, previous)
    return failures


def test_a_thousand_damaged_run_directories_end_in_a_diagnosis_or_one_clear_error(tmp_path):
    base = base_run(tmp_path / "base")
    # two worker processes (this machine kind has two cores): ~30 s instead of ~60 s
    halves = [range(0, VARIANTS, 2), range(1, VARIANTS, 2)]
    with ProcessPoolExecutor(2, mp_context=multiprocessing.get_context("fork")) as pool:
        found = pool.map(_variants, [base] * 2, [tmp_path] * 2, halves)
        failures = [f for part in found for f in part]
    assert not failures, f"{len(failures)} of {VARIANTS}:\n" + "\n".join(failures[:20])


@pytest.mark.parametrize(
    ("meta", "says"),
    [
        ("null", "expected a JSON object, got NoneType"),
        ("[1, 2]", "expected a JSON object, got list"),
        ('"x"', "expected a JSON object, got str"),
        ('{"a": ' + "[" * 5000 + "]" * 5000 + "}", "nested too deeply"),
    ],
)
def test_a_meta_json_that_is_no_object_is_one_line_naming_the_file(tmp_path, meta, says):
    run = base_run(tmp_path / "run")
    (run / "meta.json").write_text(meta)
    with pytest.raises(ProbeError, match=says) as error:
        load(run)
    assert "meta.json" in str(error.value)


def test_a_field_of_the_wrong_type_is_named_with_its_section(tmp_path):
    run = base_run(tmp_path / "run")
    meta = json.loads((run / "meta.json").read_text())
    meta["host"]["cpu_count"] = "two"
    (run / "meta.json").write_text(json.dumps(meta))
    with pytest.raises(ProbeError, match=r"meta.json: host.cpu_count: expected an integer"):
        load(run)


def test_a_table_swapped_for_another_or_retyped_is_named_with_its_column(tmp_path):
    run = base_run(tmp_path / "run")
    (run / "samples.parquet").rename(tmp_path / "samples")
    (run / "spans.parquet").rename(run / "samples.parquet")
    with pytest.raises(ProbeError, match=r"samples.parquet: no column 'ts_ns'"):
        load(run)
    run = base_run(tmp_path / "again")
    table = pq.read_table(run / "spans.parquet")
    col = table.column_names.index("start_ns")
    texts = pa.array([str(v) for v in table.column(col).to_pylist()])
    pq.write_table(table.set_column(col, "start_ns", texts), run / "spans.parquet")
    with pytest.raises(ProbeError, match=r"spans.parquet: column 'start_ns' holds string"):
        load(run)


def test_a_run_recorded_before_task_samples_had_main_task_loads_with_it_false(tmp_path):
    run = base_run(tmp_path / "run")
    rows = {
        "ts_ns": [T0], "thread_id": [1], "stack_id": [0], "wait_reason": ["network"],
        "tasks": [2.0], "wall_ns": [10 * MS],
    }  # fmt: skip
    pq.write_table(pa.table(rows), run / "task_samples.parquet")
    tasks = load(run).tables["task_samples"]
    assert list(tasks["main_task"]) == [False] and list(tasks["tasks"]) == [2.0]
