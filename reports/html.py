"""HTML renderer: one self-contained report file (works offline, from a mail attachment).

``HtmlReport.from_analysis(analysis)`` builds everything the page shows as plain data
(the tests check it); ``render()`` writes the page. The verdict, the recommendations and
the run's metadata are server-rendered text, readable with scripts off; the charts are
plotly figures drawn by plotly.js, embedded once. Every string from the profiled service
(span names, function and file names, argv, attrs) is escaped by the page helpers
(``probe.reports.page``: escaping is their default) and entity-escaped in chart labels.

Long runs stay small: the span timeline keeps at most ``MAX_TIMELINE_SPANS`` spans, the
flame graph at most ``MAX_FLAME_NODES`` nodes, each time series ``MAX_POINTS`` points; the
page says what was downsampled.
"""

from __future__ import annotations

import math
import shlex
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from probe.analyzers.leaks.words import what_holds
from probe.analyzers.vocabulary import (
    COMPONENT_COLOURS,
    WAITS,
    confidence_words,
    speedup_range_words,
)
from probe.reports.page import (
    MAX_POINTS,
    Markup,
    bucket,
    chart_text,
    confidence_cell,
    html,
    join,
    layout,
    num,
    page,
)
from probe.reports.torch_html import (
    copies_html,
    host_ops_html,
    idle_figure,
    kernel_figure,
    span_figure,
    windows_html,
)

if TYPE_CHECKING:
    import numpy as np

    from probe.analyzers.analysis import Analysis
    from probe.analyzers.calltree import CallTree
    from probe.analyzers.diagnosis import Diagnosis
    from probe.analyzers.series import ResourceSeries

__all__ = ["MAX_FLAME_NODES", "MAX_TIMELINE_SPANS", "HtmlReport", "recommendations_html"]

MAX_TIMELINE_SPANS = 4000
MAX_FLAME_NODES = 2000
FLAME_MIN_SHARE = 0.001  # paths under 0.1% of the sampled time fold into their parent
TOP_STAGES = 8


# -- figures ----------------------------------------------------------------------------
def _stages_shown(d: Diagnosis) -> Any:
    stages = d.breakdown.stages
    return stages[stages["category"] != "request"] if d.run["requests"] else stages


def _amdahl_figure(d: Diagnosis) -> dict[str, Any]:
    """The Amdahl curve of each top stage: ``S(s)`` for a share ``p`` made ``s`` times
    faster (``analyzers.amdahl``), its ceiling, and the recommendations placed on it."""
    import numpy as np

    from probe.analyzers.amdahl import amdahl, ceiling

    s_values = np.logspace(0, 2, 60)
    data: list[dict[str, Any]] = []
    for name, row in _stages_shown(d).head(4).iterrows():
        p = float(row["path_share"])
        if p <= 0.01 or p >= 1.0:
            continue
        data.append(
            {
                "type": "scatter",
                "mode": "lines",
                "name": f"{chart_text(name)} (p={p:.2f})",
                "x": s_values.round(3).tolist(),
                "y": [round(amdahl(p, s), 4) for s in s_values],
            }
        )
        data.append(
            {
                "type": "scatter",
                "mode": "lines",
                "showlegend": False,
                "name": f"ceiling {chart_text(name)}",
                "line": {"dash": "dot", "width": 1},
                "x": [1, 100],
                "y": [round(ceiling(p), 3)] * 2,
                "hovertemplate": f"ceiling {ceiling(p):.2f}×<extra>{chart_text(name)}</extra>",
            }
        )
    points = [r for r in d.recommendations if r.scope != "memory"]
    if points:
        data.append(
            {
                "type": "scatter",
                "mode": "markers+text",
                "name": "recommendations",
                "x": [min(r.s, 100.0) if math.isfinite(r.s) else 100.0 for r in points],
                "y": [round(r.estimated_speedup, 3) for r in points],
                "text": [chart_text(r.id) for r in points],
                "textposition": "top center",
                "hovertext": [
                    chart_text(f"{r.id}: {r.estimated_speedup:.2f}× ({r.model})") for r in points
                ],
                "hoverinfo": "text",
                "marker": {"size": 10, "symbol": "diamond"},
            }
        )
    return {
        "data": data,
        "layout": layout(
            "Amdahl: end-to-end speedup against the stage's local speedup s",
            xaxis={"type": "log", "title": "local speedup s"},
            yaxis={"title": "end-to-end speedup S"},
        ),
    }


