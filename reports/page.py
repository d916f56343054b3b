"""The self-contained HTML page every probe report is (run report, leak report).

Escaping is the default, not an opt-in: fragments are ``Markup`` (markupsafe's, the
escaping type Jinja uses), built with ``html(template, *values)``, which escapes every
value that is not itself ``Markup``. A string from the profiled service can only reach
the page as text. Chart labels are drawn by plotly as SVG text, which decodes HTML
entities: ``chart_text`` entity-escapes them so ``<img …>`` shows as text there too, and
the chart JSON is embedded with ``<``, ``>`` and ``&`` as ``\\u`` escapes so no string can
close its ``<script>`` element. A Content-Security-Policy with a per-page nonce lets only
the page's own scripts run: inline event handlers (``onerror=…``) never do.

No pandas here: the leak report is written from inside a watched service.
"""

from __future__ import annotations

import functools
import html as html_lib
import json
import math
import secrets
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from markupsafe import Markup

from probe.analyzers.vocabulary import confidence_words
from probe.reports.json import json_safe

__all__ = [
    "MAX_POINTS",
    "Markup",
    "bucket",
    "chart_text",
    "html",
    "installed_plotly_js",
    "join",
    "layout",
    "num",
    "page",
]

# Points per time series drawn: enough for a full-width chart, small for an hour's run.
MAX_POINTS = 1500


def html(template: str, *values: Any, **named: Any) -> Markup:
    """``template`` (trusted markup) with ``values`` escaped unless they are ``Markup``."""
    return Markup(template).format(*values, **named)


def join(fragments: Iterable[Markup]) -> Markup:
    return Markup("").join(fragments)


def chart_text(text: Any) -> str:
    """A service string for a chart label: entities, which plotly decodes back to text."""
    return html_lib.escape(str(text), quote=True)


def num(value: Any, fmt: str, missing: str = "—") -> str:
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return missing
    return format(value, fmt)


def confidence_cell(value: Any, missing: str = "—") -> str:
    """A verdict's confidence in a page's table: ``confidence_words``, or ``missing``."""
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return missing
    return confidence_words(float(value))


def layout(title: str, **extra: Any) -> dict[str, Any]:
    """A plotly layout in the reports' common style."""
    return {
        "title": {"text": title, "font": {"size": 15}},
        "margin": {"l": 60, "r": 20, "t": 40, "b": 40},
        "height": 360,
        "template": "plotly_white",
        **extra,
    }


def bucket(t: Any, y: Any) -> tuple[list[float], list[float | None]]:
    """At most ``MAX_POINTS`` points: means over equal-count buckets (NaN -> a gap)."""
    import numpy as np

    t, y = np.asarray(t, dtype="float64"), np.asarray(y, dtype="float64")
    if len(t) > MAX_POINTS:
        edges = np.linspace(0, len(t), MAX_POINTS + 1).astype(int)
        t = np.add.reduceat(t, edges[:-1]) / np.diff(edges)
        y = np.add.reduceat(y, edges[:-1]) / np.diff(edges)
    return np.round(t, 3).tolist(), [None if not np.isfinite(v) else round(float(v), 4) for v in y]


_CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:0;color:#222;
background:#fafafa}main{max-width:1100px;margin:auto;padding:16px 24px}
h1{font-size:20px;margin:8px 0}h2{font-size:17px;margin:28px 0 8px;border-bottom:1px solid
#ddd;padding-bottom:4px}.card{background:#fff;border:1px solid #ddd;border-radius:8px;
padding:14px 18px;margin:10px 0}.verdict{border-left:6px solid #d62728}
.kind{font-size:22px;font-weight:600}.muted{color:#666}.figs{display:flex;gap:18px;
flex-wrap:wrap}.fig{background:#fff;border:1px solid #ddd;border-radius:8px;margin:10px 0;
min-height:200px}table{border-collapse:collapse;font-size:14px}td,th{padding:3px 10px;
text-align:left;vertical-align:top;border-bottom:1px solid #eee}pre{background:#f4f4f4;
padding:10px;border-radius:6px;overflow-x:auto;font-size:13px;white-space:pre-wrap}
.speed{font-size:20px;font-weight:600;color:#2ca02c}.note{color:#8a6d3b}
"""


def _figure_block(fig_id: str, spec: dict[str, Any], nonce: str) -> Markup:
    payload = (
        json.dumps(json_safe(spec), separators=(",", ":"), allow_nan=False)
        .replace("<", "\\u003c")
        .replace(">", "\\u003e")
        .replace("&", "\\u0026")
    )
    return html(
        "<div class='fig' id='fig-{0}'></div>"
        "<script type='application/json' class='plot-spec' data-target='fig-{0}' "
        "nonce='{1}'>{2}</script>",
        fig_id,
        nonce,
        Markup(payload),  # JSON with every markup character \u-escaped
    )


# Where the page's plotly.js goes: markup no escaped value can contain (its "<").
_PLOTLY_SLOT = "<probe-plotly-js/>"


@functools.cache
def installed_plotly_js() -> str:
    """The installed plotly's plotly.js (~4.8 MB), read once a process: probe run's
    finisher reads it while the target runs, with its other imports. Read from the
    package's data where ``plotly.offline.get_plotlyjs`` reads it, without importing
    plotly (~15 ms of a verdict that found no idle core for its imports); through it
    where the package is laid out otherwise (a zip)."""
    import importlib.util

    spec = importlib.util.find_spec("plotly")
    places = spec.submodule_search_locations if spec is not None else None
    for place in places or ():
        try:
            return (Path(place) / "package_data" / "plotly.min.js").read_text(encoding="utf-8")
        except OSError:
            continue
    from plotly.offline import get_plotlyjs

    return str(get_plotlyjs())


def page(
    title: str,
    body: Markup,
    figures: list[tuple[str, str, dict[str, Any]]],
    tail: Markup | None = None,
    *,
    plotly_js: str | None = None,
) -> str:
    """The page: ``body``, then each figure under its heading (key, heading, plotly
    spec), then ``tail``; plotly.js embedded once, scripts allowed only by the page's
    nonce. ``plotly_js``: the library's source (default: the installed plotly's)."""
    if plotly_js is None:  # a page with no chart goes without it (4.8 MB)
        plotly_js = installed_plotly_js() if figures else ""
    nonce = secrets.token_urlsafe(16)
    csp = (
        f"default-src 'none'; script-src 'nonce-{nonce}' 'unsafe-eval'; "
        "style-src 'unsafe-inline'; img-src data: blob:; font-src data:"
    )
    figs = join(
        html("<h2>{}</h2>", heading) + _figure_block(key, spec, nonce)
        for key, heading, spec in figures
    )
    draw = (
        "document.querySelectorAll('script.plot-spec').forEach(function(el){"
        "var spec=JSON.parse(el.textContent);"
        "Plotly.newPlot(el.dataset.target,spec.data,spec.layout,"
        "{responsive:true,displaylogo:false});});"
    )
    shell = html(
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>"
        "<meta http-equiv='Content-Security-Policy' content=\"{csp}\">"
        "<meta name='viewport' content='width=device-width, initial-scale=1'>"
        "<title>{title}</title><style>{css}</style></head><body><main>"
        "<h1>{title}</h1>{body}{figs}{tail}"
        "<p class='muted'>Written by probe. Charts need JavaScript; everything above "
        "them reads without it.</p></main>"
        "<script nonce='{nonce}'>{plotly}</script>"
        "<script nonce='{nonce}'>{draw}</script></body></html>\n",
        csp=Markup(csp),  # ours: the nonce is URL-safe base64
        title=title,
        css=Markup(_CSS),
        body=body,
        figs=figs,
        tail=tail if tail is not None else Markup(""),
        nonce=nonce,
        plotly=Markup(_PLOTLY_SLOT),
        draw=Markup(draw),
    )
    # plotly.js (the installed library's own source, ~4.8 MB) goes in by one plain join,
    # not through markupsafe's format: each Markup made of a string that size copies it,
    # and formatting the page made ~10 of them (16 of the ~20 ms of a run report's
    # render, 2026-12-02, W1's run). The slot is the last one in the shell: only the
    # constant drawing script follows it, and the service's strings before it are
    # escaped ("<" as "&lt;"), so none of them can be taken for it.
    before, after = str(shell).rsplit(_PLOTLY_SLOT, 1)
    return "".join((before, plotly_js, after))
