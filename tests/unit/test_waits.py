"""Wait reasons read from the leaf frame's call site."""

from __future__ import annotations

import dis
import queue
import socket
import subprocess
import sys
import threading
import time
import types

import pytest

from probe.samplers.waits import WaitClassifier, callee_at, enclosing_reason


def calls_in(fn) -> list[str]:
    return [
        callee_at(fn.__code__, i.offset)
        for i in dis.get_instructions(fn)
        if i.opname in ("CALL", "CALL_FUNCTION_EX")
    ]


def test_callee_names_for_every_call_shape():
    def f(sock, lk, q, x, y, z, a):
        time.sleep(1)
        sock.recv(1024)
        lk.acquire(timeout=1)
        q.get(timeout=1)
        foo(bar(1), 2)  # noqa: F821
        x.y(z.w(a), a[1], k=3)
        print(*a)

    assert calls_in(f) == [
        "time.sleep",
        "sock.recv",
        "lk.acquire",
        "q.get",
        "bar",
        "foo",
        "z.w",
        "x.y",
        "print",
    ]


def test_attribute_chains_report_owner_and_method():
    class C:
        def m(self, n):
            return self.sock.recv_into(n)

    assert calls_in(C.m) == ["sock.recv_into"]


def reason_of(fn) -> list[str | None]:
    c = WaitClassifier()
    return [
        c.classify(fn.__code__, i.offset)[1] for i in dis.get_instructions(fn) if i.opname == "CALL"
    ]


def test_reasons_for_classic_blocking_calls():
    def f(sock, lk, q, ev, cuda):
        time.sleep(0.1)
        sock.recv(10)
        lk.acquire()
        q.get()
        ev.wait()
        subprocess.run(["true"])
        cuda.synchronize()
        open("x").read()

    assert reason_of(f) == [
        "sleep",
        "network",
        "lock",
        "lock",
        "lock",
        "subprocess",
        "gpu_sync",
        "disk",
        "disk",
    ]


def test_plain_python_call_has_no_wait_reason():
    def f(xs):
        return sorted(xs)

    assert reason_of(f) == [None]


def test_stdlib_module_decides_for_ambiguous_calls():
    # queue.get's leaf is threading.Condition.wait; socket.makefile reads leaf in socket.py
    c = WaitClassifier()
    q: queue.Queue[int] = queue.Queue()

    def waiter():
        try:
            q.get(timeout=2)
        except queue.Empty:
            pass

    t = threading.Thread(target=waiter)
    t.start()
    time.sleep(0.1)
    import sys

    leaf = sys._current_frames()[t.ident]
    callee, reason, _line = c.classify(leaf.f_code, leaf.f_lasti)  # while still blocked
    q.put(1)
    t.join()
    assert reason == "lock"
    assert leaf.f_code.co_filename.endswith("threading.py")
    assert callee  # e.g. waiter.acquire


def test_in_a_module_of_locks_only_the_calls_that_block_are_lock_waits():
    # Condition.notify's `waiter.release()` and `waiters.remove(waiter)` return at once:
    # a thread seen on them waits for the GIL; Condition.wait's `waiter.acquire()` blocks
    def sites(fn) -> dict[str, str | None]:
        c = WaitClassifier()
        return {
            c.classify(fn.__code__, i.offset)[0]: c.classify(fn.__code__, i.offset)[1]
            for i in dis.get_instructions(fn)
            if i.opname == "CALL"
        }

    notify = sites(threading.Condition.notify)
    assert notify["waiter.release"] is None and notify["waiters.remove"] is None
    assert sites(threading.Condition.wait)["waiter.acquire"] == "lock"
    assert sites(queue.Queue.put)["not_full.wait"] == "lock"
    # C calls named like blocking Python ones: SimpleQueue.put, str.join never block
    from concurrent.futures import ThreadPoolExecutor

    assert sites(ThreadPoolExecutor.submit)["_work_queue.put"] is None

    def joins(parts, q):
        q.get()
        return ", ".join(parts)

    assert reason_of(joins) == ["lock", None]


def leaf_while_blocked(target) -> tuple[str, str | None, int]:
    """classify() of a thread's leaf frame while it runs ``target`` (blocked 0.3 s)."""
    seen = {}
    t = threading.Thread(target=target)
    t.start()
    time.sleep(0.15)
    leaf = sys._current_frames()[t.ident]
    seen["leaf"] = WaitClassifier().classify(leaf.f_code, leaf.f_lasti)
    t.join()
    return seen["leaf"]


