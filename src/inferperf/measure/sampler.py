"""Resource sampler: a daemon thread reading psutil at ~10 Hz while a measurement runs.

Per sample: process CPU % (100 = one core), per-core CPU %, RSS bytes, CPU
steal % (Linux; time a hypervisor gave to other guests), and per-core MHz
where the kernel exposes it. Each read costs tens of microseconds, at 10 Hz
well under 0.1 % of one core; ``benchmarks/concurrency.py`` measures the cost.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import psutil


class ResourceSampler:
    """Sample process and machine resources every ``interval_s`` seconds in a background thread.

    Use as a context manager around the measured window; ``timeline()`` returns
    the samples, ``summary()`` the means and peaks.

    Args:
        interval_s: seconds between samples (default 0.1 = 10 Hz).
        gpu: also sample NVIDIA GPUs through NVML when ``pynvml`` and a GPU are present
            (:class:`~inferperf.measure.gpu.GpuSampler`; the timeline gets a ``gpu`` block).
        energy: an :class:`~inferperf.measure.energy.EnergyMeter` started on enter, read at every sample (so one
            wraparound between reads at most) and at exit; ``energy_window_s`` is then the metered time.
    """

    def __init__(self, interval_s: float = 0.1, gpu: bool = True, energy: Any = None) -> None:
        self.interval_s = interval_s
        self._proc = psutil.Process()
        self._stop = threading.Event()
        self._primed = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="inferperf-sampler", daemon=True)
        self._t0 = 0.0
        self.t_s: list[float] = []
        self.cpu_percent: list[float] = []
        self.cpu_percent_per_core: list[list[float]] = []
        self.rss_bytes: list[int] = []
        self.steal_percent: list[float] = []
        self.mhz_per_core: list[list[float]] = []
        self._gpu = None
        self._energy = energy
        self.energy_window_s = 0.0
        if gpu:
            from .gpu import GpuSampler

            self._gpu = GpuSampler.open()

    def _read(self) -> None:
        self.t_s.append(round(time.perf_counter() - self._t0, 4))
        self.cpu_percent.append(self._proc.cpu_percent(None))
        self.cpu_percent_per_core.append(psutil.cpu_percent(None, percpu=True))
        self.rss_bytes.append(self._proc.memory_info().rss)
        times = psutil.cpu_times_percent(None)
        self.steal_percent.append(float(getattr(times, "steal", 0.0)))
        try:
            freqs = psutil.cpu_freq(percpu=True) or []
            self.mhz_per_core.append([round(f.current, 1) for f in freqs])
        except (OSError, NotImplementedError, AttributeError):
            self.mhz_per_core.append([])
        if self._gpu is not None:
            self._gpu.read()
        if self._energy is not None:
            self._energy.sample()

    def _loop(self) -> None:
        # prime the "since last call" counters in this thread (psutil keeps them per thread),
        # so the first sample covers one interval instead of reading 0
        self._proc.cpu_percent(None)
        psutil.cpu_percent(None, percpu=True)
        psutil.cpu_times_percent(None)
        self._primed.set()
        while not self._stop.wait(self.interval_s):
            self._read()

    def __enter__(self) -> ResourceSampler:
        if self._energy is not None:
            self._energy.start()
        self._t0 = time.perf_counter()
        self._thread.start()
        self._primed.wait(5.0)
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        self._thread.join()
        if self._energy is not None:
            self._energy.sample()
            self.energy_window_s = time.perf_counter() - self._t0
        if self._gpu is not None:
            self._gpu.close()

    def timeline(self) -> dict[str, Any]:
        """The samples as plain lists (``t_s`` seconds from the start; units in the names)."""
        out: dict[str, Any] = {
            "interval_s": self.interval_s,
            "t_s": self.t_s,
            "cpu_percent": self.cpu_percent,
            "cpu_percent_per_core": self.cpu_percent_per_core,
            "rss_bytes": self.rss_bytes,
            "steal_percent": self.steal_percent,
        }
        if any(self.mhz_per_core):
            out["mhz_per_core"] = self.mhz_per_core
        if self._gpu is not None:
            out["gpu"] = self._gpu.timeline()
        return out

    def summary(self) -> dict[str, float | int | None]:
        """Peak RSS (bytes) and mean steal % over the samples; None when nothing was sampled."""
        if not self.rss_bytes:
            return {"rss_peak_bytes": None, "steal_percent": None}
        return {
            "rss_peak_bytes": max(self.rss_bytes),
            "steal_percent": sum(self.steal_percent) / len(self.steal_percent),
        }
