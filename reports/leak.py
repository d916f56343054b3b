"""The leak report of ``probe watch --out DIR`` (``leak.json``, ``leak.html``) and its text
on stderr.

Input is the plain dict of ``Monitor.report()`` (schema ``probe.leak/1``): the process,
the settings, the verdict (with its growing sites, types and containers) and the memory
series as kept bins (min / median / max a bin). The page shows the verdict, the trend
chart -- the bins' band and floor, the fitted growth from its onset, the onset and the
limit -- and the tables of what grows. Strings from the watched process (command line,
file names) are escaped as in the run report.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any, TypeVar

from probe.analyzers.leaks.words import pile_notes, what_holds
from probe.atomicfile import write_atomic
from probe.errors import ProbeError
from probe.reports.json import json_safe
from probe.reports.page import MAX_POINTS, Markup, html, join, layout, num, page

_T = TypeVar("_T")

__all__ = [
    "alert_text",
    "growth_text",
    "leak_figure",
    "quiet_text",
    "render_leak_html",
    "status_text",
    "watching_text",
    "write_leak_report",
]


def alert_text(v: dict[str, Any]) -> str:
    """The alert as ``probe watch`` prints it: rate, interval, confidence, onset, limit."""
    low, high = v["slope_interval_bytes_per_s"]
    parts = [
        f"LEAK: memory grows {v['slope_bytes_per_s'] / 1e3:,.1f} KB/s{_per_request(v)} "
        f"(99% interval {low / 1e3:,.1f}-{high / 1e3:,.1f} KB/s, confidence "
        f"{v['confidence']:.1%})"
    ]
    if v.get("onset_s") is not None:
        parts.append(f"since {v['onset_s']:,.0f} s")
    if v.get("seconds_to_limit") is not None:
        parts.append(f"limit reached in {v['seconds_to_limit'] / 60:,.1f} min")
    _, held = what_holds(v)
    return (
        ", ".join(parts) + f"\n  {v['reason']}" + (f"\n  {held}" if held else "") + growth_text(v)
    )


def _per_request(v: dict[str, Any]) -> str:
    """The growth per request, when it was judged against the requests done."""
    per = v.get("bytes_per_request")
    return "" if per is None else f", {per / 1e3:,.1f} KB a request"


def growth_text(v: dict[str, Any]) -> str:
    """What grows, one line each: containers, then sites with their tracebacks."""
    line = ""
    for c in v.get("growing_containers", [])[:3]:
        line += f"\n  grows: {c['name']} ({c['type']}, {c['items']:,} items, +{c['grew']:,})"
    for s in v.get("top_sites", [])[:3]:
        rate = s.get("bytes_per_s")
        line += f"\n  site:  {s['site']}  +{s['grew_bytes'] / 2**20:.2f} MiB" + (
            f" ({rate / 1e3:,.1f} KB/s)" if rate else ""
        )
        if s.get("traceback"):
            line += f"\n         {s['traceback']}"
    if note := v.get("attribution_note"):
        line += f"\n  ({note})"
    return line


def quiet_text(
    v: dict[str, Any],
    pid: int,
    watched_s: float,
    memory: float | None,
    open_files_limit: int | None = None,
) -> str:
    """The last word on a process not found leaking: no leak, or undetermined and what
    would settle it."""
    said = "no leak" if v["state"] == "no_leak" else "leak undetermined"
    settle = f"; to settle it: {v['settle']}" if v["state"] != "no_leak" else ""
    mib = "?" if memory is None else f"{memory / 2**20:,.1f} MiB"
    piles = "".join(f"\n  {note}" for note in pile_notes(v, open_files_limit))
    return f"{said} in pid {pid} over {watched_s:,.0f} s ({mib}): {v['reason']}{settle}{piles}"


def watching_text(
    process: dict[str, Any],
    settings: dict[str, float],
    limit: tuple[float | None, str | None],
    metrics_url: str | None = None,
) -> str:
    """The first line of ``probe watch``: what it watches, how often, against what limit."""
    text = (
        f"watching pid {process['pid']} ({process['name']}): {process.get('metric', 'rss')} "
        f"every {settings['interval_s']:g} s, warm-up {settings['warmup_s']:g} s, window "
        f"{settings['window_s']:g} s"
    )
    if limit[0]:
        text += f", limit {limit[0] / 2**20:,.1f} MiB ({limit[1]})"
    if metrics_url:
        text += f", metrics on {metrics_url}"
    return text


def status_text(v: dict[str, Any], memory: float | None, warmup_left_s: float) -> str:
    """A status line: memory, the state (warming up, no leak, undetermined, LEAK) with the
    floor's rate, and the time to the limit when one is in sight."""
    mem = "?" if memory is None else f"{memory / 2**20:.1f} MiB"
    rate = v["slope_bytes_per_s"] / 1e3
    if v["detected"]:
        state = f"LEAK {rate:+.1f} KB/s"
    elif warmup_left_s > 0:
        state = f"warming up ({warmup_left_s:.0f} s left)"
    else:
        said = "no leak" if v["state"] == "no_leak" else "undetermined"
        state = f"{said} (floor {rate:+.1f} KB/s: {v['reason']})"
    to_limit = v.get("seconds_to_limit")
    if to_limit is not None and math.isfinite(to_limit):
        state += f", limit in {to_limit / 60:.0f} min"
    return f"{mem}, {state}"