def test_a_stdlib_module_outranks_the_name_of_the_call_blocking_in_it():
    # communicate() with one pipe reads it in subprocess.py: `self.stdout.read()` is a
    # disk read by its name, a wait on the child by its module
    def communicate():
        sleeper = [sys.executable, "-c", "import time; time.sleep(0.3)"]
        subprocess.Popen(sleeper, stdout=subprocess.PIPE).communicate()

    callee, reason, _ = leaf_while_blocked(communicate)
    assert callee.endswith("read") and reason == "subprocess"


def test_a_user_module_named_like_the_stdlib_s_takes_no_module_reason():
    code = compile("def f(lock):\n    lock.wait_done()\n", "/srv/app/queue.py", "exec")
    f = next(c for c in code.co_consts if hasattr(c, "co_code"))
    call = next(i for i in dis.get_instructions(f) if i.opname == "CALL")
    assert WaitClassifier().classify(f, call.offset)[1] is None


def test_blocking_below_subprocess_frames_is_a_wait_on_the_child():
    import selectors

    assert enclosing_reason([__file__, subprocess.__file__, selectors.__file__]) == "subprocess"
    assert enclosing_reason([__file__, selectors.__file__]) is None


def test_network_wait_in_socket_module():
    a, b = socket.socketpair()
    try:
        f = a.makefile("rb")
        import sys

        seen = {}

        def reader():
            f.readline()

        t = threading.Thread(target=reader)
        t.start()
        time.sleep(0.1)
        leaf = sys._current_frames()[t.ident]
        seen["r"] = WaitClassifier().classify(leaf.f_code, leaf.f_lasti)
        b.sendall(b"x\n")
        t.join()
        assert seen["r"][1] == "network"
    finally:
        a.close()
        b.close()


def test_a_warm_specialised_call_site_is_still_read():
    """Hot code blocks on the specialised PRECALL of 3.11, not on CALL."""
    import sys

    def nap(seconds):
        time.sleep(seconds)

    for _ in range(200):  # warm enough for the adaptive interpreter to specialise
        nap(0)
    ready = threading.Event()

    def runner():
        ready.set()
        nap(0.3)

    t = threading.Thread(target=runner)
    t.start()
    ready.wait()
    time.sleep(0.1)
    leaf = sys._current_frames()[t.ident]
    callee, reason, line = WaitClassifier().classify(leaf.f_code, leaf.f_lasti)
    t.join()
    assert (callee, reason) == ("time.sleep", "sleep")
    assert line == nap.__code__.co_firstlineno + 1


def test_matrix_product_operator_is_marked_native():
    def f(a, b):
        a @= b
        c = a + b
        return a @ c

    binary_ops = [i.offset for i in dis.get_instructions(f) if i.opname == "BINARY_OP"]
    assert [callee_at(f.__code__, o) for o in binary_ops] == [
        "operator.matmul",
        "",
        "operator.matmul",
    ]
    assert WaitClassifier().classify(f.__code__, binary_ops[-1])[1] is None


def test_operators_on_arrays_are_native_and_on_builtins_are_python():
    np = __import__("pytest").importorskip("numpy")

    def work(a, values):
        for _ in range(200):
            x = a + a  # numpy: stays unspecialised
            y = values[0] + 1.0  # list index, float add: specialised once warm
            z = a[1]  # ndarray subscript
        return x, y, z

    array = np.ones(4)
    work(array, [1.0, 2.0])
    classifier = WaitClassifier()
    ops = [
        classifier.classify(work.__code__, i.offset)[0]
        for i in dis.get_instructions(work)
        if i.opname in ("BINARY_OP", "BINARY_SUBSCR")
    ]
    # a + a, values[0], (+ 1.0), a[1]
    assert ops == ["operator.binop", "", "", "operator.getitem"]


def test_a_thread_blocked_entering_a_with_lock_block_waits_on_the_lock():
    # `with self._lock:` has no Python frame of its own: the leaf sits on BEFORE_WITH
    class Client:
        def __init__(self) -> None:
            self._lock = threading.Lock()

        def call(self) -> None:
            with self._lock:
                pass

    client = Client()
    client._lock.acquire()
    t = threading.Thread(target=client.call)
    t.start()
    try:
        time.sleep(0.1)
        leaf = sys._current_frames()[t.ident]
        callee, reason, _ = WaitClassifier().classify(leaf.f_code, leaf.f_lasti)
    finally:
        client._lock.release()
        t.join()
    assert (callee, reason) == ("self._lock.__enter__", "lock")