def _capacity_figure(d: Diagnosis) -> dict[str, Any] | None:
    """Throughput and latency against the clients in a closed loop (``analyzers.
    capacity``): the MVA curve, the ceiling, the measured point and, with an SLA, its
    line."""
    c = d.capacity
    if c is None or c.curve.empty:
        return None
    curve = c.curve
    x = curve["clients"].tolist()
    ends = [x[0], x[-1]]
    data = [
        _line("throughput (predicted)", x, curve["throughput_per_s"].round(3).tolist()),
        _line(
            "latency, mean (predicted)",
            x,
            curve["latency_ms"].round(3).tolist(),
            yaxis="y2",
            line={"dash": "dash"},
        ),
        {
            "type": "scatter",
            "mode": "markers",
            "name": "measured",
            "x": [round(c.measured_per_s * (c.latency_ms + c.beyond_server_ms) / 1e3, 3)],
            "y": [round(c.measured_per_s, 3)],
            "marker": {"size": 11, "symbol": "diamond"},
        },
    ]
    if curve["p99_ms"].notna().any():
        p99 = curve["p99_ms"].round(3).tolist()
        data.append(_line("latency, p99 (predicted)", x, p99, yaxis="y2", line={"dash": "dot"}))
    if math.isfinite(c.ceiling_per_s):
        ceiling = [round(c.ceiling_per_s, 3)] * 2
        data.append(_line(f"ceiling ({chart_text(c.bound_by)})", ends, ceiling, line={"width": 1}))
    if c.sla_ms is not None:
        sla = [c.sla_ms, c.sla_ms]
        style = {"yaxis": "y2", "line": {"width": 1, "dash": "longdash"}}
        data.append(_line(f"SLA p99 {c.sla_ms:g} ms", ends, sla, **style))
    return {
        "data": data,
        "layout": layout(
            "Capacity: throughput and latency against the clients in a closed loop",
            xaxis={"title": "clients (requests in flight, counting their time on the wire)"},
            yaxis={"title": "requests / s", "rangemode": "tozero"},
            yaxis2={"title": "latency ms", "overlaying": "y", "side": "right",
                    "rangemode": "tozero"},
        ),
    }  # fmt: skip


def _capacity_html(c: dict[str, Any] | None) -> Markup:
    if not c:
        return Markup("")
    stations = join(
        html(
            "<tr><td>{name}</td><td>{demand} ms</td><td>{servers}</td><td>{ceiling}/s</td></tr>",
            name=st["name"],
            demand=num(st.get("demand_ms"), ".3f"),
            servers=num(st.get("servers"), "g"),
            ceiling=num(st.get("ceiling_per_s"), ".1f"),
        )
        for st in c.get("stations", [])
    )
    sla = (
        html(
            "<p>SLA p99 {sla} ms: met up to {clients} in flight, {rate}/s (predicted); "
            "goodput {goodput}/s ({within} within it, as the {source} saw them).</p>",
            sla=num(c["sla_ms"], "g"),
            clients=c.get("clients_at_sla") if c.get("clients_at_sla") is not None else "no load",
            rate=num(c.get("rate_at_sla_per_s"), ".1f"),
            goodput=num(c.get("goodput_per_s"), ".1f"),
            within=num(c.get("within_sla"), ".1%"),
            source=c.get("goodput_from") or "—",
        )
        if c.get("sla_ms") is not None
        else Markup("")
    )
    return html(
        "<h2>Capacity</h2><section class='card' id='capacity'>"
        "<p>Ceiling <b>{ceiling}/s</b>, bound by <code>{bound}</code>; measured {measured}/s "
        "with {in_flight} in flight; the knee at {knee} in flight. Bottleneck law on what "
        "each request needed; mean-value analysis for the curve (chart below).</p>{sla}"
        "<table><tr><th>station</th><th>demand a request</th><th>servers</th>"
        "<th>its ceiling</th></tr>{stations}</table></section>",
        ceiling=num(c.get("ceiling_per_s"), ".1f"),
        bound=c.get("bound_by") or "—",
        measured=num(c.get("measured_per_s"), ".1f"),
        in_flight=num(c.get("measured_in_flight"), ".1f"),
        knee=num(c.get("knee_in_flight"), ".1f"),
        sla=sla,
        stations=stations,
    )


def _stage_figure(d: Diagnosis) -> dict[str, Any]:
    stages = _stages_shown(d).head(TOP_STAGES).iloc[::-1]
    seconds = stages["path_s"] if d.run["requests"] else stages["sampled_s"]
    demand = stages["cpu_share"] + stages["wait_unknown"]
    parts = {
        "python": demand * stages["python_share"],
        "native": demand * stages["native_share"],
        **{r: stages[f"wait_{r}"] for r in WAITS},
    }
    names = [chart_text(n) for n in stages.index]
    data = [
        {
            "type": "bar",
            "orientation": "h",
            "name": part,
            "y": names,
            "x": (seconds * share).round(4).tolist(),
            "marker": {"color": COMPONENT_COLOURS[part]},
        }
        for part, share in parts.items()
        if float(share.sum()) > 0
    ]
    label = "seconds on the request path" if d.run["requests"] else "sampled seconds"
    return {
        "data": data,
        "layout": layout(
            "Stages: on-CPU (Python, native) and waiting, by reason",
            barmode="stack",
            xaxis={"title": label},
            yaxis={"automargin": True},
            height=max(260, 60 + 40 * len(names)),
        ),
    }


