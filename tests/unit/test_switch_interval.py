"""The GIL switch interval follows the target's own contention (``probe.samplers.gil``)."""

from __future__ import annotations

from probe.samplers.gil import SwitchInterval, SwitchSettings

WINDOW = SwitchSettings().window_ticks


def governed(own_s: float = 0.005) -> tuple[SwitchInterval, list[float]]:
    settings: list[float] = []
    switch = SwitchInterval(0.0001, own_s, set_interval=settings.append)
    switch.start()
    return switch, settings


def windows(switch: SwitchInterval, n: int, contended: bool) -> None:
    for _ in range(n * WINDOW):
        switch.tick(contended)


def test_a_service_whose_threads_never_contend_keeps_the_short_interval():
    switch, settings = governed()
    windows(switch, 20, contended=False)
    assert settings == [0.0001] and switch.changes == 0
    assert switch.figures()["share_contended"] == 0.0


def test_contention_lengthens_the_interval_and_is_measured_again_ever_less_often():
    switch, settings = governed()
    windows(switch, 1, contended=True)
    assert settings[-1] == 0.001  # contended: 1 ms, not the target's 5 ms
    windows(switch, 4, contended=True)  # the first dwell: 4 windows
    assert settings[-1] == 0.0001  # short again, to measure
    windows(switch, 1, contended=True)  # still contended: 8 windows this time
    windows(switch, 7, contended=True)
    assert settings[-1] == 0.001
    windows(switch, 1, contended=True)
    assert settings[-1] == 0.0001
    assert switch.figures()["share_contended"] > 0.8


def test_contention_that_ends_returns_the_short_interval_and_its_first_dwell():
    switch, settings = governed()
    windows(switch, 5, contended=True)  # contended for one dwell, then measured
    windows(switch, 1, contended=False)  # calm: stays short
    assert settings[-1] == 0.0001
    windows(switch, 1, contended=True)
    windows(switch, 4, contended=True)  # the dwell is back to 4 windows
    assert settings[-1] == 0.0001


def test_the_contended_interval_never_exceeds_the_target_s_own():
    switch, settings = governed(own_s=0.0005)
    windows(switch, 1, contended=True)
    assert settings[-1] == 0.0005
