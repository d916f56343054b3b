"""HTML renderer: one self-contained report file (works offline, from a mail attachment).

``report_data(diagnosis, run)`` builds everything the page shows as plain data (the
tests check it); ``render_html(data)`` writes the page. The verdict, the recommendations
and the run's metadata are server-rendered text, readable with scripts off; the charts
are plotly figures drawn by plotly.js, embedded once.

Every string that came from the profiled service (span names, function and file names,
argv, attrs) is escaped: ``html.escape`` in the page, entity-escaped in chart labels
(plotly draws them as SVG text and decodes entities, so ``<img …>`` shows as text), and
the chart JSON is embedded with ``<``, ``>`` and ``&`` as ``\\u`` escapes so no string can
close its ``<script>`` element. A Content-Security-Policy with a per-page nonce lets only
the page's own scripts run: inline event handlers (``onerror=…``) never do.

Long runs stay small: the span timeline keeps at most ``MAX_TIMELINE_SPANS`` spans, the
flame graph at most ``MAX_FLAME_NODES`` nodes, each time series ``MAX_POINTS`` points; the
page says what was downsampled.
"""

from __future__ import annotations

import html
import json
import math
import secrets
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from probe.analyzers.attribution import attribute
from probe.analyzers.breakdown import WAIT_REASONS
from probe.analyzers.diagnosis import Diagnosis
from probe.reports.json import json_safe

__all__ = ["ReportData", "html_page", "render_html", "report_data"]

MAX_TIMELINE_SPANS = 4000
MAX_FLAME_NODES = 2000
MAX_POINTS = 1500
TOP_STAGES = 8

_COMPONENT_COLOURS = {
    "python": "#d62728",
    "native": "#ff7f0e",
    "network": "#1f77b4",
    "disk": "#17becf",
    "sleep": "#9edae5",
    "lock": "#9467bd",
    "subprocess": "#8c564b",
    "gpu_sync": "#2ca02c",
    "gil": "#e377c2",
    "unknown": "#c7c7c7",
}


def _t(text: Any) -> str:
    """A service string for a chart label: entities, which plotly decodes back to text."""
    return html.escape(str(text), quote=True)


@dataclass
class ReportData:
    title: str
    verdict: dict[str, Any]
    recommendations: list[dict[str, Any]]
    findings: list[dict[str, Any]]
    leak: dict[str, Any]
    meta_rows: list[tuple[str, str]]
    notes: list[str]
    figures: dict[str, dict[str, Any]] = field(default_factory=dict)  # id -> plotly spec
    downsampled: list[str] = field(default_factory=list)


# -- figures ----------------------------------------------------------------------------
def _layout(title: str, **extra: Any) -> dict[str, Any]:
    return {
        "title": {"text": title, "font": {"size": 15}},
        "margin": {"l": 60, "r": 20, "t": 40, "b": 40},
        "height": 360,
        "template": "plotly_white",
        **extra,
    }


def _amdahl_figure(d: Diagnosis) -> dict[str, Any]:
    s_values = np.logspace(0, 2, 60)
    data: list[dict[str, Any]] = []
    stages = d.breakdown.stages
    stages = stages[stages["category"] != "request"] if d.run["requests"] else stages
    for name, row in stages.head(4).iterrows():
        p = float(row["path_share"])
        if p <= 0.01 or p >= 1.0:
            continue
        data.append(
            {
                "type": "scatter",
                "mode": "lines",
                "name": f"{_t(name)} (p={p:.2f})",
                "x": s_values.round(3).tolist(),
                "y": [round(1 / ((1 - p) + p / s), 4) for s in s_values],
            }
        )
        data.append(
            {
                "type": "scatter",
                "mode": "lines",
                "showlegend": False,
                "name": f"ceiling {_t(name)}",
                "line": {"dash": "dot", "width": 1},
                "x": [1, 100],
                "y": [round(1 / (1 - p), 3)] * 2,
                "hovertemplate": f"ceiling {1 / (1 - p):.2f}×<extra>{_t(name)}</extra>",
            }
        )
    points = [r for r in d.recommendations if r.id != "fix_leak"]
    if points:
        data.append(
            {
                "type": "scatter",
                "mode": "markers+text",
                "name": "recommendations",
                "x": [min(r.s, 100.0) if math.isfinite(r.s) else 100.0 for r in points],
                "y": [round(r.estimated_speedup, 3) for r in points],
                "text": [_t(r.id) for r in points],
                "textposition": "top center",
                "hovertext": [
                    _t(f"{r.id}: {r.estimated_speedup:.2f}× ({r.model})") for r in points
                ],
                "hoverinfo": "text",
                "marker": {"size": 10, "symbol": "diamond"},
            }
        )
    return {
        "data": data,
        "layout": _layout(
            "Amdahl: end-to-end speedup against the stage's local speedup s",
            xaxis={"type": "log", "title": "local speedup s"},
            yaxis={"title": "end-to-end speedup S"},
        ),
    }