def _timeline_figure(a: Analysis, notes: list[str]) -> dict[str, Any] | None:
    import numpy as np

    indexed = a.diagnosis.breakdown.spans
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
    names = a.thread_names
    top = indexed.groupby("name")["dur_ns"].sum().nlargest(TOP_STAGES).index
    label = indexed["name"].where(indexed["name"].isin(top), "other")
    data = []
    for name, part in indexed.groupby(label, sort=False):
        threads = [chart_text(f"{names.get(t, 'thread')} ({t})") for t in part["thread_id"]]
        data.append(
            {
                "type": "bar",
                "orientation": "h",
                "name": chart_text(name),
                "y": threads,
                "base": ((part["start_ns"] - a.t0_ns) / 1e9).round(6).tolist(),
                "x": (part["dur_ns"] / 1e9).round(6).tolist(),
                "hovertemplate": "%{base:.3f} s + %{x:.4f} s<extra>"
                + chart_text(name)
                + "</extra>",
            }
        )
    return {
        "data": data,
        "layout": layout(
            "Spans per thread over time",
            barmode="overlay",
            xaxis={"title": "seconds"},
            yaxis={"automargin": True},
            height=max(260, 80 + 28 * indexed["thread_id"].nunique()),
        ),
    }


def _flame_figure(tree: CallTree, notes: list[str]) -> dict[str, Any] | None:

    if tree.total_ns <= 0:
        return None
    kept = tree.pruned(min_share=FLAME_MIN_SHARE, max_nodes=MAX_FLAME_NODES)
    if len(kept) < len(tree):
        notes.append(
            f"flame graph: {len(kept):,} of {len(tree):,} call paths shown "
            "(the rest are each under 0.1% of the sampled time)"
        )
    common = {
        "type": "icicle",
        "ids": kept.keys,
        "labels": [chart_text(label) for label in kept.labels],
        "parents": kept.parents,
        "branchvalues": "remainder",
        "tiling": {"orientation": "v"},
        "root": {"color": "#f4f4f4"},
        "maxdepth": 10,
        "textinfo": "label",
    }

    # "remainder": a node's value is its own and plotly adds its children's; a pruned
    # child's time stays in its parent's own value, so totals stay exact.
    def seconds(values: np.ndarray) -> list[float]:
        return [round(float(v) / 1e9, 6) for v in kept.own(values)]

    data = [
        {
            **common,
            "name": "on-CPU",
            "values": seconds(kept.cpu_ns),
            "visible": True,
            "marker": {"colors": ["#e4572e"] * len(kept)},
            "hovertemplate": "%{label}<br>%{value:.3f} s on-CPU<extra></extra>",
        },
        {
            **common,
            "name": "waiting",
            "values": seconds(kept.wait_ns),
            "visible": False,
            "marker": {"colors": ["#4c78a8"] * len(kept)},
            "hovertemplate": "%{label}<br>%{value:.3f} s waiting<extra></extra>",
        },
    ]
    return {
        "data": data,
        "layout": layout(
            "Sampled stacks (flame graph, root at top)", height=520, updatemenus=[_FLAME_MENU]
        ),
    }


