"""The HTML report's data and page: what it shows, that it escapes, that it stays small."""

from __future__ import annotations

import json
import re

from probe.analyzers.analysis import analyze
from probe.reports.html import MAX_FLAME_NODES, MAX_TIMELINE_SPANS, HtmlReport
from probe.rundir import load
from tests.synthetic import RunBuilder

XSS = "<img src=x onerror=alert(1)>"
FAKE_PLOTLY = "/* plotly.js */"


def service_run(tmp_path, *, requests: int = 40, name: str = "download"):
    b = RunBuilder(duration_s=2.0)
    wait = b.stack("main", "handle", name, leaf_call="sock.recv_into")
    work = b.stack("main", "handle", "classify")
    t = 0.0
    for i in range(requests):
        req = b.span("request", t, t + 50, category="request", request=f"r{i}")
        b.span(name, t, t + 45, parent=req, request=f"r{i}")
        b.span("classify", t + 45, t + 50, parent=req, request=f"r{i}")
        for k in range(0, 45, 5):
            b.sample(1, t + k + 2, wait, wall_ms=5, cpu_ms=0.0, reason="network")
        b.sample(1, t + 47, work, wall_ms=5)
        t += 50
    for k in range(0, int(t) + 1, 100):
        b.resources(k, 0.1 * k / 1000, (100 << 20) + k * 1000)
        b.system(k, 10.0)
    b.meta_extra = {"command": ["probe", "run", "app.py", "--token", "[redacted]", XSS]}
    return load(b.write(tmp_path / "run"))


def page_for(run):
    return HtmlReport.from_analysis(analyze(run)).render(plotly_js=FAKE_PLOTLY)


def specs(page: str) -> dict[str, dict]:
    found = re.findall(
        r"<script type='application/json' class='plot-spec' data-target='fig-(\w+)'"
        r" nonce='[^']+'>(.*?)</script>",
        page,
        flags=re.S,
    )
    return {name: json.loads(body) for name, body in found}


def test_report_data_has_the_verdict_recommendations_and_every_chart(tmp_path):
    run = service_run(tmp_path)
    data = HtmlReport.from_analysis(analyze(run))
    assert data.verdict["kind"] == "io" and data.verdict["stage"] == "download"
    assert data.recommendations[0]["id"] == "concurrent_io"
    assert set(data.figures) == {"amdahl", "stages", "timeline", "flame", "resources", "memory"}
    flame = data.figures["flame"]
    assert [t["name"] for t in flame["data"]] == ["on-CPU", "waiting"]
    assert [t["visible"] for t in flame["data"]] == [True, False]  # switched by the buttons
    assert flame["layout"]["updatemenus"][0]["buttons"][1]["label"] == "waiting"
    waiting = flame["data"][1]
    assert sum(waiting["values"]) == __import__("pytest").approx(40 * 0.045, rel=0.01)
    amdahl = data.figures["amdahl"]["data"]
    assert any(t["name"].startswith("download (p=0.90)") for t in amdahl)


def test_the_page_is_server_rendered_and_embeds_plotly_once(tmp_path):
    page = page_for(service_run(tmp_path))
    assert page.count(FAKE_PLOTLY) == 1
    assert "<script src" not in page and "cdn" not in page.lower()
    # readable without scripts: verdict, what to change, the run's metadata
    text = re.sub(r"<script.*?</script>", "", page, flags=re.S)
    assert "io/network" in text and "Make the download calls concurrent" in text
    assert "ThreadPoolExecutor" in text  # the how-to sketch
    assert "[redacted]" in text and "--token" in text
    assert len(specs(page)) == 6