def _stage_figure(d: Diagnosis) -> dict[str, Any]:
    stages = d.breakdown.stages
    if d.run["requests"]:
        stages = stages[stages["category"] != "request"]
    stages = stages.head(TOP_STAGES).iloc[::-1]
    seconds = stages["path_s"] if d.run["requests"] else stages["sampled_s"]
    demand = stages["cpu_share"] + stages["wait_unknown"]
    parts = {
        "python": demand * stages["python_share"],
        "native": demand * stages["native_share"],
        **{r: stages[f"wait_{r}"] for r in WAIT_REASONS if r != "unknown"},
    }
    names = [_t(n) for n in stages.index]
    data = [
        {
            "type": "bar",
            "orientation": "h",
            "name": part,
            "y": names,
            "x": (seconds * share).round(4).tolist(),
            "marker": {"color": _COMPONENT_COLOURS[part]},
        }
        for part, share in parts.items()
        if float(share.sum()) > 0
    ]
    label = "seconds on the request path" if d.run["requests"] else "sampled seconds"
    return {
        "data": data,
        "layout": _layout(
            "Stages: on-CPU (Python, native) and waiting, by reason",
            barmode="stack",
            xaxis={"title": label},
            yaxis={"automargin": True},
            height=max(260, 60 + 40 * len(names)),
        ),
    }


def _timeline_figure(run: Any, d: Diagnosis, t0: int, notes: list[str]) -> dict[str, Any] | None:
    indexed = d.breakdown.spans
    if indexed.empty:
        return None
    total = len(indexed)
    if total > MAX_TIMELINE_SPANS:
        indexed = indexed[indexed["depth"] <= 1]
    if len(indexed) > MAX_TIMELINE_SPANS:
        keep = np.linspace(0, len(indexed) - 1, MAX_TIMELINE_SPANS).astype(int)
        indexed = indexed.sort_values("start_ns").iloc[np.unique(keep)]
    if len(indexed) < total:
        notes.append(
            f"span timeline: {len(indexed):,} of {total:,} spans shown (outer "
            "spans first, then evenly over time)"
        )
    names = run.tables["threads"].drop_duplicates("thread_id").set_index("thread_id")["name"]
    top = indexed.groupby("name")["dur_ns"].sum().nlargest(TOP_STAGES).index
    label = indexed["name"].where(indexed["name"].isin(top), "other")
    data = []
    for name, part in indexed.groupby(label, sort=False):
        threads = [_t(f"{names.get(t, 'thread')} ({t})") for t in part["thread_id"]]
        data.append(
            {
                "type": "bar",
                "orientation": "h",
                "name": _t(name),
                "y": threads,
                "base": ((part["start_ns"] - t0) / 1e9).round(6).tolist(),
                "x": (part["dur_ns"] / 1e9).round(6).tolist(),
                "hovertemplate": "%{base:.3f} s + %{x:.4f} s<extra>" + _t(name) + "</extra>",
            }
        )
    return {
        "data": data,
        "layout": _layout(
            "Spans per thread over time",
            barmode="overlay",
            xaxis={"title": "seconds"},
            yaxis={"automargin": True},
            height=max(260, 80 + 28 * indexed["thread_id"].nunique()),
        ),
    }


