"""The HTML report in a real browser: Debian's Chromium, headless, driven by playwright.

`.ci/run` installs Chromium (apt) and playwright (the `test` extra). Where Chromium is
missing outside CI the tests skip; in CI (CI=true) they fail instead.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess

import pytest

from .conftest import REPO, probe_cmd, write_script

pytestmark = pytest.mark.integration

XSS_SCRIPT = """
import probe

@probe.stage('<img src=x onerror="window.__xss=1">')
def evil(n):
    return sum(i * i for i in range(n))

for i in range(30):
    with probe.request(id='<script>window.__xss=2</script>'):
        evil(20000)
"""


def _browser_or_skip() -> str:
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        exe = None
    if exe is None:
        if os.environ.get("CI"):
            pytest.fail("Chromium or playwright missing: .ci/run installs both")
        pytest.skip("Chromium or playwright not installed (apt-get install chromium)")
    return exe


@pytest.fixture
def browser():
    exe = _browser_or_skip()
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(
            executable_path=exe,
            args=["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"],
        )
        try:
            yield b
        finally:
            b.close()


def open_report(browser, path, screenshot):
    """Load a report over file://; returns (page, console errors, non-file requests)."""
    page = browser.new_page(viewport={"width": 1200, "height": 900})
    errors: list[str] = []
    outside: list[str] = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.on("dialog", lambda d: (errors.append(f"dialog: {d.message}"), d.dismiss()))
    page.on(
        "request",
        lambda r: None if r.url.startswith(("file:", "data:", "blob:")) else outside.append(r.url),
    )
    page.goto(path.resolve().as_uri(), wait_until="load")
    page.wait_for_function(
        "document.querySelectorAll('.fig').length > 0 && [...document.querySelectorAll('.fig')]"
        ".every(f => f.querySelector('svg.main-svg'))",
        timeout=30_000,
    )
    page.screenshot(path=str(screenshot), full_page=True)
    return page, errors, outside


def test_sample_report_renders_every_chart_offline_without_errors(tmp_path, run_probe, browser):
    r = run_probe(
        REPO / "sample_services" / "multimodal_pipeline.py", "--requests", "40", timeout=180
    )
    assert r.returncode == 0, r.stderr
    report = r.run_dir / "report.html"
    page, errors, outside = open_report(browser, report, tmp_path / "report.png")
    assert errors == [] and outside == []
    figs = page.eval_on_selector_all(
        ".fig", "els => els.map(e => [e.id, e.querySelectorAll('svg.main-svg').length > 0])"
    )
    assert {f for f, ok in figs if ok} == {
        "fig-amdahl",
        "fig-stages",
        "fig-timeline",
        "fig-flame",
        "fig-resources",
        "fig-memory",
    }
    primary = json.loads((r.run_dir / "diagnosis.json").read_text())["primary"]
    verdict = page.inner_text("#verdict")
    assert f"{primary['kind']}/{primary['subkind']} in {primary['stage']}" in verdict
    assert page.locator(".rec").count() >= 2  # concurrent_io and lazy_init
    # the flame graph switches between on-CPU and waiting
    page.click("#fig-flame .updatemenu-button >> nth=1")
    visible = page.evaluate("document.getElementById('fig-flame').data.map(t => t.visible)")
    assert visible == [False, True]
    assert (tmp_path / "report.png").stat().st_size > 10_000


def test_service_strings_never_run_as_code(tmp_path, run_probe, browser):
    script = write_script(tmp_path, XSS_SCRIPT)
    r = run_probe(script)
    assert r.returncode == 0, r.stderr
    page, errors, outside = open_report(browser, r.run_dir / "report.html", tmp_path / "xss.png")
    assert page.evaluate("window.__xss") is None
    assert errors == [] and outside == []
    assert '<img src=x onerror="window.__xss=1">' in page.inner_text("#verdict")  # as text
    assert page.locator("img").count() == 0