def test_every_service_string_is_escaped(tmp_path):
    run = service_run(tmp_path, name=XSS)
    page = page_for(run)
    assert XSS not in page  # neither in the HTML nor in the embedded chart JSON
    assert "&lt;img src=x onerror=alert(1)&gt;" in page
    for spec in specs(page).values():
        for trace in spec["data"]:
            for key in ("name", "labels", "y", "text"):
                values = trace.get(key)
                values = values if isinstance(values, list) else [values]
                assert not any(isinstance(v, str) and "<img" in v for v in values)
    # only the page's own scripts carry the nonce; CSP blocks inline handlers
    nonce = re.search(r"'nonce-([^']+)'", page).group(1)
    assert page.count(f"nonce='{nonce}'") == page.count("<script")


def test_a_service_string_spelling_the_script_slot_stays_text(tmp_path):
    # plotly.js is spliced into the formatted page at a placeholder: a stage named like
    # it must stay escaped text, with the library once, in the page's own script
    from probe.reports.page import _PLOTLY_SLOT

    page = page_for(service_run(tmp_path, name=_PLOTLY_SLOT))
    assert page.count(FAKE_PLOTLY) == 1 and _PLOTLY_SLOT not in page
    nonce = re.search(r"'nonce-([^']+)'", page).group(1)
    assert f"<script nonce='{nonce}'>{FAKE_PLOTLY}</script>" in page
    assert "&lt;probe-plotly-js/&gt;" in page


def test_long_runs_are_downsampled_and_say_so(tmp_path):
    b = RunBuilder(duration_s=100.0)
    stack_ids = [b.stack("main", f"f{i}", f"g{i}", f"h{i}") for i in range(3000)]
    for thread in range(1, 5):
        t = 0.0
        for _ in range(2500):
            req = b.span("request", t, t + 10, thread=thread, category="request", request="r")
            b.span("work", t, t + 9, thread=thread, parent=req, request="r")
            b.span("inner", t + 1, t + 2, thread=thread, parent=req + 1, request="r")
            t += 10
    for k, sid in enumerate(stack_ids):
        b.sample(1, 5 + k * 10, sid, wall_ms=10)
    run = load(b.write(tmp_path / "long"))
    data = HtmlReport.from_analysis(analyze(run))
    bars = sum(len(t["x"]) for t in data.figures["timeline"]["data"])
    assert bars <= MAX_TIMELINE_SPANS
    assert len(data.figures["flame"]["data"][0]["ids"]) <= MAX_FLAME_NODES
    assert any("span timeline" in n and "30,000 spans" in n for n in data.downsampled)
    page = data.render(plotly_js=FAKE_PLOTLY)
    assert "30,000 spans" in page
    assert len(page.encode()) < 2_000_000  # plus plotly.js (~4.8 MB): well under 10 MB


def test_an_empty_run_still_renders(tmp_path):
    run = load(RunBuilder(duration_s=0.0).write(tmp_path / "empty"))
    page = page_for(run)
    assert "Nothing to judge" in page and "No recommendation" in page


def test_a_stage_with_batch_sizes_gets_its_batching_card_escaped(tmp_path):
    b = RunBuilder(duration_s=2.0)
    work = b.stack("main", "serve", "model")
    t = 0.0
    for i in range(60):
        size = (1, 8)[i % 2]
        ms = 2 + 0.25 * size
        b.span(XSS, t, t + ms, attrs=json.dumps({"batch": size}))
        b.sample(1, t + 1, work, wall_ms=ms)
        t += ms
    b.resources(0, 0.0, 100 << 20)
    page = page_for(load(b.write(tmp_path / "run")))
    card = page[page.index("id='batching'") :]
    assert "at batch <b>8</b>" in card and "&lt;img src=x onerror=alert(1)&gt;" in card
    assert XSS not in page


def test_the_pages_plotly_js_is_the_installed_librarys_read_without_importing_plotly():
    import subprocess
    import sys

    code = (
        "import sys; from probe.reports.page import installed_plotly_js; "
        "js = installed_plotly_js(); imported = 'plotly' in sys.modules; "
        "from plotly.offline import get_plotlyjs; print(imported, js == get_plotlyjs())"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "True"]


