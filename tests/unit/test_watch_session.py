"""A watch from its options to its exit status, on fakes: the frozen config both entry
points build, the one loop (``Monitor.run``) and what ``probe watch`` adds to it."""

from __future__ import annotations

import math
import signal
import threading

import pytest

from probe.analyzers.leaks import DetectorSettings
from probe.errors import ProbeError
from probe.watchdog.config import EXIT_LEAK, WatchConfig
from probe.watchdog.monitor import Monitor
from probe.watchdog.session import run_watch
from probe.watchdog.target import WatchedProcess

FAST = DetectorSettings(interval_s=0.1, window_s=12.0, fast_window_s=6.0, warmup_s=2.0)


class FakeClock:
    """Time that moves only when the loop waits: ``stop.wait`` is patched to advance it."""

    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


class TimedStop(threading.Event):
    def __init__(self, clock: FakeClock) -> None:
        super().__init__()
        self.clock = clock
        self.waits: list[float] = []

    def wait(self, timeout: float | None = None) -> bool:
        self.waits.append(timeout or 0.0)
        self.clock.t += timeout or 0.0
        return self.is_set()


def leaking(rate: float = 2e6):
    return lambda t: 100e6 + rate * t


def monitor_over(memory, clock: FakeClock, settings: DetectorSettings = FAST, **kw) -> Monitor:
    return Monitor(lambda: memory(clock.t), settings, clock=clock, wall_clock=clock, **kw)


class FakeCommand(WatchedProcess):
    """A launched command that ends at ``ends_at`` with ``status``."""

    def __init__(self, clock: FakeClock, ends_at: float = math.inf, status: int = 0) -> None:
        super().__init__(pid=4242, name="svc", cmdline=["svc"], read_memory=lambda: None)
        self.clock, self.ends_at, self.status = clock, ends_at, status
        self.stopped = False
        self.forwarded: list[int] = []

    def exited(self) -> bool:
        return self.clock.t >= self.ends_at

    def forward(self, signum: int) -> bool:
        self.forwarded.append(signum)
        return True

    def stop(self, grace_s: float = 10.0) -> None:
        self.stopped = not self.exited()

    def exit_status(self) -> int | None:
        return 143 if self.stopped else self.status


# -- the config ---------------------------------------------------------------------------
def test_the_config_reads_durations_and_sizes_as_users_write_them():
    config = WatchConfig.build(interval="500ms", window="2m", warmup="0", limit="1.5GiB")
    d = config.detector
    assert (d.interval_s, d.window_s, d.warmup_s) == (0.5, 120.0, 0.0)
    assert config.limit_bytes == int(1.5 * 2**30)
    assert config.traced_start_s == 0.0  # auto traces from an alert, not the start
    assert WatchConfig.build(attribution="always").traced_start_s == math.inf


@pytest.mark.parametrize(
    ("option", "value", "says"),
    [
        ("interval", "0", "interval: must be a finite duration greater than 0"),
        ("interval", float("nan"), "interval: must be a finite duration"),
        ("window", "soon", "window: not a duration"),
        ("warmup", -1.0, "warmup: must be a finite duration"),
        ("limit", "lots", "limit: not a size"),
        ("limit", 0, "limit: must be greater than 0"),
        ("attribution", "sometimes", "attribution must be auto, always or off"),
        ("metric", "pss", "metric must be rss or uss"),
        ("metrics_port", 70000, "metrics port must be 0-65535"),
        ("duration", float("inf"), "duration: must be a finite duration"),
        ("window", "1s", r"the window \(1 s\) must hold 12 bins"),
    ],
)
def test_a_bad_setting_is_one_clear_error(option, value, says):
    with pytest.raises(ProbeError, match=says) as e:
        WatchConfig.build(**{option: value})
    assert e.value.exit_code == 2


def test_the_config_is_frozen():
    config = WatchConfig.build()
    with pytest.raises(AttributeError):
        config.fail_on_leak = True  # type: ignore[misc]