def _thin(values: list[_T], step: int) -> list[_T]:
    return values[::step] if step > 1 else values


def leak_figure(report: dict[str, Any]) -> dict[str, Any]:
    series = report["series"]
    t = [x / 60 for x in series["t_s"]]
    step = max(1, math.ceil(len(t) / MAX_POINTS))
    mib = 2**20

    def scaled(key: str) -> list[float]:
        return _thin([x / mib for x in series[key]], step)

    tt = _thin(t, step)
    data: list[dict[str, Any]] = [
        {"type": "scatter", "x": tt, "y": scaled("max"), "name": "bin max", "mode": "lines",
         "line": {"width": 0}, "showlegend": False, "hoverinfo": "skip"},
        {"type": "scatter", "x": tt, "y": scaled("min"), "name": "range in a bin",
         "mode": "lines", "line": {"width": 0}, "fill": "tonexty",
         "fillcolor": "rgba(31,119,180,0.2)"},
        {"type": "scatter", "x": tt, "y": scaled("median"), "name": "memory (median)",
         "mode": "lines", "line": {"color": "#1f77b4"}},
        {"type": "scatter", "x": tt, "y": scaled("min"), "name": "floor (min)",
         "mode": "lines", "line": {"color": "#2ca02c", "dash": "dot"}},
    ]  # fmt: skip
    rate_traces, axes = _rate_on_its_axis(series, step)
    data.extend(rate_traces)
    v = report["verdict"]
    shapes: list[dict[str, Any]] = []
    if v.get("detected") and t:
        onset = v.get("onset_s") or 0.0
        end = series["t_s"][-1]
        slope = v["slope_bytes_per_s"]
        intercept = v.get("intercept_bytes", 0.0)  # the detector's fit through the floors
        data.append(
            {"type": "scatter", "x": [onset / 60, end / 60],
             "y": [(intercept + slope * onset) / mib, (intercept + slope * end) / mib],
             "mode": "lines", "name": f"growth {slope / 1e3:.1f} KB/s",
             "line": {"color": "#d62728", "width": 3}}
        )  # fmt: skip
        shapes.append(
            {"type": "line", "x0": onset / 60, "x1": onset / 60, "yref": "paper", "y0": 0,
             "y1": 1, "line": {"color": "#d62728", "dash": "dash"}}
        )  # fmt: skip
    if report.get("limit_bytes") and t:
        shapes.append(
            {"type": "line", "xref": "paper", "x0": 0, "x1": 1,
             "y0": report["limit_bytes"] / mib, "y1": report["limit_bytes"] / mib,
             "line": {"color": "#7f7f7f", "dash": "dot"}}
        )  # fmt: skip
    spec_layout = layout(
        "Memory over time",
        xaxis={"title": {"text": "minutes since watching began"}},
        yaxis={"title": {"text": "MiB"}},
        shapes=shapes,
        **axes,
    )
    return {"data": data, "layout": spec_layout}


