"""Spans: ``stage``, ``span`` and ``request``, one mechanism used three ways.

Contract
--------
* ``@stage``, ``@stage("name")``, ``with stage("name"):`` (and the same for ``span``
  and ``request``) work on plain functions, methods and ``async def`` functions.
* A span object is an immutable descriptor: the state of one entry (its id, start
  time, parent) lives in the ``_current`` context variable, never on the object, so one
  object can be entered concurrently from many threads and asyncio tasks.
* Nesting follows ``contextvars``: per thread, and per asyncio task (each task runs in a
  copy of its creator's context, so children see their parent span).
* Each finished span is appended, as
  ``(span_id, parent_id, name, category, start_ns, end_ns, request_id, attrs)``,
  to a list owned by the current thread (``SpanRecorder``): no lock and no I/O on the hot
  path. The collector drains those lists about once a second.
* NVTX: an NVTX range (domain ``probe``) is pushed and popped around each span when an
  NVTX tool is attached. NVTX calls are no-ops unless the profiler (``nsys``) injects its
  library through ``NVTX_INJECTION64_PATH``; we check that variable once and only then
  import ``nvtx`` -- which saves its numpy import (~110 ms) and ~50 ns a span otherwise.
* With no recorder active, spans still emit NVTX ranges and record nothing.
* While a torch.profiler window of ``probe run`` is open, each span also opens a
  ``record_function`` range (``set_range_domain``), so the window's trace ties the
  stage to the ops and kernels it launched.
* Opt-in structured timing logs: one JSON line per span on the logger ``probe.spans``.
* Two implementations of the hot path, one behaviour: ``probe._fastspans`` (C, built by
  setup.py where a compiler is: ~0.3 us a span) and the pure-Python path below (~0.5 us;
  the reference, and what runs where the extension is not built or where
  ``PROBE_PURE_SPANS=1`` asks for it: the span tests run on both, the benchmark prints
  both). ``uses_compiled_path()`` says which one this process runs.
"""

from __future__ import annotations

import functools
import itertools
import json
import logging
import os
import threading
from collections.abc import Callable
from contextvars import ContextVar
from time import perf_counter_ns
from typing import TYPE_CHECKING, Any, TypeVar, overload

__all__ = [
    "Span",
    "SpanRecorder",
    "ThreadSpans",
    "current_request_id",
    "encode_batch",
    "log_spans",
    "request",
    "span",
    "stage",
    "uses_compiled_path",
]

F = TypeVar("F", bound=Callable[..., Any])

# (span_id, request_id, parent_value, start_ns, owner) of the innermost open span.
_Ctx = tuple[int, "str | None", Any, int, object]
_current: ContextVar[_Ctx | None] = ContextVar("probe_current_span", default=None)
_ids = itertools.count(1)

_log = logging.getLogger("probe.spans")

# Process-wide switches, read on every span; set through activate()/log_spans().
_recorder: SpanRecorder | None = None
_logging_on: bool = os.environ.get("PROBE_LOG_SPANS", "") not in ("", "0")


# Code flags (inspect.CO_*), read directly: importing inspect costs ~8 ms of every run.
_CO_GENERATOR, _CO_COROUTINE, _CO_ASYNC_GENERATOR = 0x20, 0x80, 0x200


def _code_flags(fn: Any) -> int:
    while isinstance(fn, functools.partial):
        fn = fn.func
    fn = getattr(fn, "__func__", fn)
    code = getattr(fn, "__code__", None)
    return code.co_flags if code is not None else 0


def _nvtx_domain_from_env() -> Any:
    if not (os.environ.get("NVTX_INJECTION64_PATH") or os.environ.get("NVTX_INJECTION32_PATH")):
        return None
    try:
        import nvtx
    except ImportError:  # pragma: no cover - nvtx is a hard dependency
        return None
    return nvtx.get_domain("probe")


_nvtx: Any = _nvtx_domain_from_env()