# -- the loop -----------------------------------------------------------------------------
def test_the_loop_reads_ten_times_a_second_at_first_then_every_interval():
    clock = FakeClock()
    slow = DetectorSettings(interval_s=1.0, window_s=120.0, fast_window_s=60.0, warmup_s=600.0)
    monitor = monitor_over(lambda t: 100e6, clock, slow)
    stop = TimedStop(clock)
    assert monitor.run(stop, until=lambda m: m.elapsed_s >= 40.0) == "until"
    early = [w for w, at in zip(stop.waits, range(len(stop.waits)), strict=True) if at < 290]
    assert set(round(w, 3) for w in early) == {0.1}
    assert round(stop.waits[-1], 3) == 1.0
    assert monitor.detector.readings == pytest.approx(300 + 10, abs=2)


def test_the_loop_ends_when_the_memory_cannot_be_read():
    clock = FakeClock()
    monitor = monitor_over(lambda t: 100e6 if t < 1.0 else None, clock)
    assert monitor.run(TimedStop(clock)) == "gone"
    assert monitor.elapsed_s == pytest.approx(1.0, abs=0.11)


def test_the_loop_skips_rather_than_bursts_after_falling_behind():
    clock = FakeClock()

    def suspended(t: float) -> float:
        if 0.45 < t < 0.55:
            clock.t += 30.0  # the host was suspended during this reading
        return 100e6

    monitor = monitor_over(suspended, clock)
    stop = TimedStop(clock)
    monitor.run(stop, until=lambda m: m.elapsed_s > 31.0)
    assert min(stop.waits) >= 0.0 and stop.waits.count(0.0) == 1


# -- probe watch around the loop ----------------------------------------------------------
def watch(config: WatchConfig, command: FakeCommand, memory, clock: FakeClock):
    said: list[str] = []
    monitor = monitor_over(memory, clock, config.detector, process={"pid": command.pid})
    code = run_watch(config, command, monitor, said.append, said.append, TimedStop(clock))
    return code, said, monitor


def test_fail_on_leak_stops_the_command_at_the_alert_and_exits_3():
    clock = FakeClock()
    config = WatchConfig(detector=FAST, fail_on_leak=True, status_every_s=None)
    command = FakeCommand(clock)
    code, said, monitor = watch(config, command, leaking(), clock)
    assert code == EXIT_LEAK and command.stopped
    assert monitor.alerted is not None and monitor.elapsed_s < 10.0
    assert sum(s.startswith("LEAK: memory grows") for s in said) == 1  # printed once


def watch_descriptors(config: WatchConfig, ends_at: float, per_s: float):
    """A command whose memory is flat while it opens ``per_s`` descriptors a second and
    closes none (tests/memory_corpus/services/fd_leak.py's truth: ~97 a second)."""
    clock = FakeClock()
    command = FakeCommand(clock, ends_at=ends_at)
    said: list[str] = []
    monitor = monitor_over(
        lambda t: 100e6, clock, process={"pid": command.pid},
        read_counts=lambda: {"threads": 3.0, "file descriptors": 40.0 + per_s * clock.t},
    )  # fmt: skip
    code = run_watch(config, command, monitor, said.append, said.append, TimedStop(clock))
    return code, said, monitor, command


def test_fail_on_leak_stops_the_command_when_descriptors_pile_up_and_exits_3():
    config = WatchConfig(detector=FAST, fail_on_leak=True, status_every_s=None)
    code, said, monitor, command = watch_descriptors(config, ends_at=60.0, per_s=100.0)
    assert code == EXIT_LEAK and command.stopped and monitor.elapsed_s < 60.0
    assert monitor.alerted is None  # the memory did not leak: the descriptors did
    assert sum(s.startswith("PILING UP: file descriptors") for s in said) == 1


def test_without_fail_on_leak_a_pile_is_said_and_the_command_s_status_comes_back():
    config = WatchConfig(detector=FAST, status_every_s=None)
    code, said, monitor, command = watch_descriptors(config, ends_at=25.0, per_s=100.0)
    assert code == 0 and not command.stopped and monitor.elapsed_s >= 25.0
    assert any(s.startswith("PILING UP: file descriptors") for s in said)