def _flame_figure(run: Any, notes: list[str]) -> dict[str, Any] | None:
    samples, stacks, frames = (run.tables[t] for t in ("samples", "stacks", "frames"))
    if samples.empty or stacks.empty:
        return None
    att = attribute(samples)
    per_stack = att.groupby("stack_id")[["cpu_ns", "wait_ns"]].sum()
    frame_label = {
        int(fid): f"{fn} ({str(fname).rsplit('/', 1)[-1]})"
        for fid, fn, fname in zip(
            frames["frame_id"], frames["function"], frames["filename"], strict=True
        )
    }
    cpu: dict[str, float] = {}
    wait: dict[str, float] = {}
    parent: dict[str, str] = {}
    label: dict[str, str] = {}
    ids_of = stacks.set_index("stack_id")["frame_ids"]
    for sid, row in per_stack.iterrows():
        path = [f for f in str(ids_of.get(sid, "") or "").split(";") if f]
        key = ""
        for fid in path:
            child = f"{key};{fid}" if key else fid
            parent.setdefault(child, key)
            label.setdefault(child, frame_label.get(int(fid), "?"))
            cpu[child] = cpu.get(child, 0.0) + float(row["cpu_ns"])
            wait[child] = wait.get(child, 0.0) + float(row["wait_ns"])
            key = child
    total = sum(v for k, v in cpu.items() if parent[k] == "") + sum(
        v for k, v in wait.items() if parent[k] == ""
    )
    if total <= 0:
        return None
    weight = {k: cpu.get(k, 0.0) + wait.get(k, 0.0) for k in parent}
    threshold = total * 0.001
    kept = [k for k in parent if weight[k] >= threshold]
    if len(kept) > MAX_FLAME_NODES:
        cut = sorted((weight[k] for k in kept), reverse=True)[MAX_FLAME_NODES - 1]
        kept = [k for k in kept if weight[k] >= cut]
    if len(kept) < len(parent):
        notes.append(
            f"flame graph: {len(kept):,} of {len(parent):,} call paths shown "
            "(the rest are each under 0.1% of the sampled time)"
        )
    ids = kept
    common = {
        "type": "icicle",
        "ids": ids,
        "labels": [_t(label[k]) for k in ids],
        "parents": [parent[k] for k in ids],
        "branchvalues": "remainder",
        "tiling": {"orientation": "v"},
        "root": {"color": "#f4f4f4"},
        "maxdepth": 10,
        "textinfo": "label",
    }

    # "remainder": a node's value is its own and plotly adds its children's.
    def own(values: dict[str, float]) -> list[float]:
        # A pruned child's time stays in its parent's own value: totals stay exact.
        children: dict[str, float] = {}
        for k in ids:
            children[parent[k]] = children.get(parent[k], 0.0) + values.get(k, 0.0)
        return [round(max(0.0, values.get(k, 0.0) - children.get(k, 0.0)) / 1e9, 6) for k in ids]

    data = [
        {
            **common,
            "name": "on-CPU",
            "values": own(cpu),
            "visible": True,
            "marker": {"colors": ["#e4572e"] * len(ids)},
            "hovertemplate": "%{label}<br>%{value:.3f} s on-CPU<extra></extra>",
        },
        {
            **common,
            "name": "waiting",
            "values": own(wait),
            "visible": False,
            "marker": {"colors": ["#4c78a8"] * len(ids)},
            "hovertemplate": "%{label}<br>%{value:.3f} s waiting<extra></extra>",
        },
    ]
    menu = {
        "type": "buttons",
        "direction": "right",
        "x": 0,
        "y": 1.12,
        "xanchor": "left",
        "buttons": [
            {"label": "on-CPU", "method": "update", "args": [{"visible": [True, False]}]},
            {"label": "waiting", "method": "update", "args": [{"visible": [False, True]}]},
        ],
    }
    return {
        "data": data,
        "layout": _layout(
            "Sampled stacks (flame graph, root at top)", height=520, updatemenus=[menu]
        ),
    }