# the flame graph's two views, one trace each: on-CPU time and waiting time
_FLAME_MENU = {
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


def _line(name: str, x: Sequence[float], y: Sequence[float | None], **extra: Any) -> dict[str, Any]:
    return {"type": "scatter", "mode": "lines", "name": name, "x": x, "y": y, **extra}


# The charts of the process's readings over time: a series read once is a point, not a
# trend, and no chart of it is drawn -- so a run with nothing to judge reads the same
# page whichever way it was told: without the analysis stack where it took no sample
# (``reports.empty_run``), or with it where one tick caught only its exit (a 0.03-s
# script's, 1 run of many in a clean-clone CI, 2026-12-06: its page drew two charts of one
# reading each).
_READINGS_OVER_TIME = ("resources", "memory")


def _drawn(name: str, figure: dict[str, Any]) -> bool:
    """Whether the figure named ``name`` is worth a chart: it has a series, and one with
    two points or more where it charts readings over time."""
    if name not in _READINGS_OVER_TIME:
        return bool(figure["data"])
    return any(len(trace.get("x", ())) >= 2 for trace in figure["data"])


def _resource_figure(series: ResourceSeries, notes: list[str]) -> dict[str, Any]:
    data: list[dict[str, Any]] = []
    if series.process_cores is not None and series.disk_bytes_per_s is not None:
        cores, disk = series.process_cores, series.disk_bytes_per_s
        data.append(_line("process CPU (cores)", *bucket(cores.t_s, cores.values)))
        data.append(
            _line(
                "disk I/O (MB/s)",
                *bucket(disk.t_s, disk.values / 1e6),
                yaxis="y2",
                visible="legendonly",
            )
        )
        if len(cores) + 1 > MAX_POINTS:  # the readings, one more than the rates
            notes.append(f"resource charts: bucketed to {MAX_POINTS:,} points per series")
    for device, util in series.gpu_util_percent.items():
        data.append(_line(f"GPU {device} util (%)", *bucket(util.t_s, util.values), yaxis="y2"))
    if series.host_cpu_percent is not None:
        host = series.host_cpu_percent
        data.append(
            _line("host CPU (%)", *bucket(host.t_s, host.values), yaxis="y2", line={"dash": "dot"})
        )
    return {
        "data": data,
        "layout": layout(
            "CPU, GPU and I/O over time",
            xaxis={"title": "seconds"},
            yaxis={"title": "cores"},
            yaxis2={"title": "% or MB/s", "overlaying": "y", "side": "right"},
        ),
    }


def _memory_figure(a: Analysis) -> dict[str, Any] | None:
    import numpy as np

    rss = a.series.rss_bytes
    if rss is None:
        return None
    data: list[dict[str, Any]] = [_line("RSS (MiB)", *bucket(rss.t_s, rss.values / 2**20))]
    leak = a.diagnosis.leak
    if leak.points and (leak.slope_bytes_per_s or leak.intercept_bytes):
        # the detector's fit is on the sampling clock in seconds: back to it and out again
        origin = a.t0_ns / 1e9
        ends = np.array([rss.t_s.min(), rss.t_s.max()]) + origin
        fit = (leak.intercept_bytes + leak.slope_bytes_per_s * ends) / 2**20
        data.append(
            _line(
                f"trend {leak.slope_bytes_per_s / 1e6:+.3f} MB/s"
                f"{' (leak)' if leak.detected else ''}",
                np.round(ends - origin, 3).tolist(),
                np.round(fit, 3).tolist(),
                line={"dash": "dash"},
            )
        )
    traced = a.series.traced_bytes
    if traced is not None:
        data.append(
            {
                "type": "scatter",
                "mode": "lines+markers",
                "name": "traced by tracemalloc (MiB)",
                "x": np.round(traced.t_s, 3).tolist(),
                "y": np.round(traced.values / 2**20, 3).tolist(),
            }
        )
    return {
        "data": data,
        "layout": layout("Memory over time", xaxis={"title": "seconds"}, yaxis={"title": "MiB"}),
    }


# -- data -------------------------------------------------------------------------------
def _meta_rows(meta: dict[str, Any], wall_s: float) -> list[tuple[str, str]]:
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
        ("wall time", f"{wall_s:.2f} s"),
        ("ended by", f"{exit_info.get('ended_by', '?')} (exit status {exit_info.get('status')})"),
        (
            "host",
            f"{host.get('hostname', '?')}, {host.get('cpu_count', '?')} CPUs"
            + (
                f" ({host.get('cores_allowed'):g} allowed: {host['cpu_limit']})"
                if host.get("cpu_limit")
                else ""
            )
            + ", "
            f"{(host.get('memory_total_bytes') or 0) / 2**30:.1f} GiB, "
            f"{host.get('platform', '')}",
        ),
        ("GPUs", gpu_text),
        ("Python", f"{py.get('implementation', '')} {py.get('version', '?')}"),
        ("probe", str(meta.get("probe_version", "?"))),
        ("sampling", ", ".join(f"{k}={v}" for k, v in settings.items())),
    ]


def _elsewhere(meta: dict[str, Any], run_dir: Path | None) -> list[tuple[str, str]]:
    """(what, the command): reproduce the run; open it in Perfetto and speedscope; gate
    a later run on it in CI."""
    where = shlex.quote(str(run_dir)) if run_dir is not None else "RUN_DIR"
    command = [str(a) for a in meta.get("command") or []]
    rows = [("reproduce", shlex.join(command))] if command else []
    return rows + [
        ("Perfetto", f"probe export {where}  # then open trace.perfetto-trace at ui.perfetto.dev"),
        ("speedscope", f"probe export {where} --format speedscope"),
        ("CI gate", f"probe check NEW_RUN_DIR --baseline {where} --max-regression 10%"),
    ]


def _target_name(meta: dict[str, Any]) -> str:
    return str((meta.get("target") or {}).get("name", "run")).rsplit("/", 1)[-1]


def _verdict_figures(primary: dict[str, Any], run: dict[str, Any]) -> dict[str, Any]:
    """The verdict card's figures: the primary limit's, and the run's it shows."""
    shown = ("requests", "throughput_per_s", "latency_ms", "wall_s", "process_cores")
    return {**primary, **{k: run[k] for k in (*shown, "cpu_count")}}


def _exported_trace(run_dir: Path | None) -> str | None:
    name = "trace.perfetto-trace"  # probe export's default (reports.perfetto)
    return name if run_dir is not None and (run_dir / name).is_file() else None