def test_the_windows_table_marks_a_window_short_of_the_target_s_work_and_the_one_shown():
    from probe.reports.torch_html import windows_html

    stalled = {"file": "torch/window-1.json", "start_s": 2.0, "end_s": 3.0, "ops": 12}
    working = {"file": "torch/window-2.json", "start_s": 4.0, "end_s": 4.1, "ops": 9000}
    table = str(windows_html([{**stalled, "short_of_work": True}, working], working["file"]))
    first, second = re.findall(r"<tr><td>(.*?)</td>", table)
    assert "short of the target" in first and "(shown)" not in first
    assert "(shown)" in second and "short of" not in second


def test_the_windows_table_tells_a_closing_that_stopped_the_target_from_one_that_did_not():
    from probe.reports.torch_html import windows_html

    held = {"file": "torch/window-1.json", "stall_s": 0.41, "close_s": 0.41}
    free = {"file": "torch/window-2.json", "stall_s": 0.0, "close_s": 0.38}
    before = {"file": "torch/window-3.json", "stall_s": 0.44}  # a run recorded before close_s
    table = str(windows_html([held, free, before], ""))
    cells = re.findall(r"<td>([^<]*)</td><td>[^<]*</td></tr>", table)
    assert cells == ["0.41 s", "none (0.38 s, GIL free)", "0.44 s"]


def test_a_run_whose_process_was_read_once_draws_no_chart_of_its_readings(tmp_path):
    # a 0.03-s script whose one tick caught only its exit: "nothing to judge" by the full
    # analysis, and the same page as without it (reports.empty_run): no chart of a point
    b = RunBuilder(duration_s=0.03)
    b.sample(1, 10, b.stack("<module>"), wall_ms=10)
    b.resources(0, 0.01, 100 << 20)
    b.system(0, 10.0)
    data = HtmlReport.from_analysis(analyze(load(b.write(tmp_path / "run"))))
    assert not {"resources", "memory"} & set(data.figures), data.figures
    # two readings are a line: charted
    b.resources(20, 0.02, 101 << 20)
    b.system(20, 12.0)
    data = HtmlReport.from_analysis(analyze(load(b.write(tmp_path / "two"))))
    assert {"resources", "memory"} <= set(data.figures), data.figures


def test_a_growing_prefix_says_how_many_steps_off_the_host_s_speed_were_scaled_in_its_fit():
    from probe.reports.host_ops import host_op_lines
    from probe.reports.torch_html import _prefix_html

    prefix = {"op": "aten::bmm", "shape": "[4,T,32]", "first_length": 16, "steps": 59,
              "runs": 3, "per_step_us": 450.0, "per_token_us": 18.0, "speedup": 1.94,
              "rescaled_steps": 32}  # fmt: skip
    [line] = [x for x in host_op_lines({"growing_prefix": prefix}) if "growing prefix" in x]
    assert line.endswith("; 32 step(s) the host ran off its usual speed scaled to it in the fit")
    assert "32 step(s) the host ran off its usual speed scaled to it" in str(_prefix_html(prefix))
    steady = {**prefix, "rescaled_steps": 0}
    [line] = [x for x in host_op_lines({"growing_prefix": steady}) if "growing prefix" in x]
    assert "usual speed" not in line and "usual speed" not in str(_prefix_html(steady))


def test_the_host_ops_say_what_the_profiler_s_cost_per_op_was_read_as_or_that_none_was():
    from probe.reports.host_ops import host_op_lines

    op = {"name": "aten::addmm", "self_share": 0.5, "calls": 10, "mean_ns": 5000.0, "dtype": ""}
    [read] = [x for x in host_op_lines({"ops": [op], "profiler_op_cost_ns": 1712.4}) if "self" in x]
    assert "1,712 ns as the trace's gaps read it" in read
    [none] = [x for x in host_op_lines({"ops": [op], "profiler_op_cost_ns": 0.0}) if "self" in x]
    assert "none taken off" in none