def _bucket(t: np.ndarray, y: np.ndarray) -> tuple[list[float], list[float | None]]:
    """At most MAX_POINTS points: means over equal-count buckets."""
    if len(t) > MAX_POINTS:
        edges = np.linspace(0, len(t), MAX_POINTS + 1).astype(int)
        t = np.add.reduceat(t, edges[:-1]) / np.diff(edges)
        y = np.add.reduceat(y, edges[:-1]) / np.diff(edges)
    return np.round(t, 3).tolist(), [None if not np.isfinite(v) else round(float(v), 4) for v in y]


def _resource_figure(run: Any, d: Diagnosis, t0: int, notes: list[str]) -> dict[str, Any]:
    res = run.tables["resources"]
    data: list[dict[str, Any]] = []
    downsampled = False
    if not res.empty:
        tick = (
            res.groupby("ts_ns")[["cpu_user_s", "cpu_system_s", "read_bytes", "write_bytes"]]
            .sum()
            .sort_index()
        )
        t = (tick.index.to_numpy() - t0) / 1e9
        dt = np.diff(t)
        cores = np.diff(tick["cpu_user_s"] + tick["cpu_system_s"]) / np.where(dt > 0, dt, np.nan)
        io = np.diff(tick["read_bytes"] + tick["write_bytes"]) / np.where(dt > 0, dt, np.nan)
        downsampled = len(t) > MAX_POINTS
        x, y = _bucket(t[1:], cores)
        data.append(
            {"type": "scatter", "mode": "lines", "name": "process CPU (cores)", "x": x, "y": y}
        )
        x, y = _bucket(t[1:], io / 1e6)
        data.append(
            {
                "type": "scatter",
                "mode": "lines",
                "name": "disk I/O (MB/s)",
                "x": x,
                "y": y,
                "yaxis": "y2",
                "visible": "legendonly",
            }
        )
    gpu = run.tables["gpu"]
    if not gpu.empty:
        for device, part in gpu.groupby("gpu"):
            x, y = _bucket(
                (part["ts_ns"].to_numpy() - t0) / 1e9,
                part["util_percent"].to_numpy(dtype="float64"),
            )
            data.append(
                {
                    "type": "scatter",
                    "mode": "lines",
                    "name": f"GPU {device} util (%)",
                    "x": x,
                    "y": y,
                    "yaxis": "y2",
                }
            )
    system = run.tables["system"]
    if not system.empty:
        x, y = _bucket(
            (system["ts_ns"].to_numpy() - t0) / 1e9, system["cpu_percent"].to_numpy(dtype="float64")
        )
        data.append(
            {
                "type": "scatter",
                "mode": "lines",
                "name": "host CPU (%)",
                "x": x,
                "y": y,
                "yaxis": "y2",
                "line": {"dash": "dot"},
            }
        )
    if downsampled:
        notes.append(f"resource charts: bucketed to {MAX_POINTS:,} points per series")
    return {
        "data": data,
        "layout": _layout(
            "CPU, GPU and I/O over time",
            xaxis={"title": "seconds"},
            yaxis={"title": "cores"},
            yaxis2={"title": "% or MB/s", "overlaying": "y", "side": "right"},
        ),
    }


