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

__version__ = "0.1.0"

from probe.errors import ProbeError
from probe.spans import Span, current_request_id, log_spans, request, span, stage

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