def _compiled_path() -> Any:
    """``probe._fastspans`` when it is built, wanted, and times with perf_counter_ns's
    clock (CLOCK_MONOTONIC: checked, not assumed); None otherwise."""
    if os.environ.get("PROBE_PURE_SPANS", "") not in ("", "0"):
        return None
    try:
        from probe import _fastspans
    except ImportError:  # built only where a C compiler was (setup.py)
        return None
    before = perf_counter_ns()
    read = _fastspans.clock_ns()
    return _fastspans if before <= read <= perf_counter_ns() else None


_fast: Any = _compiled_path()


def uses_compiled_path() -> bool:
    """Whether spans run on the compiled hot path (``probe._fastspans``) in this process."""
    return _fast is not None


def _sync_compiled_path() -> None:
    """Hand the switches the pure path reads as globals to the compiled path."""
    if _fast is not None:
        _fast.configure(
            recorder=_recorder,
            logging_on=_logging_on,
            nvtx=_nvtx,
            ids=_ids,
            current=_current,
            emit_log=_emit_log,
        )


class ThreadSpans(list[tuple[Any, ...]]):
    """The finished spans of one thread, with that thread's identity."""

    __slots__ = ("ident", "native_id", "thread_name")

    def __init__(self, ident: int, native_id: int | None, thread_name: str) -> None:
        super().__init__()
        self.ident = ident
        self.native_id = native_id
        self.thread_name = thread_name


class SpanRecorder:
    """Owns the per-thread span buffers of one run."""

    def __init__(self) -> None:
        self.local = threading.local()
        self._buffers: list[ThreadSpans] = []
        self._lock = threading.Lock()

    def thread_buffer(self) -> ThreadSpans:
        """Slow path, once per thread: create and register this thread's buffer."""
        t = threading.current_thread()
        buf = ThreadSpans(threading.get_ident(), t.native_id, t.name)
        with self._lock:
            self._buffers.append(buf)
        self.local.buf = buf
        return buf

    def drain(self) -> list[tuple[ThreadSpans, list[tuple[Any, ...]]]]:
        """Take what every thread has recorded so far.

        Safe against concurrent appends without a lock: under the GIL ``len`` and
        ``del buf[:n]`` are each atomic, and appends only ever land past ``n``.
        """
        with self._lock:
            buffers = list(self._buffers)
        out = []
        for buf in buffers:
            n = len(buf)
            if n:
                out.append((buf, buf[:n]))
                del buf[:n]
        return out


def reset_ids(first: int) -> None:
    """Number spans from ``first`` on (a worker process: ids unique across the run)."""
    global _ids
    _ids = itertools.count(first)
    _sync_compiled_path()


def activate(recorder: SpanRecorder | None) -> None:
    """Route finished spans to ``recorder`` (None: record nothing)."""
    global _recorder
    _recorder = recorder
    _sync_compiled_path()


def active_recorder() -> SpanRecorder | None:
    """Where finished spans go now (None: nowhere)."""
    return _recorder


def log_spans(enabled: bool = True) -> None:
    """Emit one JSON line per finished span on the ``probe.spans`` logger (INFO)."""
    global _logging_on
    _logging_on = enabled
    _sync_compiled_path()


def range_domain() -> Any:
    """Where spans push their ranges now (None: nowhere); see ``set_range_domain``."""
    return _nvtx


def set_range_domain(domain: Any) -> Any:
    """Replace where spans push their ranges -- NVTX's domain (when a tool is attached),
    a test's fake, or a torch.profiler window's ``record_function`` ranges
    (``probe.samplers.torch_windows``) -- and return the previous one. A domain has
    NVTX's methods: ``get_event_attributes(message=name)``, ``push_range(attrs)`` and
    ``pop_range()`` (nested spans on a thread), ``start_range(attrs)`` and
    ``end_range(handle)`` (async spans). A span entered under one domain may exit under
    the next: a domain's ``pop_range`` must tolerate a range it never pushed."""
    global _nvtx
    previous, _nvtx = _nvtx, domain
    _sync_compiled_path()
    return previous


def current_request_id() -> str | None:
    """The id of the request (``probe.request``) the caller runs in, if any."""
    ctx = _current.get()
    return ctx[1] if ctx is not None else None


