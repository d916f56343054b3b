"""What meta.json says about the host, read cheaply at the run's start."""

from __future__ import annotations

import platform
import subprocess

import pytest

from probe.launcher import platform_name


def test_the_run_s_platform_reads_as_platform_platform_does(monkeypatch):
    processor = subprocess.run(["uname", "-p"], capture_output=True, text=True).stdout.strip()
    if processor not in ("", "unknown"):
        pytest.skip("platform.platform() names this host's processor; probe leaves it out")
    assert platform_name() == platform.platform()
    # no glibc (musl, another system): platform.platform() itself
    monkeypatch.setattr("os.confstr", lambda name: None)
    monkeypatch.setattr(platform, "platform", lambda: "Other-1.0")
    assert platform_name() == "Other-1.0"