def test_the_classifier_keeps_site_answers_not_every_function_s_instructions():
    # kept for every function sampled, the decoded instructions grew a FastAPI app's
    # memory with the run (~6 MB in 16 s) and read as the service's leak
    import tracemalloc

    def functions(n: int, tag: str) -> list:
        body = "\n".join(f"    v{k} = time.sleep(x + {k})" for k in range(60))
        out = []
        for i in range(n):
            scope: dict = {"time": time}
            exec(f"def f_{tag}_{i}(x):\n{body}\n", scope)  # noqa: S102 -- distinct code objects
            out.append(scope[f"f_{tag}_{i}"].__code__)
        return out

    def first_call(code) -> int:
        return next(i.offset for i in dis.get_instructions(code) if i.opname == "CALL")

    classifier = WaitClassifier()
    # the call sites found first: decoding fills each code object's own caches (its
    # co_code copy, ~4 KB here), the target's memory whoever decodes it, once
    first = [(code, first_call(code)) for code in functions(100, "a")]
    second = [(code, first_call(code)) for code in functions(100, "b")]
    tracemalloc.start()
    try:
        for code, at in first:
            assert classifier.classify(code, at)[:2] == ("time.sleep", "sleep")
        after_first = tracemalloc.get_traced_memory()[0]
        for code, at in second:
            classifier.classify(code, at)
        grew = tracemalloc.get_traced_memory()[0] - after_first
    finally:
        tracemalloc.stop()
    # measured: ~310 bytes a function (the site's answer); ~250 KB when every function's
    # decoded instructions were kept
    assert grew < 100 * 2_000, f"{grew / 100:,.0f} bytes kept per function sampled"


def test_an_installed_package_is_named_from_its_own_root_inside_the_stdlib_s_folder():
    # site-packages usually sits in lib/python3.X/: read from the stdlib's root, torch's
    # files were "site-packages/torch/..." and no package key ever matched
    import os

    from probe.samplers.waits import module_path

    stdlib = os.path.dirname(os.__file__)
    inside = os.path.join(stdlib, "site-packages", "torch", "cuda", "__init__.py")
    assert module_path(inside) == "torch/cuda/__init__.py"
    assert module_path(queue.__file__) == "queue.py"
    assert module_path("/srv/app/queue.py") == ""


def _code_objects(module):
    """Every code object of a module's functions and methods, nested ones included."""
    seen, todo = (
        [],
        [
            f.__code__
            for obj in vars(module).values()
            for f in ([obj] if callable(obj) else []) + list(getattr(obj, "__dict__", {}).values())
            if isinstance(getattr(f, "__code__", None), types.CodeType)
        ],
    )
    while todo:
        code = todo.pop()
        seen.append(code)
        todo.extend(c for c in code.co_consts if isinstance(c, type(code)))
    return seen


def test_instructions_read_from_the_bytes_are_dis_s_own():
    """The sampler decodes a call site's bytecode itself (dis is ~10x slower); what it
    reads must be what dis reads, instruction by instruction, names included."""
    import asyncio.base_events
    import json.decoder
    import socket as socket_module

    from probe.samplers import waits

    if not waits._RAW_BYTECODE:
        pytest.skip(f"dis is used as it is on Python {sys.version_info[:2]}")
    named = waits._LOADS | waits._ATTRS  # the instructions whose names the walk reads
    compared = 0
    for module in (asyncio.base_events, json.decoder, socket_module, threading, waits):
        for code in _code_objects(module):
            ours = waits._instructions(code)
            theirs = [i for i in dis.get_instructions(code) if i.opname != "EXTENDED_ARG"]
            assert [(i.offset, i.opcode, i.opname, i.arg) for i in ours] == [
                (i.offset, i.opcode, i.opname, i.arg) for i in theirs
            ], code
            for mine, reference in zip(ours, theirs, strict=True):
                if mine.opname in named:
                    assert mine.argval == reference.argval, (code, mine.offset)
            compared += len(ours)
    assert compared > 10_000


def test_every_site_is_classified_as_through_dis(monkeypatch):
    """The bytes read directly, and the sites skipped without decoding (no call there),
    change no answer: every instruction of real modules' functions, both ways."""
    import asyncio.base_events
    import concurrent.futures.thread
    import socket as socket_module

    from probe.samplers import waits

    if not waits._RAW_BYTECODE:
        pytest.skip(f"dis is used as it is on Python {sys.version_info[:2]}")
    codes = [
        code
        for module in (asyncio.base_events, concurrent.futures.thread, socket_module, queue)
        for code in _code_objects(module)
    ]
    sites = [(code, i.offset) for code in codes for i in dis.get_instructions(code)]
    direct = WaitClassifier()
    answers = [direct.classify(code, offset) for code, offset in sites]
    monkeypatch.setattr(waits, "_RAW_BYTECODE", False)
    through_dis = WaitClassifier()
    assert answers == [through_dis.classify(code, offset) for code, offset in sites]
    assert sum(1 for callee, reason, _ in answers if reason) > 20  # blocking calls among them
