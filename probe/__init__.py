"""probe: profiling and bottleneck diagnosis for Python AI inference services.

Instrumentation for the service's own code (stays light: importing ``probe`` pulls in
neither pandas nor nvtx):

    import probe

    @probe.stage
    def preprocess(x): ...

    @probe.stage("model")
    def infer(x): ...

    with probe.request(id=req_id):
        with probe.span("download"):
            ...

Collection is started by ``probe run service.py``; without it the decorators only emit
NVTX ranges (when an NVTX tool such as Nsight Systems is attached).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from probe.errors import ProbeError

if TYPE_CHECKING:
    from probe.spans import Span, current_request_id, log_spans, request, span, stage

__version__ = "0.1.0"

# The span API loads on its first use: probe's own helper processes (the sidecar beside
# the target, the finisher, the command line) import ``probe.*`` without needing it, and
# probe.spans with logging and json is ~15 ms of CPU, on the target's cores for the sidecar.
_SPAN_API = ("Span", "current_request_id", "log_spans", "request", "span", "stage")


def __getattr__(name: str) -> Any:
    if name not in _SPAN_API:
        raise AttributeError(f"module 'probe' has no attribute {name!r}")
    value = getattr(importlib.import_module("probe.spans"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_SPAN_API})


__all__ = [
    "ProbeError",
    "Span",
    "__version__",
    "current_request_id",
    "log_spans",
    "request",
    "span",
    "stage",
]