def _memory_figure(run: Any, d: Diagnosis, t0: int) -> dict[str, Any] | None:
    res = run.tables["resources"]
    root = res[res["is_root"]] if not res.empty else res
    if root.empty:
        return None
    t_abs = root["ts_ns"].to_numpy() / 1e9
    x, y = _bucket(t_abs - t0 / 1e9, root["rss_bytes"].to_numpy(dtype="float64") / 2**20)
    data: list[dict[str, Any]] = [
        {"type": "scatter", "mode": "lines", "name": "RSS (MiB)", "x": x, "y": y}
    ]
    leak = d.leak
    if leak.points and (leak.slope_bytes_per_s or leak.intercept_bytes):
        ends = np.array([t_abs.min(), t_abs.max()])
        fit = (leak.intercept_bytes + leak.slope_bytes_per_s * ends) / 2**20
        data.append(
            {
                "type": "scatter",
                "mode": "lines",
                "line": {"dash": "dash"},
                "name": f"trend {leak.slope_bytes_per_s / 1e6:+.3f} MB/s"
                f"{' (leak)' if leak.detected else ''}",
                "x": np.round(ends - t0 / 1e9, 3).tolist(),
                "y": np.round(fit, 3).tolist(),
            }
        )
    sites = run.tables["memory_sites"]
    if not sites.empty:
        per = sites.groupby("snapshot").agg(ts=("ts_ns", "max"), size=("size_bytes", "sum"))
        data.append(
            {
                "type": "scatter",
                "mode": "lines+markers",
                "name": "traced by tracemalloc (MiB)",
                "x": ((per["ts"] - t0) / 1e9).round(3).tolist(),
                "y": (per["size"] / 2**20).round(3).tolist(),
            }
        )
    return {
        "data": data,
        "layout": _layout("Memory over time", xaxis={"title": "seconds"}, yaxis={"title": "MiB"}),
    }


# -- data -------------------------------------------------------------------------------
def _meta_rows(run: Any, d: Diagnosis) -> list[tuple[str, str]]:
    meta = run.meta
    target = meta.get("target") or {}
    py = meta.get("python") or {}
    host = meta.get("host") or {}
    settings = meta.get("settings") or {}
    gpus = meta.get("gpus") or {}
    gpu_text = (
        ", ".join(str(g.get("name", "?")) for g in gpus.get("devices", []))
        if gpus.get("available")
        else f"none ({gpus.get('reason', 'not checked')})"
    )
    exit_info = meta.get("exit") or {}
    return [
        ("command", " ".join(str(a) for a in meta.get("command") or target.get("argv") or [])),
        ("target argv", " ".join(str(a) for a in target.get("argv") or [])),
        ("started", str(meta.get("start", "?"))),
        ("wall time", f"{d.run['wall_s']:.2f} s"),
        ("ended by", f"{exit_info.get('ended_by', '?')} (exit status {exit_info.get('status')})"),
        (
            "host",
            f"{host.get('hostname', '?')}, {host.get('cpu_count', '?')} CPUs, "
            f"{(host.get('memory_total_bytes') or 0) / 2**30:.1f} GiB, "
            f"{host.get('platform', '')}",
        ),
        ("GPUs", gpu_text),
        ("Python", f"{py.get('implementation', '')} {py.get('version', '?')}"),
        ("probe", str(meta.get("probe_version", "?"))),
        ("sampling", ", ".join(f"{k}={v}" for k, v in settings.items())),
    ]


def report_data(d: Diagnosis, run: Any) -> ReportData:
    """Everything the page shows, from a diagnosis and its loaded run."""
    t0 = int((run.meta.get("clock") or {}).get("perf_ns") or 0)
    starts = [
        int(run.tables[t]["ts_ns"].min())
        for t in ("samples", "resources")
        if not run.tables[t].empty
    ]
    if not run.tables["spans"].empty:
        starts.append(int(run.tables["spans"]["start_ns"].min()))
    if not t0 and starts:
        t0 = min(starts)
    notes: list[str] = []
    figures: dict[str, dict[str, Any]] = {}
    if d.primary["kind"] != "none":
        figures["amdahl"] = _amdahl_figure(d)
        figures["stages"] = _stage_figure(d)
    optional = {
        "timeline": _timeline_figure(run, d, t0, notes),
        "flame": _flame_figure(run, notes),
        "resources": _resource_figure(run, d, t0, notes),
        "memory": _memory_figure(run, d, t0),
    }
    figures.update({k: f for k, f in optional.items() if f is not None and f["data"]})
    name = str((run.meta.get("target") or {}).get("name", "run")).rsplit("/", 1)[-1]
    return ReportData(
        title=f"probe: {name}",
        verdict={
            **d.primary,
            **{
                k: d.run[k]
                for k in (
                    "requests",
                    "throughput_per_s",
                    "latency_ms",
                    "wall_s",
                    "process_cores",
                    "cpu_count",
                )
            },
        },
        recommendations=[r.to_dict() for r in d.recommendations],
        findings=[f.to_dict() for f in d.findings],
        leak=d.leak.to_dict(),
        meta_rows=_meta_rows(run, d),
        notes=list(d.notes),
        figures=figures,
        downsampled=notes,
    )