def test_the_page_of_a_run_with_nothing_to_judge_reads_without_charts_or_errors(
    tmp_path, run_probe, browser
):
    # told without the analysis stack (reports/empty_run.py): no chart, no plotly.js
    script = write_script(tmp_path, "import sys\nsys.exit(3)\n")
    r = run_probe(script)
    assert r.returncode == 3, r.stderr
    page = browser.new_page(viewport={"width": 1200, "height": 900})
    errors: list[str] = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto((r.run_dir / "report.html").resolve().as_uri(), wait_until="load")
    assert errors == []
    assert "Nothing to judge" in page.inner_text("#verdict")
    body = page.inner_text("main")
    assert "too few memory readings" in body and "exit status 3" in body
    assert page.locator(".fig").count() == 0


def test_probe_report_verb_writes_each_format(tmp_path, run_probe):
    script = write_script(tmp_path, XSS_SCRIPT)
    r = run_probe("--no-report", script)
    assert not (r.run_dir / "report.html").exists()

    def report(*args):
        return subprocess.run(
            probe_cmd("report", r.run_dir, *args), capture_output=True, text=True, timeout=120
        )

    html = report("-o", tmp_path / "r.html")
    assert html.returncode == 0, html.stderr
    assert (tmp_path / "r.html").read_text().startswith("<!DOCTYPE html>")
    assert "CPU-bound" in report("--format", "text").stdout
    assert '"schema": "probe.diagnosis/1"' in report("--format", "json").stdout
    bad = report("-o", tmp_path / "no" / "dir.html")
    assert bad.returncode == 1 and bad.stderr.count("\n") == 1 and "cannot write" in bad.stderr


LEAKER = """
import time
kept = []
end = time.monotonic() + 15
while time.monotonic() < end:
    kept.append(bytearray(100_000))  # ~3 MB/s, never freed
    time.sleep(0.03)
"""


