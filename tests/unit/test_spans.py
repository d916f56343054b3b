"""The span API: one mechanism used as bare decorator, named decorator and context manager."""

from __future__ import annotations

import asyncio
import enum
import gc
import inspect
import json
import logging
import os
import pickle
import subprocess
import sys
import threading
import weakref

import pytest

import probe
from probe import spans
from tests.build_env import c_compiler_and_headers


def records(rec: spans.SpanRecorder) -> list[dict]:
    out = []
    for buf, rows in rec.drain():
        for sid, parent, name, cat, start, end, req, attrs in rows:
            out.append(
                dict(
                    span_id=sid,
                    parent_id=parent,
                    name=name,
                    category=cat,
                    start=start,
                    end=end,
                    request_id=req,
                    attrs=attrs,
                    thread=buf.ident,
                )
            )
    return out


def on_threads(fn, n: int) -> None:
    """``fn`` on ``n`` threads at once, all joined."""
    threads = [threading.Thread(target=fn) for _ in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def test_bare_decorator_names_span_after_function(recorder):
    @probe.stage
    def preprocess(x):
        return x + 1

    assert preprocess(1) == 2
    [r] = records(recorder)
    assert r["name"].endswith("preprocess")
    assert r["category"] == "stage"
    assert r["end"] >= r["start"]


def test_named_decorator_and_context_manager_record_name_and_attrs(recorder):
    @probe.stage("model", batch=8)
    def infer():
        with probe.span("inner", kind="cpu"):
            pass

    infer()
    by_name = {r["name"]: r for r in records(recorder)}
    assert by_name["model"]["attrs"] == {"batch": 8}
    assert by_name["inner"]["attrs"] == {"kind": "cpu"}
    assert by_name["inner"]["parent_id"] == by_name["model"]["span_id"]
    assert by_name["model"]["parent_id"] is None


def test_methods_staticmethods_and_return_values_are_preserved(recorder):
    class Model:
        @probe.stage("forward")
        def forward(self, x):
            return x * 2

        @probe.stage
        @staticmethod
        def helper(x):
            return x - 1

    m = Model()
    assert m.forward(3) == 6
    assert Model.helper(3) == 2
    assert Model.forward.__name__ == "forward"
    assert {r["name"] for r in records(recorder)} == {"forward", "Model.helper"}


def test_exception_still_closes_span_and_propagates(recorder):
    @probe.stage("boom")
    def boom():
        raise ValueError("x")

    with pytest.raises(ValueError):
        boom()
    with pytest.raises(KeyError), probe.span("cm"):
        raise KeyError("k")
    names = [r["name"] for r in records(recorder)]
    assert names == ["boom", "cm"]
    assert probe.current_request_id() is None  # context restored


def test_request_marks_nested_spans_with_its_id(recorder):
    with probe.request(id="req-42"):
        with probe.stage("decode"):
            pass
    with probe.request():
        with probe.stage("decode"):
            pass
    rs = records(recorder)
    reqs = [r for r in rs if r["category"] == "request"]
    decodes = [r for r in rs if r["name"] == "decode"]
    assert decodes[0]["request_id"] == "req-42"
    assert reqs[0]["request_id"] == "req-42"
    assert decodes[1]["request_id"] == reqs[1]["request_id"] is not None
    assert decodes[1]["request_id"] != "req-42"


def test_async_tasks_keep_their_own_parents(recorder):
    @probe.stage("fetch")
    async def fetch(i):
        await asyncio.sleep(0.01)
        with probe.span("parse"):
            await asyncio.sleep(0)
        return i

    async def main():
        async def handle(i):
            with probe.request(id=f"r{i}"):
                return await fetch(i)

        return await asyncio.gather(*(handle(i) for i in range(3)))

    assert asyncio.run(main()) == [0, 1, 2]
    rs = records(recorder)
    by_id = {r["span_id"]: r for r in rs}
    for parse in [r for r in rs if r["name"] == "parse"]:
        fetch_span = by_id[parse["parent_id"]]
        request_span = by_id[fetch_span["parent_id"]]
        assert fetch_span["name"] == "fetch"
        assert request_span["category"] == "request"
        assert parse["request_id"] == fetch_span["request_id"] == request_span["request_id"]
    assert len({r["request_id"] for r in rs}) == 3


def test_threads_record_into_their_own_buffers(recorder):
    s = probe.stage("work")
    together = threading.Barrier(4)  # alive at once: thread idents are reused after exit

    def worker():
        together.wait()
        for _ in range(100):
            with s:
                pass

    on_threads(worker, 4)
    drained = recorder.drain()
    assert len(drained) == 4
    assert all(len(rows) == 100 for _, rows in drained)
    assert len({buf.ident for buf, _ in drained}) == 4
    # and nested parents never cross threads
    assert all(row[1] is None for _, rows in drained for row in rows)


def test_drain_while_appending_loses_nothing_and_duplicates_nothing(recorder):
    stop = threading.Event()
    calls = [0]

    @probe.span("tick")
    def tick():
        pass

    def producer():
        while not stop.is_set():
            tick()
            calls[0] += 1

    t = threading.Thread(target=producer)
    t.start()
    ids: list[int] = []
    for _ in range(300):
        ids.extend(row[0] for _, rows in recorder.drain() for row in rows)
    stop.set()
    t.join()
    ids.extend(row[0] for _, rows in recorder.drain() for row in rows)
    assert calls[0] > 0
    assert len(ids) == calls[0]
    assert len(set(ids)) == len(ids)


def test_inactive_spans_record_nothing_but_emit_nvtx_ranges():
    class FakeDomain:
        def __init__(self):
            self.events = []

        def get_event_attributes(self, message):
            return message

        def push_range(self, attrs):
            self.events.append(("push", attrs))

        def pop_range(self):
            self.events.append(("pop",))

        def start_range(self, attrs):
            self.events.append(("start", attrs))
            return attrs

        def end_range(self, rng):
            self.events.append(("end", rng))

    fake = FakeDomain()
    previous = spans.set_range_domain(fake)
    try:
        rec = spans.SpanRecorder()  # not activated

        @probe.stage("pre")
        def pre():
            with probe.span("io"):
                pass

        async def coro():
            return 1

        pre()
        asyncio.run(probe.stage("async-stage")(coro)())
        assert rec.drain() == []
        assert fake.events == [
            ("push", "pre"),
            ("push", "io"),
            ("pop",),
            ("pop",),
            ("start", "async-stage"),
            ("end", "async-stage"),
        ]
    finally:
        spans.set_range_domain(previous)


def test_structured_log_line_per_span(caplog):
    spans.log_spans(True)
    try:
        with caplog.at_level(logging.INFO, logger="probe.spans"):
            with probe.span("download", url_count=3):
                pass
    finally:
        spans.log_spans(False)
    [rec] = [r for r in caplog.records if r.name == "probe.spans"]
    line = json.loads(rec.getMessage())
    assert line["name"] == "download" and line["category"] == "span"
    assert line["attrs"] == {"url_count": 3}
    assert line["duration_ms"] >= 0


def test_generator_functions_are_refused_with_advice():
    with pytest.raises(TypeError, match="generator"):

        @probe.stage
        def gen():
            yield 1


def test_context_manager_needs_a_name():
    with pytest.raises(TypeError, match="needs a name"), probe.stage():
        pass


@probe.stage("picklable")
def module_level_stage(x: int, *, scale: int = 2) -> int:
    """Doubles."""
    return x * scale


def test_a_decorated_function_keeps_what_callers_read_from_a_function(recorder):
    assert module_level_stage.__name__ == "module_level_stage"
    assert module_level_stage.__qualname__ == "module_level_stage"
    assert module_level_stage.__doc__ == "Doubles."
    assert module_level_stage.__module__ == __name__
    assert module_level_stage.__wrapped__.__name__ == "module_level_stage"
    # frameworks (FastAPI, click) read the signature through __wrapped__
    signature = inspect.signature(module_level_stage)
    assert list(signature.parameters) == ["x", "scale"] and signature.return_annotation == "int"
    # multiprocessing pickles functions by reference
    assert pickle.loads(pickle.dumps(module_level_stage)) is module_level_stage
    assert weakref.ref(module_level_stage)() is module_level_stage
    assert module_level_stage(3, scale=3) == 9
    assert [r["name"] for r in records(recorder)] == ["picklable"]


def test_decorated_methods_bind_as_methods_and_classmethods_to_the_class(recorder):
    class Model:
        scale = 10

        @probe.stage
        def forward(self, x, *, bias=0):
            return (self, x + bias)

        @probe.stage
        @classmethod
        def build(cls):
            return cls

    m = Model()
    assert m.forward(1, bias=2) == (m, 3)
    assert Model.forward(m, 1) == (m, 1)  # looked up on the class: unbound, as a function
    assert Model.build() is Model and m.build() is Model
    assert [r["name"] for r in records(recorder)] == ["Model.forward"] * 2 + ["Model.build"] * 2


def test_a_decorated_closure_in_a_cycle_is_collected():
    def make():
        @probe.stage("cyclic")
        def f():
            return f  # the closure refers to the wrapper: a cycle through __wrapped__

        return weakref.ref(f)

    ref = make()
    gc.collect()
    assert ref() is None


def test_a_failing_recorder_does_not_hide_the_function_s_own_error():
    class BrokenRecorder(spans.SpanRecorder):
        def thread_buffer(self):
            raise RuntimeError("recorder broke")

    @probe.stage("work")
    def work():
        raise ValueError("the function's own")

    spans.activate(BrokenRecorder())
    try:
        with pytest.raises(ValueError, match="the function's own"):
            work()
        with pytest.raises(KeyError, match="the block's own"), probe.span("block"):
            raise KeyError("the block's own")
        assert probe.current_request_id() is None
    finally:
        spans.activate(None)


@pytest.mark.skipif(
    os.environ.get("PROBE_PURE_SPANS") == "1", reason="this is the pure-Python run already"
)
def test_the_span_suite_holds_on_the_pure_python_path():
    """Both hot paths, one behaviour: this file again, with PROBE_PURE_SPANS=1."""
    env = {**os.environ, "PROBE_PURE_SPANS": "1"}
    check = subprocess.run(
        [sys.executable, "-c", "from probe import spans; print(spans.uses_compiled_path())"],
        env=env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert check.stdout.strip() == "False", check.stderr
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", __file__],
        env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]


@pytest.mark.skipif(not c_compiler_and_headers(), reason="no C compiler or Python headers")
@pytest.mark.skipif(os.environ.get("PROBE_PURE_SPANS") == "1", reason="pure path asked for")
def test_where_a_c_compiler_is_the_compiled_span_path_is_the_one_in_use():
    assert spans.uses_compiled_path(), (
        "probe._fastspans was not built although a C compiler is here: "
        "install with `pip install -e .` (the README's test command) to build it in place"
    )


def _journal_line(tid, records):
    """What probe.rundir.writer writes for one thread's batch: the reference."""
    return json.JSONEncoder(separators=(",", ":"), default=str).encode([[tid], records])


class _Flag(enum.IntEnum):
    on = 1


class _Unencodable:
    def __str__(self):
        return "<written as its str>"


def test_the_compiled_journal_line_is_json_s_own_byte_for_byte():
    odd_text = ['plain', 'quote " and \\ backslash', "tab\tnew\nline\r\x00\x1f\x7f",
                "é ü ß", "中文", "emoji 🚀 astral 𝄞", "", "\u2028\u2029"]  # fmt: skip
    records = []
    for i, text in enumerate(odd_text):
        records.append((i + 1, None if i % 2 else i, text, "stage", 10**12 + i,
                        10**12 + i + 500, f"r{i}" if i % 3 else None, None))  # fmt: skip
    records.append((99, 1, "GET /items/{id}", "request", 2**62, 2**62 + 1, "req-7",
                    {"served": True, "status": 200, "route": "/items/{id}", "t": 0.5,
                     "obj": _Unencodable(), "nested": {"a": [1, "ü"]}}))  # fmt: skip
    records.append((-5, 0, "neg", "span", 0, -1, "x", {}))
    # a served request's attrs (written without the encoder), then dicts it is handed:
    # a key that is not a str, a value past 64 bits, a float, an int subclass
    flat = {"served": True, "error": False, "route": None, "status": 200, "lag": -3}
    records.extend(
        (200 + i, None, "GET /x", "request", 1, 2, "r", {**flat, text: text})
        for i, text in enumerate(odd_text)
    )
    records.extend(
        (300, None, "GET /y", "request", 1, 2, None, {**flat, **odd})
        for odd in ({1: "int key"}, {"big": 2**64}, {"t": 1.5}, {"k": _Flag.on})
    )
    line = spans.encode_batch(7, records)
    if not spans.uses_compiled_path():
        assert line is None  # the writer encodes it
        return
    assert line == _journal_line(7, records)
    assert json.loads(line) == json.loads(_journal_line(7, records))


@pytest.mark.parametrize(
    "odd",
    [
        (2**64, None, "big id", "stage", 1, 2, None, None),  # past 64 bits
        (True, None, "bool id", "stage", 1, 2, None, None),  # an int subclass
        (1, None, "float time", "stage", 1.5, 2, None, None),
        (1, None, 4.2, "stage", 1, 2, None, None),  # a name that is not a str
        (1, None, "short"),
    ],
)
def test_a_record_the_compiled_encoder_does_not_expect_is_left_to_the_writer(odd):
    assert spans.encode_batch(3, [(1, None, "fine", "stage", 1, 2, None, None), odd]) is None


def test_spans_and_their_journal_leak_no_objects(recorder):
    """A reference kept per span (a C refcount slip) would show as ~one block a span."""

    @probe.stage("leaf")
    def leaf(x):
        if x % 7 == 0:
            raise ValueError(x)
        return x

    def work(n):
        for i in range(n):
            with probe.request(id="r"), probe.span("block", k=1):
                try:
                    leaf(i)
                except ValueError:
                    pass
        for buf, rows in recorder.drain():
            spans.encode_batch(buf.ident, rows)

    work(2_000)  # warm: caches, thread buffers, interned names
    gc.collect()
    before = sys.getallocatedblocks()
    work(20_000)
    gc.collect()
    assert sys.getallocatedblocks() - before < 2_000  # 60,000 spans made


def test_a_span_made_by_name_alone_is_made_once_and_serves_every_block(recorder):
    assert probe.span("load") is probe.span("load")
    assert probe.stage("load") is not probe.span("load")  # a category of its own
    assert probe.stage("load").category == "stage" and probe.span("load").category == "span"
    with_attrs = probe.span("load", batch=8)
    assert with_attrs is not probe.span("load") and with_attrs.attrs == {"batch": 8}


def test_probe_span_takes_every_form_and_documents_itself_whichever_path_answers(recorder):
    # compiled, the callable answers one exact str from the kept spans and hands every
    # other form to the Python factory: each form still makes what it says
    class Name(str):
        pass

    assert probe.span(Name("fetch")).name == "fetch"
    assert probe.span(name="parse").name == "parse"
    assert probe.stage("load", rows=3).attrs == {"rows": 3}
    assert callable(probe.span(lambda: None))  # a bare decorator
    # help() and inspect read it as the function it stands for
    assert probe.stage.__name__ == "stage" and "pipeline stage" in probe.stage.__doc__
    assert list(inspect.signature(probe.span).parameters) == ["name_or_fn", "name", "attrs"]


def test_one_kept_span_nested_in_itself_records_each_block_under_the_one_around_it(recorder):
    with probe.span("step"):
        with probe.span("step"):
            pass
    inner, outer = sorted(records(recorder), key=lambda r: r["end"])
    assert inner["parent_id"] == outer["span_id"] and outer["parent_id"] is None
    assert outer["start"] <= inner["start"] <= inner["end"] <= outer["end"]


def test_one_kept_span_open_on_many_threads_at_once_records_each_thread_s_own(recorder):
    started = threading.Barrier(4)

    def work() -> None:
        with probe.span("fetch"):
            started.wait(5)  # all four open together
            with probe.span("parse"):
                pass

    on_threads(work, 4)
    rows = records(recorder)
    fetch = {r["thread"]: r["span_id"] for r in rows if r["name"] == "fetch"}
    parse = {r["thread"]: r["parent_id"] for r in rows if r["name"] == "parse"}
    assert len(fetch) == 4 and parse == fetch


def test_names_past_the_kept_many_are_still_made_each_time(recorder, monkeypatch):
    monkeypatch.setattr(spans, "_NAMED_KEPT", 2)
    made = [probe.span(f"item {i}") for i in range(5)]
    assert [s.name for s in made] == [f"item {i}" for i in range(5)]
    assert probe.span("item 4") is not made[4]  # not kept: the cache holds 2 at most
    with made[4]:
        pass
    [r] = records(recorder)
    assert r["name"] == "item 4"