# -- page -------------------------------------------------------------------------------
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


def _esc(value: Any) -> str:
    return html.escape(str(value), quote=True)


def _num(value: Any, fmt: str, missing: str = "—") -> str:
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return missing
    return format(value, fmt)


def _verdict_html(data: ReportData) -> str:
    v = data.verdict
    lat = v.get("latency_ms") or {}
    rows = [
        f"<div class='kind'>{_esc(v['kind'])}/{_esc(v['subkind'])}"
        + (f" in <code>{_esc(v['stage'])}</code>" if v.get("stage") else "")
        + "</div>",
        f"<p>{_esc(v['summary'])}</p>",
        "<table><tr><th>share of the path</th><th>confidence</th><th>requests</th>"
        "<th>throughput</th><th>latency p50 / p95 / p99</th><th>CPU</th></tr>",
        f"<tr><td>{_num(v.get('share'), '.0%')}</td>"
        f"<td>{_num(v.get('confidence'), '.0%')}</td>"
        f"<td>{_esc(v.get('requests') or '—')}</td>"
        f"<td>{_num(v.get('throughput_per_s'), '.1f')}/s</td>"
        f"<td>{_num(lat.get('p50'), '.1f')} / {_num(lat.get('p95'), '.1f')} / "
        f"{_num(lat.get('p99'), '.1f')} ms</td>"
        f"<td>{_num(v.get('process_cores'), '.2f')} of {_esc(v.get('cpu_count'))} cores"
        "</td></tr></table>",
    ]
    return "<section class='card verdict' id='verdict'>" + "".join(rows) + "</section>"


def _recommendations_html(data: ReportData) -> str:
    if not data.recommendations:
        return "<p class='muted'>No recommendation: no fix is estimated to buy 1.25× or more.</p>"
    out = []
    for i, r in enumerate(data.recommendations, 1):
        evidence = "".join(
            f"<tr><td>{_esc(k)}</td><td>{_esc(v)}</td></tr>"
            for k, v in r.get("evidence", {}).items()
            if not isinstance(v, dict | list)
        )
        speed = (
            "memory"
            if r["id"] == "fix_leak"
            else f"{_num(r.get('estimated_speedup'), '.2f')}× "
            f"<span class='muted'>(ceiling {_num(r.get('ceiling'), '.2f', '∞')}×, "
            f"p={_num(r.get('p'), '.2f')}, s={_num(r.get('s'), '.2f', '∞')})</span>"
        )
        out.append(
            f"<section class='card rec' id='rec-{_esc(r['id'])}'>"
            f"<div>{i}. <b>{_esc(r['title'])}</b> <code>{_esc(r['id'])}</code></div>"
            f"<div class='speed'>{speed}</div>"
            f"<pre>{_esc(r['how'])}</pre>"
            f"<details><summary>evidence and model</summary><p class='muted'>"
            f"{_esc(r.get('model', ''))}</p><table>{evidence}</table></details></section>"
        )
    return "".join(out)


def _leak_html(data: ReportData) -> str:
    leak = data.leak
    if not leak.get("detected"):
        return f"<p class='muted'>No leak: {_esc(leak.get('reason', ''))}.</p>"
    sites = "".join(
        f"<tr><td>{_esc(s['site'])}</td><td>+{s['grew_bytes'] / 2**20:.1f} MiB</td>"
        f"<td><pre>{_esc(s.get('traceback', ''))}</pre></td></tr>"
        for s in leak.get("top_sites", [])
    )
    return (
        f"<div class='card'><b>Memory grows {leak['slope_bytes_per_s'] / 1e6:.2f} MB/s</b>"
        f" (confidence {leak['confidence']:.0%}). {_esc(leak.get('reason', ''))}"
        + (
            f"<table><tr><th>site</th><th>grew</th><th>traceback</th></tr>{sites}</table>"
            if sites
            else "<p class='muted'>Run with --memory to name the sites.</p>"
        )
        + "</div>"
    )