def _rate_on_its_axis(
    series: dict[str, Any], step: int
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The request rate's trace and its axis on the right, where requests were counted
    (else none): the traffic beside the memory -- a store grows with the rate, a leak
    with the count."""
    rate = _request_rate(series)
    if rate is None:
        return [], {}
    trace = {"type": "scatter", "x": _thin([x / 60 for x in rate[0]], step),
             "y": _thin(rate[1], step), "name": "requests/s", "mode": "lines", "yaxis": "y2",
             "line": {"color": "#7f7f7f", "width": 1, "dash": "dot"}}  # fmt: skip
    axis = {"title": {"text": "requests/s"}, "overlaying": "y", "side": "right",
            "rangemode": "tozero", "showgrid": False, "tickmode": "auto",
            "tickformat": ",.0f"}  # fmt: skip
    # the legend right of the rate's axis, not over its labels
    return [trace], {"yaxis2": axis, "legend": {"x": 1.08}}


def _request_rate(series: dict[str, Any]) -> tuple[list[float], list[float | None]] | None:
    """Requests a second from each bin's count (series ``requests_done``, read at
    ``requests_done_t_s``) to the next one's, at the later bin's time; a gap where either
    was not counted. None where no two bins in a row were."""
    done, at, t = series.get("requests_done"), series.get("requests_done_t_s"), series["t_s"]
    if not done or not at or len(done) != len(t) or len(at) != len(t):
        return None
    rate: list[float | None] = []
    for i in range(1, len(t)):
        d0, d1, t0, t1 = done[i - 1], done[i], at[i - 1], at[i]
        counted = None not in (d0, d1, t0, t1) and t1 > t0 and d1 >= d0
        rate.append((d1 - d0) / (t1 - t0) if counted else None)
    if all(r is None for r in rate):
        return None
    return list(t[1:]), rate


def _table(title: str, table_id: str, headers: list[str], rows: list[Markup]) -> Markup:
    head = join(html("<th>{}</th>", h) for h in headers)
    return html(
        "<h2>{}</h2><table id='{}'><tr>{}</tr>{}</table>", title, table_id, head, join(rows)
    )


def _tables(v: dict[str, Any]) -> Markup:
    out = []
    if sites := v.get("top_sites") or []:
        rows = [
            html(
                "<tr><td><code>{}</code></td><td>+{} MiB</td><td>{} B/s</td><td>{}</td>"
                "<td><pre>{}</pre></td></tr>",
                s["site"],
                f"{s['grew_bytes'] / 2**20:.2f}",
                num(s.get("bytes_per_s"), ",.0f"),
                "yes" if s.get("steady", True) else "no",
                s.get("traceback", ""),
            )
            for s in sites
        ]
        headers = ["site", "grew", "rate", "with the trend", "traceback (newest first)"]
        out.append(_table("Growing allocation sites", "sites", headers, rows))
    if containers := v.get("growing_containers") or []:
        rows = [
            html(
                "<tr><td><code>{}</code></td><td>{}</td><td>{}</td><td>+{}</td></tr>",
                c["name"],
                c["type"],
                f"{c['items']:,}",
                f"{c['grew']:,}",
            )
            for c in containers
        ]
        headers = ["held by", "type", "items", "grew"]
        out.append(_table("Growing containers", "containers", headers, rows))
    if types := v.get("growing_types") or []:
        rows = [
            html("<tr><td><code>{}</code></td><td>+{}</td></tr>", t["type"], f"{t['count_grew']:,}")
            for t in types
        ]
        headers = ["type", "live objects grew"]
        out.append(_table("Growing object types", "types", headers, rows))
    if note := v.get("attribution_note"):
        out.append(html("<p class='muted' id='attribution-note'>Attribution: {}.</p>", note))
    if v.get("detected") and not (sites or containers or types):
        out.append(
            Markup(
                "<p class='muted'>No attribution: the process is not Python, attribution was "
                "off, or it ended before a snapshot (a Python target launched by "
                "<code>probe watch -- python …</code> gets it).</p>"
            )
        )
    return join(out)


def _verdict_card(v: dict[str, Any]) -> Markup:
    if v.get("state") == "undetermined":
        return html(
            "<section class='card' id='verdict' style='border-left:6px solid #f2a93b'>"
            "<div class='kind'>Leak: undetermined</div><p>{}</p><p>To settle it: {}.</p>"
            "</section>",
            v.get("reason", ""),
            v.get("settle", ""),
        )
    if not v.get("detected"):
        return html(
            "<section class='card' id='verdict' style='border-left:6px solid #2ca02c'>"
            "<div class='kind'>No leak</div><p>{}</p></section>",
            v.get("reason", ""),
        )
    to_limit = v.get("seconds_to_limit")
    low, high = v["slope_interval_bytes_per_s"]
    return html(
        "<section class='card verdict' id='verdict'>"
        "<div class='kind'>Leak: memory grows {rate} KB/s{per}</div><p>{reason}</p>{held}"
        "<table><tr><th>rate (99% interval)</th><th>confidence</th><th>onset</th>"
        "<th>level</th><th>time to limit</th><th>test</th></tr>"
        "<tr><td>{low} – {high} KB/s</td><td>{confidence}</td><td>{onset} s</td>"
        "<td>{level} MiB</td><td>{to_limit}</td><td>{test}</td></tr></table></section>",
        rate=f"{v['slope_bytes_per_s'] / 1e3:,.1f}",
        per=_per_request(v),
        reason=v.get("reason", ""),
        held=html("<p id='leak-held'>{}</p>", held) if (held := what_holds(v)[1]) else "",
        low=f"{low / 1e3:,.1f}",
        high=f"{high / 1e3:,.1f}",
        confidence=f"{v['confidence']:.1%}",
        onset=num(v.get("onset_s"), ",.0f"),
        level=f"{v['level_bytes'] / 2**20:,.1f}",
        to_limit="no limit" if to_limit is None else f"{to_limit / 60:,.1f} min",
        test=v.get("test", ""),
    )


def render_leak_html(report: dict[str, Any], *, plotly_js: str | None = None) -> str:
    v = report["verdict"]
    proc = report.get("process", {})
    title = f"probe watch: {proc.get('name') or 'process'} (pid {proc.get('pid', '?')})"
    limit = report.get("limit_bytes")
    settings = report.get("settings", {})
    meta_rows = [
        ("command", " ".join(proc.get("cmdline") or []) or "—"),
        ("pid", proc.get("pid", "—")),
        ("watched", f"{report.get('watched_s', 0):,.0f} s, {report.get('readings', 0):,} readings"),
        ("memory", proc.get("metric", "rss")),
        ("limit", f"{limit / 2**20:,.0f} MiB ({report.get('limit_source')})" if limit else "none"),
        *((k, v2) for k, v2 in settings.items()),
    ]
    meta = join(html("<tr><th>{}</th><td>{}</td></tr>", k, x) for k, x in meta_rows)
    tail = _tables(v) + html("<h2>Watch</h2><table class='meta'>{}</table>", meta)
    return page(
        title,
        _verdict_card(v),
        [("trend", "Trend", leak_figure(report))],
        tail,
        plotly_js=plotly_js,
    )


def write_leak_report(out: Path, report: dict[str, Any]) -> tuple[Path, Path]:
    """Write ``leak.json`` and ``leak.html`` into ``out`` (created); atomic per file."""
    try:
        out.mkdir(parents=True, exist_ok=True)
        paths = [
            write_atomic(out / name, text)
            for name, text in (
                ("leak.json", json.dumps(json_safe(report), indent=1)),
                ("leak.html", render_leak_html(report)),
            )
        ]
    except OSError as e:
        raise ProbeError(f"cannot write the leak report to {out}: {e.strerror or e}") from e
    return paths[0], paths[1]
