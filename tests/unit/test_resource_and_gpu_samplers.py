"""Resource sampler on a fake process table; GPU sampler on a fake NVML."""

from __future__ import annotations

import math
from contextlib import nullcontext
from types import SimpleNamespace as NS

import psutil

from probe.samplers.gpu import GpuSampler
from probe.samplers.resources import (
    HELPER_ENV,
    ResourceSampler,
    host_cpu_jiffies,
    host_times_from_jiffies,
)


class FakeProc:
    def __init__(self, pid, ppid=1, rss=100, children=(), gone=False, env=None):
        self.pid, self._ppid, self.rss, self._children, self.gone = (
            pid,
            ppid,
            rss,
            list(children),
            gone,
        )
        self.user = 1.0
        self.env = env or {"PATH": "/usr/bin"}

    def environ(self):
        self._check()
        return self.env

    def _check(self):
        if self.gone:
            raise psutil.NoSuchProcess(self.pid)

    def oneshot(self):
        return nullcontext()

    def cpu_times(self):
        self._check()
        return NS(user=self.user, system=0.5, children_user=1.25, children_system=0.25)

    def memory_info(self):
        return NS(rss=self.rss)

    def memory_full_info(self):
        return NS(uss=self.rss // 2)

    def io_counters(self):
        return NS(read_bytes=10, write_bytes=20)

    def num_ctx_switches(self):
        return NS(voluntary=3, involuntary=4)

    def num_threads(self):
        return 2

    def threads(self):
        return [
            NS(id=self.pid, user_time=0.1, system_time=0.0),
            NS(id=self.pid + 1, user_time=0.2, system_time=0.1),
        ]

    def ppid(self):
        return self._ppid

    def num_fds(self):
        return 7

    def open_files(self):
        return [1, 2]

    def children(self, recursive=True):
        return self._children


class FakeHost:
    """Two CPUs' counters (s) that move 0.42 busy of every second per reading."""

    def __init__(self, busy_per_read=(0.84, 1.16)):
        self._reads = 0
        self._busy, self._idle = busy_per_read

    def cpu_times(self):
        n = self._reads
        self._reads += 1
        return NS(
            user=self._busy * n * 0.75,
            nice=0.0,
            system=self._busy * n * 0.25,
            idle=self._idle * n * 0.9,
            iowait=self._idle * n * 0.1,
            guest=self._busy * n * 0.5,  # inside user already: counted once
            _fields=("user", "nice", "system", "idle", "iowait", "guest"),
        )

    def virtual_memory(self):
        return NS(available=1 << 30)

    def net_io_counters(self):
        return NS(bytes_sent=5, bytes_recv=6)


def test_process_tree_rows_include_children_and_skip_vanished_ones():
    child = FakeProc(11, ppid=10, rss=50)
    root = FakeProc(10, rss=300, children=[child])
    procs = {10: root, 11: child}
    clock = iter(range(0, 10**12, 100_000_000)).__next__
    s = ResourceSampler(
        10,
        clock=clock,
        process=procs.__getitem__,
        descendants=lambda pid: [c.pid for c in procs[pid].children()],
        host=FakeHost(),
        sockets=lambda pid: 3,
        slow_every=2,
        own_cpu=lambda: 0.25,
    )
    s.sample()  # slow tick: finds the child, reads USS/fds/sockets
    child.gone = True
    s.sample()
    out = s.drain()
    rows = out["resources"]
    assert [(r[1], r[3]) for r in rows] == [(10, True), (11, False), (10, True)]
    first = rows[0]
    assert first[6] == 300 and first[7] == 150 and first[13] == 7 and first[15] == 3
    assert first[16] == 1.5  # the children it waited for: user and system
    assert math.isnan(rows[2][7])  # USS only on slow ticks
    assert {r[2] for r in out["os_threads"]} == {10, 11, 12}
    assert out["system"][0][1:] == (42.0, 1 << 30, 5, 6, 0.25)
    assert s.peak_rss == 300
    assert s.tree_pids() == [10]


def test_a_reading_is_stamped_once_its_memory_was_read_not_when_its_tick_began():
    """The sidecar held back between its clock and its reads (a busy host) stamped a
    reading of the target's teardown inside its last request (leaky_cache, CI)."""
    now = [1_000]

    class SlowToRead(FakeProc):
        def memory_info(self):
            now[0] += 40_000_000  # 40 ms held back before the state is read
            return super().memory_info()

    root = SlowToRead(10, rss=300)
    s = ResourceSampler(
        10, clock=lambda: now[0], process={10: root}.__getitem__, descendants=lambda pid: [],
        host=FakeHost(), sockets=lambda pid: 3, own_cpu=lambda: 0.25,
    )  # fmt: skip
    s.sample()
    out = s.drain()
    [row] = out["resources"]
    assert row[0] == 40_001_000  # not the 1,000 the tick began at
    assert {t[0] for t in out["os_threads"]} == {40_001_000}


def test_host_cpu_is_unknown_where_the_kernel_s_counters_did_not_move():
    # psutil.cpu_percent read 0.0 there: an idle host beside three CPU-bound processes
    s = ResourceSampler(
        10, process=lambda pid: FakeProc(pid), host=FakeHost((0.0, 0.0)), sockets=lambda p: 0
    )
    s.sample()
    (row,) = s.drain()["system"]
    assert math.isnan(row[1])


def test_host_cpu_is_the_busy_share_since_the_last_reading():
    s = ResourceSampler(10, process=lambda pid: FakeProc(pid), host=FakeHost((1.5, 0.5)))
    s.sample()
    s.sample()
    assert [row[1] for row in s.drain()["system"]] == [75.0, 75.0]


class ReadHost(FakeHost):
    """A host whose CPU counters (busy s, idle s) are read in the order given."""

    def __init__(self, *readings):
        super().__init__()
        self._readings = list(readings)

    def cpu_times(self):
        busy, idle = self._readings.pop(0)
        return NS(
            user=busy, nice=0.0, system=0.0, idle=idle, _fields=("user", "nice", "system", "idle")
        )


def test_a_sidecar_a_busy_host_held_back_reads_its_first_interval_from_its_spawn():
    # probe run read the counters as it started the sidecar; the sidecar, niced beside a
    # busy loop, built its sampler 1.5 s of busy host later and read 20 ms after that:
    # from its own baseline that reading held ~no tick of the run; from the spawn, 75%
    spawn = NS(user=0.0, nice=0.0, system=0.0, idle=0.0, _fields=("user", "nice", "system", "idle"))
    late = ReadHost((1.5, 0.5), (1.5, 0.52))
    s = ResourceSampler(10, process=lambda pid: FakeProc(pid), host=late, sockets=lambda p: 0)
    s.sample()
    assert s.drain()["system"][0][1] == 0.0
    held = ReadHost((1.5, 0.52))
    s = ResourceSampler(
        10, process=lambda pid: FakeProc(pid), host=held, sockets=lambda p: 0, host_since=spawn
    )
    s.sample()
    assert s.drain()["system"][0][1] == 74.3


def test_the_launcher_s_reading_of_the_host_s_counters_is_psutil_s(tmp_path):
    ours = host_times_from_jiffies(host_cpu_jiffies() or "")
    theirs = psutil.cpu_times()
    assert ours._fields == theirs._fields
    for field in theirs._fields:  # read a moment apart: within a second of each other
        assert abs(getattr(ours, field) - getattr(theirs, field)) < 1.0 * psutil.cpu_count()
    assert host_cpu_jiffies(str(tmp_path / "absent")) is None
    (tmp_path / "stat").write_text("intr 1 2 3\n")
    assert host_cpu_jiffies(str(tmp_path / "stat")) is None
    assert host_times_from_jiffies("1,2") is None


def test_probe_s_own_helper_processes_are_not_the_target_s():
    # probe run --load's driver is a child of the process the target runs in
    worker = FakeProc(11, ppid=10)
    driver = FakeProc(12, ppid=10, env={HELPER_ENV: "load"})
    root = FakeProc(10, children=[worker, driver])
    procs = {10: root, 11: worker, 12: driver}
    s = ResourceSampler(
        10, clock=iter(range(0, 10**12, 10**8)).__next__, process=procs.__getitem__,
        host=FakeHost(), sockets=lambda pid: 0,
        descendants=lambda pid: [c.pid for c in root.children()],
    )  # fmt: skip
    s.sample()
    s.sample()
    assert {r[1] for r in s.drain()["resources"]} == {10, 11}
    assert s.tree_pids() == [10, 11]


def test_sampling_from_outside_records_the_sampler_s_own_cpu_and_from_inside_does_not():
    import os

    spent = iter([1.5, 2.0])
    outside = ResourceSampler(
        10, process=lambda pid: FakeProc(pid), host=FakeHost(), own_cpu=lambda: next(spent),
        descendants=lambda pid: [],
    )  # fmt: skip
    outside.sample()
    outside.sample()
    assert [row[5] for row in outside.drain()["system"]] == [1.5, 2.0]
    inside = ResourceSampler(
        os.getpid(), process=lambda pid: FakeProc(pid), host=FakeHost(), own_cpu=lambda: 9.0,
        descendants=lambda pid: [],
    )  # fmt: skip
    inside.sample()  # its CPU is the target's own, counted in the process's rows
    assert math.isnan(inside.drain()["system"][0][5])


def test_a_process_gone_before_the_first_reading_leaves_an_empty_tree_not_an_error():
    # the sidecar can start after `probe run` was killed: it must still finish the run
    import psutil

    def gone(pid):
        raise psutil.NoSuchProcess(pid)

    sampler = ResourceSampler(999_999, process=gone, sockets=lambda pid: None)
    sampler.sample()
    rows = sampler.drain()
    assert rows["resources"] == [] and sampler.tree_pids() == []


def test_no_nvml_is_recorded_as_absent_and_sampling_is_inert():
    class Missing:
        def nvmlInit(self):
            raise OSError("NVML Shared Library Not Found")

    g = GpuSampler(nvml=Missing())
    status = g.start()
    assert status["available"] is False and "Library Not Found" in status["reason"]
    g.sample()
    assert g.drain() == {"gpu": [], "gpu_processes": []}
    g.close()


class FakeNvml:
    NVML_CLOCK_SM = 1
    NVML_PCIE_UTIL_RX_BYTES = 0
    NVML_PCIE_UTIL_TX_BYTES = 1

    def __init__(self, count=1, failing=()):
        self.count, self.failing, self.shut = count, set(failing), False

    def nvmlInit(self):
        pass

    def nvmlShutdown(self):
        self.shut = True

    def nvmlDeviceGetCount(self):
        return self.count

    def nvmlDeviceGetHandleByIndex(self, i):
        return f"h{i}"

    def nvmlDeviceGetName(self, h):
        return b"Fake A100"

    def nvmlDeviceGetUUID(self, h):
        return "GPU-" + h

    def nvmlSystemGetDriverVersion(self):
        return "550.1"

    def nvmlDeviceGetMemoryInfo(self, h):
        if "mem" in self.failing:
            raise RuntimeError("NVML_ERROR_UNKNOWN")
        return NS(total=80 << 30, used=10 << 30)

    def nvmlDeviceGetUtilizationRates(self, h):
        if "util" in self.failing:
            raise RuntimeError("NVML_ERROR_GPU_IS_LOST")
        return NS(gpu=97, memory=60)

    def nvmlDeviceGetPowerUsage(self, h):
        if "power" in self.failing:
            raise RuntimeError("NVML_ERROR_NOT_SUPPORTED")
        return 250_000

    def nvmlDeviceGetClockInfo(self, h, which):
        return 1410

    def nvmlDeviceGetPcieThroughput(self, h, which):
        return 1000 + which

    def nvmlDeviceGetComputeRunningProcesses(self, h):
        return [NS(pid=10, usedGpuMemory=2 << 30), NS(pid=999, usedGpuMemory=1)]


def test_gpu_readings_and_our_processes_only():
    nv = FakeNvml(count=2)
    g = GpuSampler(nvml=nv, clock=lambda: 5, pids=lambda: [10])
    status = g.start()
    assert status["available"] and [d["name"] for d in status["devices"]] == ["Fake A100"] * 2
    g.sample()
    out = g.drain()
    assert out["gpu"][0] == (
        5,
        0,
        97.0,
        60.0,
        float(10 << 30),
        float(80 << 30),
        250.0,
        1410.0,
        1000.0,
        1001.0,
    )
    assert out["gpu_processes"] == [(5, 0, 10, float(2 << 30)), (5, 1, 10, float(2 << 30))]
    g.close()
    assert nv.shut


def test_unsupported_reading_is_empty_and_a_lost_gpu_is_dropped():
    nv = FakeNvml(failing={"power"})
    g = GpuSampler(nvml=nv, clock=lambda: 5)
    g.start()
    g.sample()
    row = g.drain()["gpu"][0]
    assert math.isnan(row[6]) and row[2] == 97.0
    nv.failing = {"util", "mem"}
    for _ in range(25):
        g.sample()
    assert g.drain()["gpu"] == []
    assert g.notes and "dropped" in g.notes[0]
