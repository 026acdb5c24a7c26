"""GPU metrics through NVML (``pynvml``, extra ``inferperf[gpu]``), sampled beside the CPU sampler.

Per sample and device: utilization % (``nvmlDeviceGetUtilizationRates().gpu``:
the share of the last sample period in which a kernel ran), memory used in
bytes, power in W (NVML reports mW), SM and memory clocks in MHz. A reading
NVML refuses on a device (e.g. power on some boards) is ``None``. ``pynvml``
is imported here only; without it or without a GPU, :meth:`GpuSampler.open`
returns None and nothing is sampled. Source: NVIDIA NVML API reference
(``nvmlDeviceGetUtilizationRates``, ``nvmlDeviceGetMemoryInfo``,
``nvmlDeviceGetPowerUsage``, ``nvmlDeviceGetClockInfo``).
"""

from __future__ import annotations

from typing import Any


class GpuSampler:
    """Reads every NVIDIA GPU once per :meth:`read`; not a thread (the resource sampler calls it).

    Args:
        nvml: the ``pynvml`` module (or a stand-in with the same functions, for tests).
        handles: device handles from ``nvmlDeviceGetHandleByIndex``.
        names: device names, for the timeline.
    """

    def __init__(self, nvml: Any, handles: list[Any], names: list[str]) -> None:
        self._nvml = nvml
        self._handles = handles
        self.names = names
        self.utilization_percent: list[list[float | None]] = []
        self.memory_used_bytes: list[list[int | None]] = []
        self.power_w: list[list[float | None]] = []
        self.sm_clock_mhz: list[list[int | None]] = []
        self.mem_clock_mhz: list[list[int | None]] = []

    @classmethod
    def open(cls, nvml: Any = None) -> GpuSampler | None:
        """Initialise NVML and find the GPUs; None without pynvml, without a driver or without a GPU."""
        try:
            if nvml is None:
                import pynvml as nvml  # type: ignore[import-not-found,no-redef]
            nvml.nvmlInit()
            n = nvml.nvmlDeviceGetCount()
            handles = [nvml.nvmlDeviceGetHandleByIndex(i) for i in range(n)]
            names = [_text(nvml.nvmlDeviceGetName(h)) for h in handles]
        except Exception:
            return None
        if not handles:
            cls._shutdown(nvml)
            return None
        return cls(nvml, handles, names)

    @staticmethod
    def _shutdown(nvml: Any) -> None:
        try:
            nvml.nvmlShutdown()
        except Exception:
            pass

    def _get(self, fn: str, *args: Any) -> Any:
        try:
            return getattr(self._nvml, fn)(*args)
        except Exception:
            return None

    def read(self) -> None:
        """Append one sample per device to each series."""
        nv = self._nvml
        util, mem, power, sm, memclk = [], [], [], [], []
        for h in self._handles:
            u = self._get("nvmlDeviceGetUtilizationRates", h)
            util.append(float(u.gpu) if u is not None else None)
            m = self._get("nvmlDeviceGetMemoryInfo", h)
            mem.append(int(m.used) if m is not None else None)
            p = self._get("nvmlDeviceGetPowerUsage", h)
            power.append(p / 1000.0 if p is not None else None)
            sm.append(self._get("nvmlDeviceGetClockInfo", h, getattr(nv, "NVML_CLOCK_SM", 1)))
            memclk.append(self._get("nvmlDeviceGetClockInfo", h, getattr(nv, "NVML_CLOCK_MEM", 2)))
        self.utilization_percent.append(util)
        self.memory_used_bytes.append(mem)
        self.power_w.append(power)
        self.sm_clock_mhz.append(sm)
        self.mem_clock_mhz.append(memclk)

    def close(self) -> None:
        """Shut NVML down."""
        self._shutdown(self._nvml)

    def timeline(self) -> dict[str, Any]:
        """Series indexed [sample][device] plus a per-device summary (mean utilization, peaks)."""
        summary = []
        for d, name in enumerate(self.names):
            u = [s[d] for s in self.utilization_percent if s[d] is not None]
            m = [s[d] for s in self.memory_used_bytes if s[d] is not None]
            p = [s[d] for s in self.power_w if s[d] is not None]
            summary.append({
                "index": d, "name": name,
                "utilization_percent_mean": sum(u) / len(u) if u else None,
                "memory_used_bytes_peak": max(m) if m else None,
                "power_w_mean": sum(p) / len(p) if p else None,
                "power_w_peak": max(p) if p else None,
            })
        return {
            "devices": self.names,
            "utilization_percent": self.utilization_percent,
            "memory_used_bytes": self.memory_used_bytes,
            "power_w": self.power_w,
            "sm_clock_mhz": self.sm_clock_mhz,
            "mem_clock_mhz": self.mem_clock_mhz,
            "summary": summary,
        }


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)
