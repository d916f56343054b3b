"""HTML report of a trace's diagnosis (``probe report TRACE.json.gz``).

The same self-contained page as a run's (``reports.page``: escaping by default, plotly
embedded, scripts allowed by nonce only): the verdict, what to change and what it buys,
then GPU time by kernel family and precision, GPU idle time by cause, each span's host
time beside the GPU time of the work it launched, the copies, the host's ops and its
threads' time between them, and the notes (the parts shared with a run's report:
``reports.torch_html``).
``TraceHtmlReport.from_trace_diagnosis(d)`` builds the plain data, ``render()`` the page.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from probe.reports.html import recommendations_html
from probe.reports.page import Markup, confidence_cell, html, join, num, page
from probe.reports.torch_html import (
    copies_html,
    host_ops_html,
    idle_figure,
    kernel_figure,
    span_figure,
)

if TYPE_CHECKING:
    from probe.analyzers.trace_diagnosis import TraceDiagnosis

__all__ = ["TraceHtmlReport"]


@dataclass(frozen=True)
class TraceHtmlReport:
    title: str
    verdict: dict[str, Any]
    recommendations: list[dict[str, Any]]
    copies: list[dict[str, Any]]
    notes: list[str]
    figures: dict[str, dict[str, Any]] = field(default_factory=dict)
    cpu: dict[str, Any] = field(default_factory=dict)  # the host's ops (diagnosis' cpu)

    @classmethod
    def from_trace_diagnosis(cls, d: TraceDiagnosis) -> TraceHtmlReport:
        figures = {
            "kernels": kernel_figure(d.kernels.to_dict("records")),
            "idle": idle_figure(d.idle.to_dict("records")),
            "stages": span_figure(d.stages.head(20).to_dict("records")),
        }
        return cls(
            title=f"probe: {d.run['trace']}",
            verdict={**d.primary, **d.run},
            recommendations=[r.to_dict() for r in d.recommendations],
            copies=d.copies.to_dict("records"),
            notes=list(d.notes),
            figures={k: f for k, f in figures.items() if f["data"]},
            cpu=d.cpu_to_dict(),
        )

    def render(self, *, plotly_js: str | None = None) -> str:
        headings = {
            "kernels": "GPU time by kernel family and precision",
            "idle": "GPU idle time by cause",
            "stages": "Spans: host time and the GPU time of the work they launched",
        }
        figures = [(k, h, self.figures[k]) for k, h in headings.items() if k in self.figures]
        body = html(
            "{}<h2>What to change</h2>{}",
            _verdict_html(self.verdict),
            recommendations_html(self.recommendations),
        )
        notes = join(html("<li class='note'>{}</li>", n) for n in self.notes)
        tail = html(
            "<h2>Copies</h2>{}<h2>Host: CPU ops</h2>{}",
            copies_html(self.copies),
            host_ops_html(self.cpu),
        )
        if self.notes:
            tail += html("<h2>Notes</h2><ul>{}</ul>", notes)
        return page(self.title, body, figures, tail, plotly_js=plotly_js)


def _verdict_html(v: dict[str, Any]) -> Markup:
    gpus = ", ".join(sorted(set(v.get("gpus") or []))) or "no GPU"
    return html(
        "<section class='card verdict' id='verdict'><div class='kind'>{kind}/{subkind}</div>"
        "<p>{summary}</p><table><tr><th>share of the window</th><th>confidence</th>"
        "<th>window</th><th>GPU busy</th><th>kernels</th><th>GPU</th></tr>"
        "<tr><td>{share}</td><td>{confidence}</td><td>{window} ms</td><td>{busy}</td>"
        "<td>{kernels}</td><td>{gpus}</td></tr></table></section>",
        kind=v["kind"],
        subkind=v["subkind"] or "—",
        summary=v["summary"],
        share=num(v.get("share"), ".0%"),
        confidence=confidence_cell(v.get("confidence")),
        window=num((v.get("wall_s") or 0) * 1e3, ",.2f"),
        busy=num(v.get("busy_share"), ".0%"),
        kernels=v.get("kernels", 0),
        gpus=gpus,
    )