def test_the_leak_report_of_probe_watch_draws_its_trend_and_sites(tmp_path, browser):
    script = write_script(tmp_path, LEAKER, name="leak_<img src=x onerror=alert(1)>.py")
    out = tmp_path / "watch"
    result = subprocess.run(
        # judged live (warm-up, the half window before the first 6-s window, that window
        # and its confirmation: by ~11 s of its 15): traced from the start, its growth
        # judged only at exit would be undetermined by design
        probe_cmd("watch", "--interval", "0.05", "--warmup", "1s", "--window", "6s",
                  "--attribution", "always", "-q", "--out", out, "--", "python", script),
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    page, errors, outside = open_report(browser, out / "leak.html", tmp_path / "leak.png")
    assert errors == [] and outside == []
    assert page.locator("#fig-trend svg.main-svg").count() > 0
    assert "Leak: memory grows" in page.inner_text("#verdict")
    assert "leak_<img src=x onerror=alert(1)>.py:6" in page.inner_text("#sites")  # as text
    assert page.locator("img").count() == 0
    names = page.evaluate("document.getElementById('fig-trend').data.map(t => t.name)")
    assert "floor (min)" in names and any(n.startswith("growth ") for n in names)


def test_the_leak_report_draws_the_request_rate_beside_the_memory_on_a_real_series(
    tmp_path, browser
):
    # watch_ramp's store as `probe watch` recorded it: RSS bins and the agent's counts
    from probe.analyzers.leaks import LeakVerdict
    from probe.reports.leak import render_leak_html

    recorded = json.loads((REPO / "tests/memory_corpus/watch/watch_ramp-store.json").read_text())
    verdict = LeakVerdict(state="no_leak", reason="no new high").to_dict()
    path = tmp_path / "leak.html"
    path.write_text(render_leak_html({"verdict": verdict, "series": recorded["series"]}))
    page, errors, outside = open_report(browser, path, tmp_path / "leak.png")
    assert errors == [] and outside == []
    traces = page.evaluate(
        "document.getElementById('fig-trend').data.map(t => [t.name, t.yaxis || 'y'])"
    )
    assert ["requests/s", "y2"] in traces and ["floor (min)", "y"] in traces
    # the staircase read back from the drawn axis: 20 requests a second rising to 90
    ticks = [t.strip() for t in page.locator("#fig-trend .y2tick").all_text_contents()]
    assert "0" in ticks and any(int(t) >= 80 for t in ticks if t.isdigit()), ticks


def test_a_trace_s_report_renders_its_charts_offline_and_keeps_its_names_as_text(tmp_path, browser):
    from tests.unit.test_kineto_reader import write_trace
    from tests.unit.test_trace_diagnosis import host_bound_trace

    events = host_bound_trace()
    events[0] = {**events[0], "name": '<img src=x onerror="window.__xss=3">'}
    trace = write_trace(tmp_path / "w0.pt.trace.json.gz", events, gz=True)
    done = subprocess.run(probe_cmd("report", trace), capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    report = tmp_path / "w0.pt.trace.report.html"
    assert f"written to {report}" in done.stdout
    page, errors, outside = open_report(browser, report, tmp_path / "trace.png")
    assert errors == [] and outside == [] and page.evaluate("window.__xss") is None
    figs = page.eval_on_selector_all(
        ".fig", "els => els.map(e => [e.id, e.querySelectorAll('svg.main-svg').length > 0])"
    )
    assert {f for f, ok in figs if ok} == {"fig-kernels", "fig-idle", "fig-stages"}
    assert "gpu/launch_bound" in page.inner_text("#verdict")
    assert page.locator("img").count() == 0


def test_a_run_s_torch_windows_get_a_section_with_their_files_linked_and_gpu_charts(
    tmp_path, run_probe, browser
):
    pytest.importorskip("torch")
    from tests.unit.test_kineto_reader import write_trace
    from tests.unit.test_trace_diagnosis import host_bound_trace

    r = run_probe(REPO / "tests" / "torch_corpus" / "decoder.py", "--requests", "150", timeout=300)
    assert r.returncode == 0, r.stderr
    report = r.run_dir / "report.html"
    page, errors, outside = open_report(browser, report, tmp_path / "cpu.png")
    assert errors == [] and outside == []
    section = page.inner_text("body").split("PyTorch ops", 1)[1]
    assert "aten::addmm" in section and "float32" in section and "Growing prefix" in section
    href = page.get_attribute("a[href$='window-1.json']", "href")
    assert (r.run_dir / href).is_file()  # the link opens the window's own file
    figs = set(page.eval_on_selector_all(".fig", "els => els.map(e => e.id)"))
    assert not {f for f in figs if f.startswith("fig-torch")}  # no GPU work: no GPU charts

    # the same run, its window replaced by a declared GPU scenario (a host-bound step):
    # the window's GPU charts join the run's, its names stay text
    events = host_bound_trace()
    events[1] = {**events[1], "name": '<img src=x onerror="window.__xss=4">'}
    write_trace(r.run_dir / href, events)
    done = subprocess.run(
        probe_cmd("report", r.run_dir), capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    page, errors, outside = open_report(browser, report, tmp_path / "gpu.png")
    assert errors == [] and outside == [] and page.evaluate("window.__xss") is None
    figs = page.eval_on_selector_all(
        ".fig", "els => els.map(e => [e.id, e.querySelectorAll('svg.main-svg').length > 0])"
    )
    assert {f for f, ok in figs if ok} >= {"fig-torch_kernels", "fig-torch_idle", "fig-torch_spans"}
    section = page.inner_text("body").split("PyTorch ops", 1)[1]
    assert "Host-bound" in section
    assert '<img src=x onerror="window.__xss=4">' in section  # an op's name, as text
    assert page.locator("img").count() == 0
    # the verdict: the window's spans with their host and GPU time a call (the step's
    # 20 launches of 5 us each: 0.100 ms of GPU work in its 1.1-ms span)
    verdict = subprocess.run(probe_cmd("analyze", r.run_dir), capture_output=True, text=True)
    assert verdict.returncode == 0, verdict.stderr
    [step] = [line for line in verdict.stdout.splitlines() if "ProfilerStep#1" in line]
    assert "host    1.100 ms" in step and "GPU    0.100 ms" in step