def _finish(record: tuple[Any, ...]) -> None:
    rec = _recorder
    if rec is not None:
        try:
            buf = rec.local.buf
        except AttributeError:
            buf = rec.thread_buffer()
        buf.append(record)
    if _logging_on:
        _emit_log(record)


# A record's attrs in the journal: what probe.rundir.writer's encoder writes
_attrs_json = json.JSONEncoder(separators=(",", ":"), default=str).encode


def encode_batch(tid: int, records: list[tuple[Any, ...]]) -> str | None:
    """One thread's finished spans as the spans journal's line: exactly what
    ``probe.rundir.writer`` writes for ``[[tid], records]``, ~5x faster (the collector's
    second-by-second cost: ~0.1 us a span against ~0.5). None where the compiled path is
    not in use, or a record holds a value it does not encode (the writer then does)."""
    if _fast is None:
        return None
    return _fast.encode_batch(tid, records, _attrs_json)


def _finish_after_error(record: tuple[Any, ...]) -> None:
    """Record the span of a call that raised. The call's own error is what its caller
    must see: a failure to record (the recorder's, not the service's) is dropped here; a
    recorder that fails fails again on the next call that returns, and raises there."""
    try:
        _finish(record)
    except Exception:
        pass


def _emit_log(record: tuple[Any, ...]) -> None:
    span_id, parent_id, name, category, start_ns, end_ns, request_id, attrs = record
    line = {
        "event": "span",
        "name": name,
        "category": category,
        "duration_ms": round((end_ns - start_ns) / 1e6, 6),
        "start_ns": start_ns,
        "span_id": span_id,
        "parent_id": parent_id,
        "request_id": request_id,
        "thread": threading.current_thread().name,
    }
    if attrs:
        line["attrs"] = attrs
    _log.info(json.dumps(line, default=str))


def _request_of(span: _PySpanCore, parent: _Ctx | None, span_id: int) -> str | None:
    """The request id a new span carries: its own (a request span) or its parent's."""
    if span.category == "request":
        return span.request_id if span.request_id is not None else f"r{span_id}"
    return parent[1] if parent is not None else None


class _PySpanCore:
    """The pure-Python core of ``Span``: its fields and its with-block (the reference for
    ``probe._fastspans.SpanCore``, which replaces it where it is built)."""

    __slots__ = ("name", "category", "attrs", "request_id", "_nvtx_cache")

    def __init__(
        self,
        name: str | None,
        category: str,
        attrs: dict[str, Any] | None = None,
        request_id: str | None = None,
    ) -> None:
        self.name = name
        self.category = category
        self.attrs = attrs or None
        self.request_id = request_id
        self._nvtx_cache: tuple[Any, Any] | None = None

    def _nvtx_attrs(self, domain: Any) -> Any:
        cache = self._nvtx_cache
        if cache is None or cache[0] is not domain:
            cache = (domain, domain.get_event_attributes(message=self.name))
            self._nvtx_cache = cache
        return cache[1]

    def __enter__(self) -> Any:
        if self.name is None:
            raise TypeError(f"probe.{self.category}() used as a context manager needs a name")
        dom = _nvtx
        if dom is not None:
            dom.push_range(self._nvtx_attrs(dom))
        if _recorder is None and not _logging_on:
            return self
        parent = _current.get()
        sid = next(_ids)
        _current.set((sid, _request_of(self, parent, sid), parent, perf_counter_ns(), self))
        return self

    def __exit__(self, *exc: object) -> None:
        end = perf_counter_ns()
        ctx = _current.get()
        if ctx is not None and ctx[4] is self:
            parent = ctx[2]
            _current.set(parent)
            record = (
                ctx[0],
                parent[0] if parent is not None else None,
                self.name,
                self.category,
                ctx[3],
                end,
                ctx[1],
                self.attrs,
            )
            if exc and exc[0] is not None:
                _finish_after_error(record)
            else:
                _finish(record)
        dom = _nvtx
        if dom is not None:
            dom.pop_range()


