"""Renderers: an ``Analysis`` (``probe.analyzers.analysis``) -> the outputs of a run.

Each output is one module behind the same two members -- ``from_analysis(analysis)``
builds its plain data (what tests check), ``render()`` turns that into the file's text
(bytes, for a binary format) -- and is registered in ``OUTPUTS`` under its ``--format``
name: the next exporter is one module plus one line here. ``probe.reports.pipeline`` runs
them at the end of a run and for ``probe analyze`` / ``probe report``; ``probe export``
the exporters (Perfetto, Chrome trace JSON, speedscope, pprof, OTLP), each bounded by its
``limits`` where it declares them.

Outputs with a model of their own: ``terminal.DiffText`` (``probe diff``'s comparison)
and ``leak`` (``probe watch``'s leak report, written from inside watched services:
numpy-free and pandas-free, like ``page`` and ``json``, which it uses).

The names below load on first use (the HTML renderer pulls in plotly).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, ClassVar, Protocol

if TYPE_CHECKING:
    from probe.analyzers.analysis import Analysis

__all__ = ["OUTPUTS", "Output", "output"]

# --format name -> "module:class"
OUTPUTS = {
    "text": "probe.reports.terminal:Verdict",
    "json": "probe.reports.json:DiagnosisJson",
    "html": "probe.reports.html:HtmlReport",
    # exports for the tools people already use (``probe export``)
    "perfetto": "probe.reports.perfetto:PerfettoTrace",
    "chrome": "probe.reports.chrome:ChromeTrace",
    "speedscope": "probe.reports.speedscope:SpeedscopeProfile",
    "pprof": "probe.reports.pprof:PprofProfile",
    "otlp": "probe.reports.otlp:OtlpExport",
}


class Output(Protocol):
    """One output format: plain data first, its text second."""

    format: ClassVar[str]
    filename: ClassVar[str]  # its name in a run directory

    @classmethod
    def from_analysis(cls, analysis: Analysis) -> Output: ...

    def render(self) -> str | bytes: ...


def output(name: str) -> type[Output]:
    """The output registered as ``name`` (``KeyError`` for an unknown one)."""
    module, _, cls = OUTPUTS[name].partition(":")
    found: type[Output] = getattr(importlib.import_module(module), cls)
    return found
