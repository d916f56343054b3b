"""HTML report of a trace's diagnosis (``probe report TRACE.json.gz``).

The same self-contained page as a run's (``reports.page``: escaping by default, plotly
embedded, scripts allowed by nonce only): the verdict, what to change and what it buys,
then GPU time by kernel family and precision, GPU idle time by cause, each span's host
time beside the GPU time of the work it launched, the copies, and the notes.
``TraceHtmlReport.from_trace_diagnosis(d)`` builds the plain data, ``render()`` the page.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from probe.reports.html import recommendations_html
from probe.reports.page import Markup, chart_text, html, join, layout, num, page

if TYPE_CHECKING:
    from probe.analyzers.trace_diagnosis import TraceDiagnosis

__all__ = ["TraceHtmlReport"]

_PRECISION_COLOURS = {
    "fp64": "#8c564b", "fp32": "#d62728", "tf32": "#ff7f0e", "bf16": "#2ca02c",
    "fp16": "#17becf", "fp8": "#1f77b4", "fp4": "#9467bd", "int8": "#e377c2",
    "unknown": "#c7c7c7",
}  # fmt: skip


@dataclass(frozen=True)
class TraceHtmlReport:
    title: str
    verdict: dict[str, Any]
    recommendations: list[dict[str, Any]]
    copies: list[dict[str, Any]]
    notes: list[str]
    figures: dict[str, dict[str, Any]] = field(default_factory=dict)

    @classmethod
    def from_trace_diagnosis(cls, d: TraceDiagnosis) -> TraceHtmlReport:
        figures = {
            "kernels": _kernel_figure(d.kernels.to_dict("records")),
            "idle": _idle_figure(d.idle.to_dict("records")),
            "stages": _stage_figure(d.stages.head(20).to_dict("records")),
        }
        return cls(
            title=f"probe: {d.run['trace']}",
            verdict={**d.primary, **d.run},
            recommendations=[r.to_dict() for r in d.recommendations],
            copies=d.copies.to_dict("records"),
            notes=list(d.notes),
            figures={k: f for k, f in figures.items() if f["data"]},
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
        tail = html("<h2>Copies</h2>{}", _copies_html(self.copies))
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
        confidence=num(v.get("confidence"), ".0%"),
        window=num((v.get("wall_s") or 0) * 1e3, ",.2f"),
        busy=num(v.get("busy_share"), ".0%"),
        kernels=v.get("kernels", 0),
        gpus=gpus,
    )


def _kernel_figure(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Stacked bars: each family's share of GPU time, split by precision."""
    families = list(dict.fromkeys(str(r["family"]) for r in rows))
    data = []
    for precision in dict.fromkeys(str(r["precision"]) for r in rows):
        share = {str(r["family"]): r["share"] for r in rows if str(r["precision"]) == precision}
        data.append(
            {"type": "bar", "name": precision, "x": families,
             "y": [round(100 * share.get(f, 0.0), 2) for f in families],
             "marker": {"color": _PRECISION_COLOURS.get(precision, "#7f7f7f")}}
        )  # fmt: skip
    return {"data": data, "layout": layout("", barmode="stack", yaxis={"title": "% of GPU time"})}


def _idle_figure(rows: list[dict[str, Any]]) -> dict[str, Any]:
    rows = [r for r in rows if r["idle_ns"] > 0]
    return {
        "data": [
            {"type": "bar", "x": [r["cause"] for r in rows],
             "y": [round(100 * r["share"], 2) for r in rows], "marker": {"color": "#9467bd"}}
        ] if rows else [],
        "layout": layout("", yaxis={"title": "% of the traced window"}),
    }  # fmt: skip


def _stage_figure(rows: list[dict[str, Any]]) -> dict[str, Any]:
    names = [chart_text(r["name"]) for r in rows]
    return {
        "data": [
            {"type": "bar", "name": "host", "y": names, "orientation": "h",
             "x": [r["host_ns"] / 1e6 for r in rows], "marker": {"color": "#ff7f0e"}},
            {"type": "bar", "name": "GPU", "y": names, "orientation": "h",
             "x": [r["device_ns"] / 1e6 for r in rows], "marker": {"color": "#2ca02c"}},
        ] if rows else [],
        "layout": layout("", barmode="group", xaxis={"title": "ms"},
                         yaxis={"autorange": "reversed", "automargin": True},
                         height=max(260, 28 * len(rows) + 80)),
    }  # fmt: skip


def _copies_html(rows: list[dict[str, Any]]) -> Markup:
    if not rows:
        return Markup("<p class='muted'>No host-device copies in the trace.</p>")
    head = Markup(
        "<tr><th>direction</th><th>host memory</th><th>host waits</th><th>copies</th>"
        "<th>MB</th><th>GPU ms</th><th>GB/s</th></tr>"
    )
    body = join(
        html(
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td>"
            "<td>{}</td></tr>",
            r["direction"],
            r["host_memory"],
            "yes" if r["synchronous"] else "no",
            r["copies"],
            num(r["bytes"] / 1e6, ",.1f"),
            num(r["total_ns"] / 1e6, ",.2f"),
            num(r["gb_s"], ".1f"),
        )  # fmt: skip
        for r in rows
    )
    return html("<table>{}{}</table>", head, body)