def _figure_block(fig_id: str, spec: dict[str, Any], nonce: str) -> str:
    payload = (
        json.dumps(spec, separators=(",", ":"), allow_nan=False)
        .replace("<", "\\u003c")
        .replace(">", "\\u003e")
        .replace("&", "\\u0026")
    )
    return (
        f"<div class='fig' id='fig-{fig_id}'></div>"
        f"<script type='application/json' class='plot-spec' data-target='fig-{fig_id}' "
        f"nonce='{nonce}'>{payload}</script>"
    )


def html_page(
    title: str,
    body: str,
    figures: list[tuple[str, str, dict[str, Any]]],
    tail: str = "",
    *,
    plotly_js: str | None = None,
) -> str:
    """A self-contained page: ``body`` (already escaped HTML), then each figure under its
    heading (key, heading, plotly spec), then ``tail``; plotly.js embedded once, scripts
    allowed only by the page's nonce."""
    if plotly_js is None:
        from plotly.offline import get_plotlyjs

        plotly_js = get_plotlyjs()
    nonce = secrets.token_urlsafe(16)
    csp = (
        f"default-src 'none'; script-src 'nonce-{nonce}' 'unsafe-eval'; "
        "style-src 'unsafe-inline'; img-src data: blob:; font-src data:"
    )
    figs = "".join(
        f"<h2>{_esc(heading)}</h2>" + _figure_block(key, json_safe(spec), nonce)
        for key, heading, spec in figures
    )
    draw = (
        "document.querySelectorAll('script.plot-spec').forEach(function(el){"
        "var spec=JSON.parse(el.textContent);"
        "Plotly.newPlot(el.dataset.target,spec.data,spec.layout,"
        "{responsive:true,displaylogo:false});});"
    )
    return (
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>"
        f"<meta http-equiv='Content-Security-Policy' content=\"{csp}\">"
        "<meta name='viewport' content='width=device-width, initial-scale=1'>"
        f"<title>{_esc(title)}</title><style>{_CSS}</style></head><body><main>"
        f"<h1>{_esc(title)}</h1>{body}{figs}{tail}"
        f"<p class='muted'>Written by probe. Charts need JavaScript; everything above them "
        f"reads without it.</p></main>"
        f"<script nonce='{nonce}'>{plotly_js}</script>"
        f"<script nonce='{nonce}'>{draw}</script></body></html>\n"
    )


def render_html(data: ReportData, *, plotly_js: str | None = None) -> str:
    """The page. ``plotly_js``: the library's source (default: the installed plotly's)."""
    sections = {
        "amdahl": "Amdahl: what each fix can buy",
        "stages": "Stage breakdown",
        "timeline": "Timeline",
        "flame": "Flame graph",
        "resources": "Resources",
        "memory": "Memory",
    }
    figures = [
        (key, heading, data.figures[key])
        for key, heading in sections.items()
        if key in data.figures
    ]
    notes = "".join(f"<li class='note'>{_esc(n)}</li>" for n in data.notes + data.downsampled)
    meta = "".join(f"<tr><th>{_esc(k)}</th><td>{_esc(v)}</td></tr>" for k, v in data.meta_rows)
    body = (
        f"{_verdict_html(data)}"
        f"<h2>What to change</h2>{_recommendations_html(data)}"
        f"<h2>Leak</h2>{_leak_html(data)}"
    )
    tail = (f"<h2>Notes</h2><ul>{notes}</ul>" if notes else "") + (
        f"<h2>Run</h2><table class='meta'>{meta}</table>"
    )
    return html_page(data.title, body, figures, tail, plotly_js=plotly_js)
