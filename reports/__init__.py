"""Renderers: results of the analyzers -> terminal text (and, later, JSON and HTML)."""

from reports.terminal import render_summary

__all__ = ["render_summary"]
