"""Renderers: the analyzers' results -> terminal text and diagnosis.json (HTML to come)."""

from probe.reports.json import render_json, write_diagnosis
from probe.reports.terminal import render_diff, render_verdict

__all__ = ["render_diff", "render_json", "render_verdict", "write_diagnosis"]