def test_flat_descriptors_and_memory_with_fail_on_leak_give_the_command_s_own_status():
    config = WatchConfig(detector=FAST, fail_on_leak=True, status_every_s=None)
    code, said, _, command = watch_descriptors(config, ends_at=25.0, per_s=0.0)
    assert code == 0 and not command.stopped
    assert not any("PILING UP" in s for s in said)


def test_a_command_that_ends_gives_its_own_exit_status_and_the_verdict():
    clock = FakeClock()
    config = WatchConfig(detector=FAST, status_every_s=None)
    command = FakeCommand(clock, ends_at=20.0, status=7)
    code, said, _ = watch(config, command, lambda t: 100e6 + (int(t * 10) % 5) * 1e5, clock)
    assert code == 7 and not command.stopped
    assert said[-1].startswith("no leak in pid 4242 over 20 s")


def test_a_leak_without_fail_on_leak_watches_on_until_the_command_ends():
    clock = FakeClock()
    config = WatchConfig(detector=FAST, status_every_s=None)
    code, said, monitor = watch(config, FakeCommand(clock, ends_at=25.0), leaking(), clock)
    assert code == 0 and monitor.elapsed_s >= 25.0
    assert sum(s.startswith("LEAK") for s in said) == 1  # alerted live, not again at the end


def test_duration_stops_the_watch_and_the_command_and_says_so():
    clock = FakeClock()
    config = WatchConfig(detector=FAST, duration_s=5.0, status_every_s=2.0)
    command = FakeCommand(clock)
    code, said, _ = watch(config, command, lambda t: 100e6, clock)
    assert command.stopped and code == 143
    assert "watched for 5 s (--duration): stopping" in said
    assert sum(s.startswith("pid 4242: ") for s in said) == 2  # status at 2 s and 4 s


def test_a_signal_is_passed_to_the_launched_command():
    clock = FakeClock()
    config = WatchConfig(detector=FAST, status_every_s=None)
    command = FakeCommand(clock, ends_at=3.0)

    raised: list[float] = []

    def memory(t: float) -> float:
        if t >= 1.0 and not raised:
            raised.append(t)
            signal.raise_signal(signal.SIGINT)  # as a user's Ctrl-C
        return 100e6

    code, _, _ = watch(config, command, memory, clock)
    assert command.forwarded == [signal.SIGINT] and code == 0


def test_the_report_is_written_on_the_alert_and_at_the_end(tmp_path):
    clock = FakeClock()
    config = WatchConfig(detector=FAST, out=tmp_path, status_every_s=None)
    code, said, _ = watch(config, FakeCommand(clock, ends_at=15.0), leaking(), clock)
    assert (tmp_path / "leak.json").exists() and (tmp_path / "leak.html").exists()
    assert said[-1] == f"report {tmp_path / 'leak.html'}"


def test_a_watched_command_s_secrets_never_reach_what_the_watch_writes_or_sends():
    # the process record goes into leak.json, leak.html, the alert line and the webhook
    # body: one redacted copy of the command line feeds them all
    import sys

    from probe.watchdog.alerts import alert_payload
    from probe.watchdog.target import launch

    secrets = ["hunter2", "sk-live-abc123", "pw123"]
    argv = [
        sys.executable, "-c", "import time; time.sleep(30)",
        "--password", "hunter2", "--token=sk-live-abc123", "https://user:pw123@db.example/x",
    ]  # fmt: skip
    watched = launch(argv, WatchConfig.build(attribution="off"))
    try:
        verdict = {
            "detected": True, "slope_bytes_per_s": 1e6, "slope_interval_bytes_per_s": [1, 2],
            "confidence": 1.0, "level_bytes": 1e8, "onset_s": 0.0, "seconds_to_limit": None,
            "limit_bytes": None, "test": "live", "reason": "", "top_sites": [],
            "growing_types": [],
        }  # fmt: skip
        written = repr(watched.describe("rss")) + repr(
            alert_payload(verdict, watched.describe("rss"))
        )
    finally:
        watched.stop(grace_s=1.0)
    assert not [s for s in secrets if s in written], written
    assert "--password" in written and "db.example" in written