def _elsewhere_html(rows: list[tuple[str, str]], perfetto_file: str | None) -> Markup:
    if not rows:
        return Markup("")
    link = (
        html(
            "<p>The run's Perfetto trace: <a href='{0}' download>{0}</a> (open it at "
            "ui.perfetto.dev, <em>Open trace file</em>; it stays on your machine).</p>",
            perfetto_file,
        )
        if perfetto_file
        else Markup("")
    )
    body = join(html("<tr><th>{}</th><td><code>{}</code></td></tr>", k, v) for k, v in rows)
    return html("<h2>Reproduce and open elsewhere</h2>{}<table class='meta'>{}</table>", link, body)


def _batching_html(b: dict[str, Any]) -> Markup:
    """A stage's latency by batch size and the advice (``analyzers.batching``)."""
    if not b:
        return Markup("")
    rows = join(
        html(
            "<tr{mark}><td>{batch}</td><td>{calls}</td><td>{p50} ms</td><td>{p99} ms</td>"
            "<td>{throughput}/s</td></tr>",
            mark=Markup(" class='chosen'") if p["batch"] == b["batch"] else Markup(""),
            batch=p["batch"],
            calls=p["calls"],
            p50=num(p.get("p50_ms"), ".3f"),
            p99=num(p.get("p99_ms"), ".3f"),
            throughput=num(p.get("throughput"), ".1f"),
        )
        for p in b.get("curve", [])
    )
    return html(
        "<h2>Batching</h2><section class='card' id='batching'>"
        "<p>Serve <code>{stage}</code> at batch <b>{batch}</b> with a maximum queue delay of "
        "{delay} ms: at most {throughput} requests/s ({speedup} batch 1), p99 at most "
        "{bound} ms below that load (the stage's own figures, from its spans' batch "
        "sizes).</p><table><tr><th>batch</th><th>calls</th><th>p50</th><th>p99</th>"
        "<th>requests/s</th></tr>{rows}</table></section>",
        stage=b.get("stage", ""),
        batch=b["batch"],
        delay=num(b.get("max_queue_delay_ms"), ".2f"),
        throughput=num(b.get("throughput"), ".1f"),
        speedup=num(b.get("speedup"), ".2f") + "×" if b.get("speedup") else "—",
        bound=num(b.get("p99_bound_ms"), ".2f"),
        rows=rows,
    )


_SECTIONS = {
    "amdahl": "Amdahl: what each fix can buy",
    "capacity": "Capacity",
    "stages": "Stage breakdown",
    "timeline": "Timeline",
    "flame": "Flame graph",
    "resources": "Resources",
    "memory": "Memory",
    "torch_kernels": "PyTorch window: GPU time by kernel family and precision",
    "torch_idle": "PyTorch window: GPU idle time by cause",
    "torch_spans": "PyTorch window: spans' host time and the GPU time of the work they launched",
}