if TYPE_CHECKING:
    _SpanCore = _PySpanCore
else:
    _SpanCore = _fast.SpanCore if _fast is not None else _PySpanCore


class Span(_SpanCore):
    """A named span of a category; a decorator and a context manager at once."""

    __slots__ = ()

    def __repr__(self) -> str:
        return f"<probe {self.category} {self.name!r}>"

    async def __aenter__(self) -> Span:
        return self.__enter__()

    async def __aexit__(self, *exc: object) -> None:
        self.__exit__(*exc)

    # -- decorator ---------------------------------------------------------------------
    def __call__(self, fn: F) -> F:
        if isinstance(fn, (staticmethod, classmethod)):
            return type(fn)(self(fn.__func__))
        if not callable(fn):
            raise TypeError(f"probe.{self.category} decorates functions, not {type(fn).__name__}")
        flags = _code_flags(fn)
        if flags & (_CO_GENERATOR | _CO_ASYNC_GENERATOR):
            raise TypeError(
                f"probe.{self.category} cannot time generator {fn.__qualname__!r}: its body runs "
                "between the consumer's steps; wrap the consuming loop in `with probe.span(...)`"
            )
        if self.name is not None:
            span = self
        else:  # `main.<locals>.Model.run` reads better as `Model.run`
            span = Span(fn.__qualname__.rsplit("<locals>.", 1)[-1], self.category, self.attrs)
        if flags & _CO_COROUTINE:
            return _wrap_async(fn, span)  # type: ignore[return-value]
        if _fast is not None:
            return functools.update_wrapper(_fast.wrap_sync(fn, span), fn)  # type: ignore[return-value]
        return _wrap_sync(fn, span)  # type: ignore[return-value]


def _wrap_sync(fn: Callable[..., Any], span: Span) -> Callable[..., Any]:
    name, category, attrs = span.name, span.category, span.attrs
    fixed_request = span.request_id
    is_request = category == "request"
    current_get, current_set, current_reset = _current.get, _current.set, _current.reset
    clock = perf_counter_ns

    # Everything below is inlined on purpose: each Python call saved is ~40 ns a span.
    @functools.wraps(fn)
    def probe_span_wrapper(*args: Any, **kwargs: Any) -> Any:
        dom = _nvtx
        rec = _recorder
        if rec is None and not _logging_on:
            if dom is None:
                return fn(*args, **kwargs)
            dom.push_range(span._nvtx_attrs(dom))
            try:
                return fn(*args, **kwargs)
            finally:
                dom.pop_range()
        parent = current_get()
        sid = next(_ids)
        req: str | None
        if is_request:
            req = fixed_request if fixed_request is not None else f"r{sid}"
        else:
            req = parent[1] if parent is not None else None
        if dom is not None:
            dom.push_range(span._nvtx_attrs(dom))
        start = clock()
        token = current_set((sid, req, parent, start, span))
        try:
            result = fn(*args, **kwargs)
        except BaseException:
            end = clock()
            current_reset(token)
            if dom is not None:
                dom.pop_range()
            _finish_after_error(
                (sid, parent[0] if parent else None, name, category, start, end, req, attrs)
            )
            raise
        end = clock()
        current_reset(token)
        if dom is not None:
            dom.pop_range()
        record = (sid, parent[0] if parent else None, name, category, start, end, req, attrs)
        if rec is not None:
            try:
                rec.local.buf.append(record)
            except AttributeError:
                rec.thread_buffer().append(record)
        if _logging_on:
            _emit_log(record)
        return result

    return probe_span_wrapper


