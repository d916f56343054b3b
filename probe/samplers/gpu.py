"""The GPU sampler (NVML through pynvml): utilization, memory, power, clocks, PCIe.

No driver, no GPU, or any NVML error at start is a normal case: ``start()`` returns a
status saying why the GPU is absent (written once to ``meta.json``) and sampling does
nothing. An NVML error on one reading leaves that value empty; a device that keeps
failing is dropped with a note. Nothing here raises into the target.

PCIe throughput (``nvmlDeviceGetPcieThroughput`` blocks ~20 ms while it measures) and
per-process memory are read every ``slow_every`` ticks.
"""

from __future__ import annotations

import ctypes
import sys
import time
from collections.abc import Callable
from typing import Any

__all__ = ["GpuSampler"]

_MAX_CONSECUTIVE_FAILURES = 20


def _load_nvml() -> Any:
    """pynvml, where NVIDIA's driver library loads. pynvml loads the library only in
    ``nvmlInit``, after an import of ~13 ms of CPU, which the sidecar would pay beside
    the target on every run of a host without the driver."""
    if sys.platform.startswith("linux"):
        try:
            ctypes.CDLL("libnvidia-ml.so.1")  # the name pynvml loads on Linux
        except OSError:
            raise OSError("NVML Shared Library Not Found") from None  # pynvml's words
    import pynvml

    return pynvml


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


class GpuSampler:
    """Samples every NVIDIA GPU NVML reports; inert when there is none."""

    def __init__(
        self,
        *,
        nvml: Any = None,
        clock: Callable[[], int] = time.perf_counter_ns,
        pids: Callable[[], list[int]] = list,
        slow_every: int = 10,
    ) -> None:
        self._nvml = nvml
        self._clock = clock
        self._pids = pids
        self._slow_every = max(1, slow_every)
        self._handles: list[tuple[int, Any]] = []
        self._failures: dict[int, int] = {}
        self._tick = 0
        self._rows: dict[str, list[tuple[Any, ...]]] = {"gpu": [], "gpu_processes": []}
        self.notes: list[str] = []
        self.active = False

    def start(self) -> dict[str, Any]:
        """Open NVML; returns the status for meta.json (never raises)."""
        try:
            nvml = self._nvml if self._nvml is not None else _load_nvml()
            self._nvml = nvml
            nvml.nvmlInit()
        except Exception as e:  # ImportError, NVMLError_LibraryNotFound, driver errors
            return {
                "available": False,
                "reason": f"NVML unavailable: {_text(e) or type(e).__name__}",
            }
        try:
            count = nvml.nvmlDeviceGetCount()
            devices = []
            for index in range(count):
                handle = nvml.nvmlDeviceGetHandleByIndex(index)
                mem = nvml.nvmlDeviceGetMemoryInfo(handle)
                devices.append(
                    {
                        "index": index,
                        "name": _text(nvml.nvmlDeviceGetName(handle)),
                        "uuid": _text(nvml.nvmlDeviceGetUUID(handle)),
                        "memory_total_bytes": int(mem.total),
                    }
                )
                self._handles.append((index, handle))
            driver = _text(nvml.nvmlSystemGetDriverVersion())
        except Exception as e:
            self._shutdown()
            self._handles = []
            return {"available": False, "reason": f"NVML error: {_text(e) or type(e).__name__}"}
        if not devices:
            self._shutdown()
            return {"available": False, "reason": "no GPU found by NVML", "driver": driver}
        self.active = True
        return {"available": True, "driver": driver, "devices": devices}

    def _read(self, fn: Callable[..., Any], *args: Any) -> Any:
        try:
            return fn(*args)
        except Exception:
            return None

    def sample(self) -> None:
        if not self.active:
            return
        nvml, now = self._nvml, self._clock()
        slow = self._tick % self._slow_every == 0
        self._tick += 1
        nan = float("nan")
        for index, handle in list(self._handles):
            util = self._read(nvml.nvmlDeviceGetUtilizationRates, handle)
            mem = self._read(nvml.nvmlDeviceGetMemoryInfo, handle)
            if util is None and mem is None:
                failures = self._failures.get(index, 0) + 1
                self._failures[index] = failures
                if failures >= _MAX_CONSECUTIVE_FAILURES:
                    self._handles.remove((index, handle))
                    self.notes.append(f"GPU {index}: dropped after {failures} failed readings")
                continue
            self._failures[index] = 0
            power = self._read(nvml.nvmlDeviceGetPowerUsage, handle)
            clock = self._read(nvml.nvmlDeviceGetClockInfo, handle, nvml.NVML_CLOCK_SM)
            rx = tx = None
            if slow:
                rx = self._read(
                    nvml.nvmlDeviceGetPcieThroughput, handle, nvml.NVML_PCIE_UTIL_RX_BYTES
                )
                tx = self._read(
                    nvml.nvmlDeviceGetPcieThroughput, handle, nvml.NVML_PCIE_UTIL_TX_BYTES
                )
                self._sample_processes(now, index, handle)
            self._rows["gpu"].append(
                (
                    now,
                    index,
                    float(util.gpu) if util is not None else nan,
                    float(util.memory) if util is not None else nan,
                    float(mem.used) if mem is not None else nan,
                    float(mem.total) if mem is not None else nan,
                    power / 1000.0 if power is not None else nan,
                    float(clock) if clock is not None else nan,
                    float(rx) if rx is not None else nan,
                    float(tx) if tx is not None else nan,
                )
            )

    def _sample_processes(self, now: int, index: int, handle: Any) -> None:
        procs = self._read(self._nvml.nvmlDeviceGetComputeRunningProcesses, handle)
        if not procs:
            return
        ours = set(self._pids())
        for p in procs:
            if p.pid in ours:
                used = p.usedGpuMemory
                self._rows["gpu_processes"].append(
                    (now, index, int(p.pid), float(used) if used is not None else float("nan"))
                )

    def drain(self) -> dict[str, list[tuple[Any, ...]]]:
        out = self._rows
        self._rows = {name: [] for name in out}
        return out

    def _shutdown(self) -> None:
        try:
            self._nvml.nvmlShutdown()
        except Exception:
            pass

    def close(self) -> None:
        if self.active:
            self.active = False
            self._shutdown()