@dataclass(frozen=True)
class HtmlReport:
    """Everything ``report.html`` shows, as plain data; ``render()`` writes the page."""

    format: ClassVar[str] = "html"
    filename: ClassVar[str] = "report.html"

    title: str
    verdict: dict[str, Any]
    recommendations: list[dict[str, Any]]
    findings: list[dict[str, Any]]
    leak: dict[str, Any]
    meta_rows: list[tuple[str, str]]
    notes: list[str]
    figures: dict[str, dict[str, Any]] = field(default_factory=dict)  # id -> plotly spec
    downsampled: list[str] = field(default_factory=list)
    # a served app's endpoints: one dict per route (diagnosis.json's endpoints.routes)
    endpoints: list[dict[str, Any]] = field(default_factory=list)
    limiting_endpoint: str | None = None
    # the same app's worker processes (diagnosis.json's endpoints.workers), if several
    endpoint_workers: list[dict[str, Any]] = field(default_factory=list)
    # the same app's capacity (diagnosis.json's capacity), if served
    capacity: dict[str, Any] = field(default_factory=dict)
    # dynamic batching (diagnosis.json's batching), where stage spans carry batch sizes
    batching: dict[str, Any] = field(default_factory=dict)
    # the commands that reproduce the run and open it elsewhere (_elsewhere), and the
    # Perfetto file beside the page, if one was exported
    elsewhere: list[tuple[str, str]] = field(default_factory=list)
    perfetto_file: str | None = None
    # the torch.profiler windows (diagnosis.json's torch block), if any were taken
    torch: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_analysis(cls, analysis: Analysis) -> HtmlReport:
        d, notes = analysis.diagnosis, list[str]()
        figures: dict[str, dict[str, Any]] = {}
        if d.primary["kind"] != "none":
            figures["amdahl"] = _amdahl_figure(d)
            figures["stages"] = _stage_figure(d)
        optional = {
            "timeline": _timeline_figure(analysis, notes),
            "flame": _flame_figure(analysis.call_tree, notes),
            "resources": _resource_figure(analysis.series, notes),
            "memory": _memory_figure(analysis),
            "capacity": _capacity_figure(d),
        }
        torch = d.torch.to_dict() if d.torch is not None else {}
        optional.update(_torch_figures(torch))
        figures.update({k: f for k, f in optional.items() if f is not None and _drawn(k, f)})
        name = _target_name(analysis.meta)
        served = d.to_dict().get("endpoints", {})
        return cls(
            title=f"probe: {name}",
            verdict=_verdict_figures(d.primary, d.run),
            recommendations=[r.to_dict() for r in d.recommendations],
            findings=[f.to_dict() for f in d.findings],
            leak=d.leak.to_dict(),
            meta_rows=_meta_rows(analysis.meta, d.run["wall_s"]),
            notes=list(d.notes),
            figures=figures,
            downsampled=notes,
            endpoints=served.get("routes", []),
            limiting_endpoint=d.endpoints.limiting if d.endpoints is not None else None,
            endpoint_workers=served.get("workers", []),
            capacity=d.capacity.to_dict() if d.capacity is not None else {},
            batching=d.batching.to_dict() if d.batching is not None else {},
            elsewhere=_elsewhere(analysis.meta, analysis.path),
            perfetto_file=_exported_trace(analysis.path),
            torch=torch,
        )

    @classmethod
    def of_nothing_to_judge(
        cls, document: dict[str, Any], meta: dict[str, Any], run_dir: Path | None
    ) -> HtmlReport:
        """The page of a run with nothing to judge (``analyzers.empty_run``'s document):
        its verdict, leak and run, and no chart (one reading of the process at most)."""
        return cls(
            title=f"probe: {_target_name(meta)}",
            verdict=_verdict_figures(document["primary"], document["run"]),
            recommendations=[],
            findings=[],
            leak=document["leak"],
            meta_rows=_meta_rows(meta, document["run"]["wall_s"]),
            notes=list(document["notes"]),
            elsewhere=_elsewhere(meta, run_dir),
            perfetto_file=_exported_trace(run_dir),
        )

    def render(self, *, plotly_js: str | None = None) -> str:
        """The page. ``plotly_js``: the library's source (default: the installed plotly's)."""
        figures = [(k, heading, self.figures[k]) for k, heading in _SECTIONS.items()
                   if k in self.figures]  # fmt: skip
        notes = join(html("<li class='note'>{}</li>", n) for n in self.notes + self.downsampled)
        meta = join(html("<tr><th>{}</th><td>{}</td></tr>", k, v) for k, v in self.meta_rows)
        body = html(
            "{}{}{}{}<h2>What to change</h2>{}<h2>Leak</h2>{}{}",
            _verdict_html(self.verdict),
            _endpoints_html(self.endpoints, self.limiting_endpoint, self.endpoint_workers),
            _capacity_html(self.capacity),
            _batching_html(self.batching),
            recommendations_html(self.recommendations),
            _leak_html(self.leak),
            _torch_html(self.torch),
        )
        tail = (html("<h2>Notes</h2><ul>{}</ul>", notes) if notes else Markup("")) + html(
            "<h2>Run</h2><table class='meta'>{}</table>{}",
            meta,
            _elsewhere_html(self.elsewhere, self.perfetto_file),
        )
        return page(self.title, body, figures, tail, plotly_js=plotly_js)


# -- page -------------------------------------------------------------------------------
def _verdict_html(v: dict[str, Any]) -> Markup:
    lat = v.get("latency_ms") or {}
    where = html(" in <code>{}</code>", v["stage"]) if v.get("stage") else Markup("")
    return html(
        "<section class='card verdict' id='verdict'>"
        "<div class='kind'>{kind}/{subkind}{where}</div><p>{summary}</p>"
        "<table><tr><th>share of the path</th><th>confidence</th><th>requests</th>"
        "<th>throughput</th><th>latency p50 / p95 / p99</th><th>CPU</th></tr>"
        "<tr><td>{share}</td><td>{confidence}</td><td>{requests}</td><td>{throughput}/s</td>"
        "<td>{p50} / {p95} / {p99} ms</td><td>{cores} of {cpus} cores</td></tr></table>"
        "</section>",
        kind=v["kind"],
        subkind=v["subkind"],
        where=where,
        summary=v["summary"],
        share=num(v.get("share"), ".0%"),
        confidence=confidence_cell(v.get("confidence")),
        requests=v.get("requests") or "—",
        throughput=num(v.get("throughput_per_s"), ".1f"),
        p50=num(lat.get("p50"), ".1f"),
        p95=num(lat.get("p95"), ".1f"),
        p99=num(lat.get("p99"), ".1f"),
        cores=num(v.get("process_cores"), ".2f"),
        cpus=v.get("cpu_count"),
    )


