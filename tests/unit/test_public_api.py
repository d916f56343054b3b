"""The public surface is explicit: pin it so a change to it is a decision."""

import probe
import probe.analyzers as analyzers
import probe.reports as reports
import probe.rundir
import probe.samplers


def test_probe_exports():
    assert sorted(probe.__all__) == sorted(
        [
            "ProbeError",
            "Span",
            "__version__",
            "current_request_id",
            "log_spans",
            "request",
            "span",
            "stage",
        ]
    )


def test_subpackage_exports():
    assert sorted(probe.rundir.__all__) == sorted(
        [
            "COLUMNS",
            "SCHEMA_NAME",
            "SCHEMA_VERSION",
            "TABLES",
            "Run",
            "compact",
            "load",
            "read_meta",
        ]
    )
    assert "StackSampler" in probe.samplers.__all__
    assert analyzers.__all__ and reports.__all__
    for module in (probe, probe.rundir, probe.samplers, analyzers, reports):
        for name in module.__all__:
            assert getattr(module, name) is not None


def test_importing_probe_stays_light():
    import subprocess
    import sys

    code = (
        "import sys, probe; heavy = [m for m in ('pandas', 'pyarrow', 'nvtx', 'numpy',"
        " 'plotly', 'psutil', 'click') if m in sys.modules]; print(heavy)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True).stdout
    assert out.strip() == "[]"


def test_the_span_api_loads_on_its_first_use_and_is_the_spans_modules_own():
    # probe's helper processes import probe.* without the span API (~15 ms of CPU)
    import subprocess
    import sys

    code = (
        "import sys, probe; before = 'probe.spans' in sys.modules\n"
        "from probe import span\n"
        "import probe.spans as spans\n"
        "print(before, probe.stage is spans.stage, span is spans.span, 'stage' in dir(probe))\n"
        "try:\n    probe.not_an_api\nexcept AttributeError as e:\n    print(e)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.stdout.splitlines() == [
        "False True True True",
        "module 'probe' has no attribute 'not_an_api'",
    ], done.stderr


def test_the_in_process_watchdog_keeps_pandas_out_of_the_service(tmp_path):
    # probe.watchdog runs inside the watched service: its detector is numpy-only and its
    # report (written by stop()) pandas-free, so the service's imports stay its own
    import subprocess
    import sys

    code = f"""
import sys, time
import probe.watchdog
dog = probe.watchdog.start(interval=0.02, warmup=0, window=3, out={str(tmp_path)!r})
time.sleep(0.3)
probe.watchdog.stop()
print([m for m in ("pandas", "pyarrow") if m in sys.modules])
"""
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"
    assert (tmp_path / "leak.json").is_file() and (tmp_path / "leak.html").is_file()
