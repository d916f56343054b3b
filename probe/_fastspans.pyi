# The compiled span hot path (probe/_fastspans.c); see probe.spans.
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from typing import Any

class SpanCore:
    name: str | None
    category: str
    attrs: dict[str, Any] | None
    request_id: str | None
    def __init__(
        self,
        name: str | None,
        category: str,
        attrs: dict[str, Any] | None = ...,
        request_id: str | None = ...,
    ) -> None: ...
    def __enter__(self) -> Any: ...
    def __exit__(self, *exc: object) -> None: ...
    def _nvtx_attrs(self, domain: Any) -> Any: ...

class SpanWrapper:
    def __call__(self, *args: Any, **kwargs: Any) -> Any: ...

class SpanFactory:
    def __call__(self, *args: Any, **kwargs: Any) -> Any: ...

def wrap_sync(fn: Callable[..., Any], span: SpanCore, /) -> SpanWrapper: ...
def span_factory(named: dict[str, Any], fallback: Callable[..., Any], /) -> SpanFactory: ...
def configure(
    *,
    recorder: Any,
    logging_on: bool,
    nvtx: Any,
    ids: Iterator[int],
    current: ContextVar[Any],
    emit_log: Callable[[tuple[Any, ...]], None],
) -> None: ...
def clock_ns() -> int: ...
def encode_batch(
    tid: int, records: list[tuple[Any, ...]], encode: Callable[[Any], str], /
) -> str | None: ...