def _endpoints_html(
    routes: list[dict[str, Any]], limiting: str | None, workers: list[dict[str, Any]]
) -> Markup:
    if not routes:
        return Markup("")
    rows = join(
        html(
            "<tr{cls}><td><code>{name}</code></td><td>{requests}</td><td>{errors}</td>"
            "<td>{rate}/s</td><td>{p50} / {p90} / {p95} / {p99} ms</td><td>{cpu} ms</td>"
            "<td>{gil}</td><td>{top}</td></tr>",
            cls=Markup(" class='limiting'") if r["name"] == limiting else Markup(""),
            name=r["name"],
            requests=r["requests"],
            errors=r["errors"],
            rate=num(r.get("throughput_per_s"), ".1f"),
            p50=num(r.get("p50_ms"), ".1f"),
            p90=num(r.get("p90_ms"), ".1f"),
            p95=num(r.get("p95_ms"), ".1f"),
            p99=num(r.get("p99_ms"), ".1f"),
            cpu=num(r.get("cpu_ms_per_request"), ".2f"),
            gil=num(r.get("gil_s"), ".2f"),
            top=", ".join(f"{f} ({s:.2f} s)" for f, s in r.get("top_frames") or []),
        )
        for r in routes
    )
    return html(
        "<h2>Endpoints</h2><section class='card' id='endpoints'>"
        "<p>Exact counts and latency from each HTTP request's span; CPU and waits from the "
        "stack samples in each route's handler. Limiting throughput: <code>{limiting}</code>"
        "</p><table><tr><th>route</th><th>requests</th><th>errors</th><th>throughput</th>"
        "<th>latency p50 / p90 / p95 / p99</th><th>CPU a request</th><th>GIL wait s</th>"
        "<th>top frames</th></tr>{rows}</table>{phases}{workers}</section>",
        limiting=limiting or "—",
        rows=rows,
        phases=_phases_html(routes),
        workers=_workers_html(workers),
    )


# analyzers.endpoints' request phases, as the page names them
_PHASES = (("queued", "loop wait"), ("handler", "handler"), ("send", "send"),
           ("after", "after the answer"), ("loop_lag", "worst loop lag"))  # fmt: skip


def _phases_html(routes: list[dict[str, Any]]) -> Markup:
    shown = [
        (key, label)
        for key, label in _PHASES
        if any(r.get(f"{key}_p50_ms") is not None for r in routes)
    ]
    if not shown:
        return Markup("")
    heads = join(html("<th>{label} p50 / p99</th>", label=label) for _, label in shown)
    rows = join(
        html(
            "<tr><td><code>{name}</code></td>{cells}</tr>",
            name=r["name"],
            cells=join(
                html(
                    "<td>{p50} / {p99} ms</td>",
                    p50=num(r.get(f"{key}_p50_ms"), ".2f"),
                    p99=num(r.get(f"{key}_p99_ms"), ".2f"),
                )
                for key, _ in shown
            ),
        )
        for r in routes
    )
    return html(
        "<h3>Request phases</h3><p>From each request's span: the handler up to the "
        "response's start, sending the body, the app's work after the answer (the latency "
        "ends at the answer), and where the server stamps a request as it parses it "
        "(uvicorn) the wait for the event loop to start its handler; on an asyncio loop, "
        "the longest the loop kept the request waiting at once (its worst lag).</p>"
        "<table id='phases'><tr><th>route</th>{heads}</tr>{rows}</table>",
        heads=heads,
        rows=rows,
    )


def _workers_html(workers: list[dict[str, Any]]) -> Markup:
    if not workers:
        return Markup("")
    rows = join(
        html(
            "<tr><td>{pid}</td><td>{requests}</td><td>{errors}</td><td>{p50} / {p99} ms</td>"
            "<td>{cpu} s</td><td>{routes}</td></tr>",
            pid=w["pid"],
            requests=w["requests"],
            errors=w["errors"],
            p50=num(w.get("p50_ms"), ".1f"),
            p99=num(w.get("p99_ms"), ".1f"),
            cpu=num(w.get("cpu_s"), ".2f"),
            routes=", ".join(f"{k} {v}" for k, v in (w.get("routes") or {}).items()),
        )
        for w in workers
    )
    return html(
        "<h3>Worker processes</h3><p>Each request counted in the process that served it.</p>"
        "<table id='workers'><tr><th>pid</th><th>requests</th><th>errors</th>"
        "<th>latency p50 / p99</th><th>CPU in the handlers</th><th>routes</th></tr>"
        "{rows}</table>",
        rows=rows,
    )


