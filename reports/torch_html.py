"""The PyTorch parts of the HTML reports: a trace's (``reports.trace_html``) and a run's
torch.profiler windows (``reports.html``). GPU time by kernel family and precision, GPU
idle time by cause, spans' host time beside the GPU time of the work they launched, the
copies, and the host's side: its ops by self time, its threads' time between ops, a
decoder's growing prefix, and a run's windows with links to their files. Plain data in
(``diagnosis.json``'s records), plotly specs and escaped ``Markup`` out."""

from __future__ import annotations

from typing import Any

from probe.reports.page import Markup, chart_text, html, join, layout, num

__all__ = [
    "copies_html",
    "host_ops_html",
    "idle_figure",
    "kernel_figure",
    "span_figure",
    "windows_html",
]

_PRECISION_COLOURS = {
    "fp64": "#8c564b", "fp32": "#d62728", "tf32": "#ff7f0e", "bf16": "#2ca02c",
    "fp16": "#17becf", "fp8": "#1f77b4", "fp4": "#9467bd", "int8": "#e377c2",
    "unknown": "#c7c7c7",
}  # fmt: skip


def kernel_figure(rows: list[dict[str, Any]]) -> dict[str, Any]:
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


def idle_figure(rows: list[dict[str, Any]]) -> dict[str, Any]:
    rows = [r for r in rows if r["idle_ns"] > 0]
    return {
        "data": [
            {"type": "bar", "x": [r["cause"] for r in rows],
             "y": [round(100 * r["share"], 2) for r in rows], "marker": {"color": "#9467bd"}}
        ] if rows else [],
        "layout": layout("", yaxis={"title": "% of the traced window"}),
    }  # fmt: skip


def span_figure(rows: list[dict[str, Any]]) -> dict[str, Any]:
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


def copies_html(rows: list[dict[str, Any]]) -> Markup:
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


def host_ops_html(cpu: dict[str, Any]) -> Markup:
    """The host's side (``diagnosis.json``'s ``cpu`` block): its busiest threads' time in
    ops and between them, the ops by self time, a decoder's growing prefix."""
    if not cpu.get("ops"):
        return Markup("<p class='muted'>No CPU ops in the trace.</p>")
    threads = join(
        html(
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            t["tid"],
            num(t["span_ns"] / 1e6, ",.1f"),
            num(1 - t["gap_share"], ".0%"),
            num(t["gap_share"], ".0%"),
            f"{t['top_level_ops']:,}",
            num(t["median_op_ns"] / 1e3, ",.1f"),
        )  # fmt: skip
        for t in cpu["threads"][:8]
    )
    ops = join(
        html(
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            o["name"],
            num(o["self_share"], ".1%"),
            num(o["self_ns"] / 1e6, ",.2f"),
            f"{o['calls']:,}",
            num(o["mean_ns"] / 1e3, ",.1f"),
            o["dtype"] or "—",
        )  # fmt: skip
        for o in cpu["ops"][:15]
    )
    return html(
        "<table><tr><th>thread</th><th>traced ms</th><th>in ops</th><th>outside any op "
        "(Python, waits)</th><th>top-level ops</th><th>median op µs</th></tr>{}"
        "</table><p class='muted'>Ops by self time (each op's time less its children's "
        "and the profiler's own cost per op, {} ns as the trace's gaps read it), {} kinds "
        "in all:</p><table><tr>"
        "<th>op</th><th>self share</th><th>self ms</th><th>calls</th><th>mean µs "
        "(inclusive)</th><th>first input</th></tr>{}</table>{}",
        threads,
        num(cpu.get("profiler_op_cost_ns"), ",.0f"),
        cpu.get("op_kinds", 0),
        ops,
        _prefix_html(cpu.get("growing_prefix")),
    )


def _prefix_html(prefix: dict[str, Any] | None) -> Markup:
    if not prefix:
        return Markup("")
    return html(
        "<p><b>Growing prefix:</b> <code>{}</code> on <code>{}</code>, {} steps in {} "
        "generation(s) from a prompt of {}: each step costs {} µs plus {} µs a token of "
        "prefix, so every step re-runs the whole sequence (no KV cache); a cache would "
        "make the steps {}× faster by that fit{}.</p>",
        prefix["op"], prefix["shape"], prefix["steps"], prefix["runs"],
        prefix["first_length"], num(prefix["per_step_us"], ",.0f"),
        num(prefix["per_token_us"], ",.1f"), num(prefix["speedup"], ".2f"),
        f" ({n} step(s) the host ran off its usual speed scaled to it: in them, the ops "
        "whose shapes do not change from step to step ran well off their time in the "
        "window's median step, slower or faster)"
        if (n := int(prefix.get("rescaled_steps") or 0)) else "",
    )  # fmt: skip


def windows_html(windows: list[dict[str, Any]], chosen: str) -> Markup:
    """A run's torch.profiler windows, each file linked (relative to report.html, in the
    run directory: Perfetto and chrome://tracing open it)."""
    rows = join(
        html(
            "<tr><td><a href='{0}'>{0}</a>{1}</td><td>{2} s</td><td>{3} s</td><td>{4}</td>"
            "<td>{5}</td><td>{6}</td></tr>",
            w["file"],
            (" (shown)" if w["file"] == chosen else "")
            + (" (short of the target's work)" if w.get("short_of_work") else ""),
            num(w.get("start_s"), ".2f"),
            num((w.get("end_s") or 0) - (w.get("start_s") or 0), ".2f"),
            f"{w.get('ops', 0):,}",
            _closing(w),
            w.get("limit") or "",
        )  # fmt: skip
        for w in windows
    )
    return html(
        "<table><tr><th>window (Kineto trace: open in Perfetto)</th><th>from</th>"
        "<th>length</th><th>ops</th><th>closing stalled the target</th><th>limit</th></tr>"
        "{}</table>",
        rows,
    )


def _closing(window: dict[str, Any]) -> str:
    """How long closing the window stopped the target (``0.42 s``); where it ran without
    the GIL, that it did not, and how long it took (``none (0.40 s, GIL free)``)."""
    stall, close = window.get("stall_s"), window.get("close_s")
    if stall == 0 and close:
        return f"none ({num(close, '.2f')} s, GIL free)"
    return f"{num(stall, '.2f')} s" if stall is not None else num(stall, ".2f")