def _wrap_async(fn: Callable[..., Any], span: Span) -> Callable[..., Any]:
    name, category, attrs = span.name, span.category, span.attrs

    @functools.wraps(fn)
    async def probe_span_wrapper(*args: Any, **kwargs: Any) -> Any:
        # NVTX ranges are per thread and an awaiting coroutine interleaves with others on
        # the loop thread, so async spans use start/end ranges rather than push/pop.
        dom = _nvtx
        rng = dom.start_range(span._nvtx_attrs(dom)) if dom is not None else None
        try:
            if _recorder is None and not _logging_on:
                return await fn(*args, **kwargs)
            parent = _current.get()
            sid = next(_ids)
            req = _request_of(span, parent, sid)
            start = perf_counter_ns()
            token = _current.set((sid, req, parent, start, span))
            try:
                result = await fn(*args, **kwargs)
            except BaseException:
                end = perf_counter_ns()
                _current.reset(token)
                _finish_after_error(
                    (sid, parent[0] if parent else None, name, category, start, end, req, attrs)
                )
                raise
            end = perf_counter_ns()
            _current.reset(token)
            _finish((sid, parent[0] if parent else None, name, category, start, end, req, attrs))
            return result
        finally:
            if rng is not None:
                dom.end_range(rng)

    return probe_span_wrapper


# Spans made by name alone, kept for the next ``with probe.span(name):`` of the same name:
# a span holds no state of its own while open (that is in the context), so one object
# serves every block and thread, as a decorator's does. Making one per block (through
# make's checks and the object's making) cost ~0.25 us of a with-block's ~0.8: 0.80-0.85
# us before, 0.57-0.60 after (benchmarks/span_cost.py's "with span()", 2026-12-06), and
# 0.46 with the kept ones answered in C (``_fast.span_factory``: make's own call, its
# frame and its **attrs dict, was ~0.11 us of the 0.57; same benchmark, same day). At most
# this many names (chosen, not measured: stage names are few, and a name built per call,
# an f-string of an id, must not grow the cache without bound; past it, spans are made).
_NAMED_KEPT = 1024


def _factory(category: str) -> Callable[..., Any]:
    named: dict[str, Span] = {}

    @overload
    def make(name_or_fn: F, /) -> F: ...
    @overload
    def make(name_or_fn: str | None = None, /, **attrs: Any) -> Span: ...

    def make(name_or_fn: Any = None, /, name: str | None = None, **attrs: Any) -> Any:
        if type(name_or_fn) is str and name is None:  # ``with probe.span("x"):``, first
            if attrs:
                return Span(name_or_fn, category, attrs)
            span = named.get(name_or_fn)
            if span is None:
                span = Span(name_or_fn, category)
                if len(named) < _NAMED_KEPT:
                    named[name_or_fn] = span
            return span
        # a classmethod object is not callable, but is what a bare decorator gets
        if (callable(name_or_fn) and not isinstance(name_or_fn, str)) or isinstance(
            name_or_fn, (staticmethod, classmethod)
        ):
            return Span(None, category)(name_or_fn)  # type: ignore[type-var]
        return Span(name_or_fn if name_or_fn is not None else name, category, attrs)

    if _fast is None:
        return make
    # the common form answered in C from ``named``; ``make`` for the rest, and for
    # inspect.signature (``__wrapped__``)
    compiled = _fast.span_factory(named, make)
    functools.update_wrapper(compiled, make)
    return compiled


stage = _factory("stage")
stage.__name__ = stage.__qualname__ = "stage"
stage.__doc__ = """Mark a pipeline stage (preprocess, model, postprocess...).

``@stage``, ``@stage("name", **attrs)`` or ``with stage("name"):``. Stages are what the
diagnosis breaks a request into; keep them at stage granularity, never per inner call.
"""

span = _factory("span")
span.__name__ = span.__qualname__ = "span"
span.__doc__ = """Mark any region worth timing (a download, a lock...); same forms as ``stage``."""


def request(id: Any = None, **attrs: Any) -> Any:  # noqa: A002 - the public name
    """Mark one unit of work (a request or a batch): ``with probe.request(id=...):``.

    Spans opened inside it carry its id, which is how per-request latency and the
    request's critical path are computed. Without an id, one is made from the span id.
    """
    if callable(id) and not isinstance(id, str):  # bare @probe.request
        return Span("request", "request")(id)
    return Span("request", "request", attrs, request_id=None if id is None else str(id))


_sync_compiled_path()