def recommendations_html(recommendations: list[dict[str, Any]]) -> Markup:
    if not recommendations:
        return Markup(
            "<p class='muted'>No recommendation: no fix is estimated to buy 1.25× or more.</p>"
        )
    out = []
    for i, r in enumerate(recommendations, 1):
        evidence = join(
            html("<tr><td>{}</td><td>{}</td></tr>", k, v)
            for k, v in r.get("evidence", {}).items()
            if not isinstance(v, dict | list)
        )
        stated = speedup_range_words(r.get("evidence", {}).get("speedup_range"))
        speed = (
            Markup("memory")
            if r["scope"] == "memory"
            else html(
                "{}× <span class='muted'>({}ceiling {}×, p={}, s={})</span>",
                num(r.get("estimated_speedup"), ".2f"),
                f"{stated}; " if stated else "",
                num(r.get("ceiling"), ".2f", "∞"),
                num(r.get("p"), ".2f"),
                num(r.get("s"), ".2f", "∞"),
            )
        )
        out.append(
            html(
                "<section class='card rec' id='rec-{id}'><div>{i}. <b>{title}</b> "
                "<code>{id}</code></div><div class='speed'>{speed}</div><pre>{how}</pre>"
                "<details><summary>evidence and model</summary><p class='muted'>{model}</p>"
                "<table>{evidence}</table></details></section>",
                id=r["id"],
                i=i,
                title=r["title"],
                speed=speed,
                how=r["how"],
                model=r.get("model", ""),
                evidence=evidence,
            )
        )
    return join(out)


def _torch_figures(torch: dict[str, Any]) -> dict[str, dict[str, Any] | None]:
    if not torch:
        return {}
    if not torch["run"].get("gpu"):  # the host's side is the section's tables
        return {}
    gpu = torch["gpu"]
    return {
        "torch_kernels": kernel_figure(gpu["kernels"]),
        "torch_idle": idle_figure(gpu["idle"]),
        "torch_spans": span_figure(torch["stages"][:20]),
    }


def _torch_html(torch: dict[str, Any]) -> Markup:
    """The torch.profiler windows: which were taken (linked), the shown one's limit
    where it ran GPU work, its host ops and its copies; its charts follow the others."""
    if not torch:
        return Markup("")
    gpu = html(
        "<p>{}</p><h3>Copies</h3>{}", torch["primary"].get("summary", ""),
        copies_html(torch["gpu"]["copies"]),
    ) if torch["run"].get("gpu") else Markup("")  # fmt: skip
    notes = join(html("<li class='note'>{}</li>", n) for n in torch.get("notes") or [])
    return html(
        "<h2 id='torch'>PyTorch ops</h2>{}<p class='muted'>The window shown: {} (the one "
        "with the most ops); it represents {} of the run, from the first forward pass "
        "on.</p>{}<h3>Host</h3>{}{}",
        windows_html(torch["windows"], torch["window"]),
        torch["window"],
        num(torch.get("steady_share"), ".0%"),
        gpu,
        host_ops_html(torch["cpu"]),
        html("<ul>{}</ul>", notes) if notes else Markup(""),
    )


def _leak_html(leak: dict[str, Any]) -> Markup:
    state = leak.get("state", "leak" if leak.get("detected") else "no_leak")
    if state == "no_leak":
        return html("<p class='muted' id='leak-state'>No leak: {}.</p>", leak.get("reason", ""))
    if state == "undetermined":
        return html(
            "<div class='card' id='leak-state'><b>Leak: undetermined</b>: {}. To settle it: "
            "{}.{}</div>",
            leak.get("reason", ""),
            leak.get("settle", ""),
            _growing_types_html(leak),
        )
    sites = join(
        html(
            "<tr><td>{}</td><td>+{} MiB</td><td><pre>{}</pre></td></tr>",
            s["site"],
            f"{s['grew_bytes'] / 2**20:.1f}",
            s.get("traceback", ""),
        )
        for s in leak.get("top_sites", [])
    )
    table = (
        html("<table><tr><th>site</th><th>grew</th><th>traceback</th></tr>{}</table>", sites)
        if sites
        else Markup("<p class='muted'>Run with --memory to name the sites.</p>")
    )
    per = leak.get("bytes_per_request")
    return html(
        "<div class='card' id='leak-state'><b>Leak: memory grows {} MB/s</b>{} (confidence "
        "{}). {}{}{}{}</div>",
        f"{leak['slope_bytes_per_s'] / 1e6:.2f}",
        f", {per / 1024:,.1f} KiB a request" if per else "",
        confidence_words(leak["confidence"]),
        leak.get("reason", ""),
        _held_html(leak),
        table,
        _growing_types_html(leak),
    )


def _held_html(leak: dict[str, Any]) -> Markup:
    _, held = what_holds(leak)
    return html("<p id='leak-held'>{}</p>", held) if held else Markup("")


def _growing_types_html(leak: dict[str, Any]) -> Markup:
    types = leak.get("growing_types") or []
    if not types:
        return Markup("")
    rows = join(
        html("<tr><td><code>{}</code></td><td>+{}</td></tr>", t["type"], f"{t['count_grew']:,}")
        for t in types
    )
    return html("<table><tr><th>object type</th><th>live objects grew</th></tr>{}</table>", rows)
