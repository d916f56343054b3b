"""probe load's parts on fakes: the mix and spec files, the loopback rule, and the figures
from records (warm-up left out, late sends warned of, percentiles within the histogram's
bound)."""

from __future__ import annotations

import math

import pytest

from probe.errors import ProbeError
from probe.load.driver import LATE_NS, Record
from probe.load.figures import LoadFigures, figures
from probe.load.mix import read_mix, read_spec
from probe.load.target import parse_target

MS = 1_000_000


def write(tmp_path, text: str, name: str = "mix.toml"):
    path = tmp_path / name
    path.write_text(text)
    return path


def test_a_mix_file_gives_weighted_requests_with_json_and_file_bodies(tmp_path):
    (tmp_path / "payload.bin").write_bytes(b"\x00\x01")
    mix = read_mix(
        write(
            tmp_path,
            """
            [[request]]
            method = "post"
            path = "/predict"
            json = { text = "hi" }
            weight = 3
            [[request]]
            path = "/upload"
            method = "PUT"
            body_file = "payload.bin"
            headers = { X-Trace = "1" }
            name = "upload"
            """,
        )
    )
    predict, upload = mix.requests
    assert predict.method == "POST" and predict.body == b'{"text": "hi"}' and predict.weight == 3
    assert ("content-type", "application/json") in predict.headers
    assert predict.label == "POST /predict" and upload.label == "upload"
    assert upload.body == b"\x00\x01" and ("x-trace", "1") in upload.headers
    import random

    rng = random.Random(1)
    picks = [mix.pick(rng).label for _ in range(4000)]
    assert 0.7 < picks.count("POST /predict") / len(picks) < 0.8  # weight 3 of 4


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("", "no [[request]] entries"),
        ("[[request]]\nmethod = 'GET'\n", "path must be a string starting with '/'"),
        ("[[request]]\npath = '/a'\nweight = 0\n", "weight must be a number above 0"),
        ("[[request]]\npath = '/a'\nbodyfile = 'x'\n", "unknown key(s) bodyfile"),
        ("[[request]]\npath = '/a'\nbody_file = 'missing.bin'\n", "missing.bin"),
        ("[[request\n", "not a request mix"),
    ],
)
def test_a_bad_mix_is_one_line_naming_the_file_and_entry(tmp_path, text, says):
    with pytest.raises(ProbeError, match="mix.toml") as e:
        read_mix(write(tmp_path, text))
    assert says in str(e.value) and "\n" not in str(e.value)


def test_a_spec_carries_where_and_how_hard_and_refuses_what_makes_no_sense(tmp_path):
    mix, settings = read_spec(
        write(
            tmp_path,
            'url = "http://127.0.0.1:9"\nrate = 50\nduration = 3\n[[request]]\npath = "/"\n',
        )
    )
    assert settings == {"url": "http://127.0.0.1:9", "rate": 50, "duration": 3}
    for top, says in [
        ("rate = 5\n", "no url"),
        ('url = "http://127.0.0.1:9"\nrate = 5\nconcurrency = 2\n', "not both"),
        ('url = "http://127.0.0.1:9"\nrate = inf\n', "finite number above 0"),
        ('url = "http://127.0.0.1:9"\nduration = "long"\n', "duration must be a number"),
        ('url = "http://127.0.0.1:9"\nthreads = 2\n', "unknown setting 'threads'"),
    ]:
        with pytest.raises(ProbeError, match=says):
            read_spec(write(tmp_path, top + '[[request]]\npath = "/"\n'))


def test_only_loopback_targets_unless_allowed():
    assert parse_target("http://localhost:8000/health").host in ("127.0.0.1", "::1")
    assert parse_target("127.0.0.1:8000").port == 8000
    with pytest.raises(ProbeError, match="not this host's loopback"):
        parse_target("http://10.20.30.40:80/")
    assert parse_target("http://10.20.30.40:80/", allow_remote=True).host == "10.20.30.40"
    with pytest.raises(ProbeError, match="only http://"):
        parse_target("https://127.0.0.1:8443/")


def record(n: int, latency_ms: float, *, late_ms: float = 0.0, status=200, warmup=False,
           label="GET /") -> Record:  # fmt: skip
    due = n * 10 * MS
    sent = due + int(late_ms * MS)
    return Record(label, f"L{n}", due, sent, due + int(latency_ms * MS), status,
                  "" if status else "refused", False, warmup)  # fmt: skip


def test_figures_leave_the_warm_up_out_and_count_errors_and_percentiles():
    records = [record(i, 500.0, warmup=True) for i in range(5)]
    records += [record(5 + i, float(i + 1)) for i in range(100)]  # 1..100 ms
    records += [record(200, 3.0, status=503), record(201, 0.0, status=0)]
    f = figures(records, mode="closed", duration_s=2.0)
    assert f.warmup_requests == 5 and f.total.sent == 102
    assert f.total.answered == 101 and f.total.errors == 2
    assert f.total.throughput_per_s == pytest.approx(101 / 2.0)
    # HdrHistogram at 3 significant digits: within 0.1% of the exact rank's value
    exact = sorted(r.latency_ns / MS for r in records if not r.warmup)
    for p in (50, 90, 99):
        rank = exact[math.ceil(p / 100 * len(exact)) - 1]
        assert f.total.latency_ms[f"p{p}"] == pytest.approx(rank, rel=0.001), p
    assert f.total.latency_ms["max"] == pytest.approx(100.0, rel=0.001)
    assert any("got no answer (first: refused)" in w for w in f.warnings)
    assert LoadFigures.from_dict(f.to_dict()) == f


def test_an_open_loop_warns_when_over_one_percent_of_sends_went_out_late():
    late = LATE_NS / MS + 1
    on_time = [record(i, 5.0) for i in range(100)]
    assert (
        figures(on_time + [record(100, 5.0, late_ms=late)], mode="open", duration_s=1).warnings
        == []
    )
    f = figures(on_time + [record(100 + i, 5.0, late_ms=late) for i in range(3)], mode="open",
                duration_s=1)  # fmt: skip
    assert f.late == 3 and "3 of 103 requests (2.9%) went out more than" in f.warnings[0]
