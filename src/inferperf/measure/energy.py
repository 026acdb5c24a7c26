"""Energy counters: RAPL through Linux powercap sysfs and NVIDIA GPUs through NVML, read beside the resource sampler.

RAPL (Intel's Running Average Power Limit; AMD exposes the same powercap zones): every zone
``/sys/class/powercap/intel-rapl*:N[:M]`` has ``name`` (``package-0``, ``core``, ``uncore``, ``dram``,
``psys``), ``energy_uj`` (a counter in microjoules) and ``max_energy_range_uj`` (its range: past it the counter
restarts from 0). Source: Linux ``Documentation/power/powercap/powercap.rst``. Since Linux 5.10 ``energy_uj``
is readable by root only (CVE-2020-8694, the PLATYPUS power side channel). Sub-zones (``core``, ``dram``...)
are parts of their package or beside it: never add them to it.

NVML: ``nvmlDeviceGetTotalEnergyConsumption`` (mJ since the driver loaded, 64-bit: no wraparound; Volta and
newer). ``pynvml`` is imported here only, lazily.

A counter that went down between two reads wrapped once: the delta is ``after + max_range - before``
(:func:`counter_delta_uj`). More than one wrap between two reads cannot be seen, so the resource sampler
reads the counters at every sample (10 Hz; a package counter's range lasts minutes at full power).

Every domain found is ``measured`` or ``unavailable`` with the reason (no powercap in this VM, no permission,
no GPU, a counter this GPU lacks): :meth:`EnergyMeter.open` never raises.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..clock import SYSTEM_CLOCK, Clock
from ..stats import mean_ci

POWERCAP_ROOT = Path("/sys/class/powercap")
#: Slices of the idle measurement: their spread gives the idle power's interval.
IDLE_PARTS = 5
#: Seconds of idle power where a command has no setting of its own (pipeline; bench and load: energy_idle_s).
DEFAULT_IDLE_S = 1.0


@dataclass
class Domain:
    """One energy counter.

    Attributes:
        domain: unique id (the powercap zone, e.g. ``intel-rapl:0:1``, or ``nvml:0``).
        name: what it covers (``package-0``, ``dram``, ``psys``, the GPU's name).
        source: ``rapl`` or ``nvml``.
        read_uj: returns the counter now, in microjoules (raises OSError or NVML's error when it cannot).
        max_range_uj: the counter's range (a wrap restarts it from 0); None: it never wraps.
    """

    domain: str
    name: str
    source: str
    read_uj: Callable[[], int]
    max_range_uj: int | None


@dataclass
class Unavailable:
    """A domain (or a whole source) that is not measured, and why."""

    domain: str
    source: str
    reason: str
    name: str | None = None


def counter_delta_uj(before: int, after: int, max_range_uj: int | None) -> int:
    """Energy between two reads of one counter (uJ), one wraparound corrected.

    Args:
        before, after: the counter's values (uJ), in read order.
        max_range_uj: the counter's range (``max_energy_range_uj``); None for a counter that never wraps.

    Raises:
        ValueError: the counter went down and has no range to correct it by.
    """
    if after >= before:
        return after - before
    if max_range_uj is None:
        raise ValueError(f"energy counter went down ({before} -> {after} uJ) and has no range")
    return after + max_range_uj - before


def _read_int(path: Path) -> int:
    return int(path.read_text().strip())


def rapl_domains(root: Path | None = None) -> tuple[list[Domain], list[Unavailable]]:
    """The readable RAPL zones under ``root`` (powercap sysfs; default :data:`POWERCAP_ROOT`), and the ones that
    are not, with the reason."""
    root = POWERCAP_ROOT if root is None else root
    if not root.is_dir():
        return [], [Unavailable("rapl", "rapl", f"no powercap in this system ({root} absent: a VM, a container"
                                               " without /sys/class/powercap, or not Linux)")]
    zones = sorted(p for p in root.glob("intel-rapl*:*") if p.is_dir())
    if not zones:
        return [], [Unavailable("rapl", "rapl", f"no RAPL zone under {root} (no intel-rapl driver loaded)")]
    found: list[Domain] = []
    missing: list[Unavailable] = []
    for zone in zones:
        try:
            name = (zone / "name").read_text().strip()
        except OSError:
            name = zone.name
        energy, rng = zone / "energy_uj", zone / "max_energy_range_uj"
        try:
            _read_int(energy)
            max_range = _read_int(rng)
        except PermissionError as e:
            missing.append(Unavailable(zone.name, "rapl", f"no permission to read {e.filename} (root only since"
                                       " Linux 5.10, CVE-2020-8694): run as root or make it readable", name))
            continue
        except (OSError, ValueError) as e:
            what = energy if not energy.exists() else rng
            missing.append(Unavailable(zone.name, "rapl", f"{what} unreadable ({type(e).__name__}): without it"
                                       " the counter cannot be read or its wraparound corrected", name))
            continue
        found.append(Domain(zone.name, name, "rapl", lambda p=energy: _read_int(p), max_range))
    return found, missing


def nvml_domains(nvml: Any = None) -> tuple[list[Domain], list[Unavailable]]:
    """The NVIDIA GPUs whose energy counter NVML reads, and the ones (or the reason none) it cannot."""
    try:
        if nvml is None:
            import pynvml as nvml  # type: ignore[import-not-found,no-redef]
    except ImportError:
        return [], [Unavailable("nvml", "nvml", "no GPU energy: pynvml not installed (pip install 'inferperf[gpu]')")]
    try:
        nvml.nvmlInit()
        count = nvml.nvmlDeviceGetCount()
    except Exception as e:
        return [], [Unavailable("nvml", "nvml", f"no GPU: NVML did not start ({type(e).__name__}: {e})")]
    if not count:
        return [], [Unavailable("nvml", "nvml", "no GPU: NVML found no NVIDIA device")]
    found: list[Domain] = []
    missing: list[Unavailable] = []
    for i in range(count):
        h = nvml.nvmlDeviceGetHandleByIndex(i)
        raw = nvml.nvmlDeviceGetName(h)
        name = raw.decode() if isinstance(raw, bytes) else str(raw)
        try:
            nvml.nvmlDeviceGetTotalEnergyConsumption(h)
        except Exception as e:
            missing.append(Unavailable(f"nvml:{i}", "nvml", f"this GPU has no energy counter (NVML: {e}; Volta and"
                                       " newer have one)", name))
            continue
        found.append(Domain(f"nvml:{i}", name, "nvml",
                            lambda h=h: int(nvml.nvmlDeviceGetTotalEnergyConsumption(h)) * 1000, None))
    return found, missing


@dataclass
class EnergyMeter:
    """Accumulates every measured domain's energy between :meth:`start` and the last :meth:`sample`.

    Use: ``start()``, then ``sample()`` as often as wanted (each adds the wrap-corrected delta since the last
    read), ``totals_uj()`` for the energy so far. A domain whose read fails mid-way is dropped to
    ``unavailable`` with the error (its energy would be wrong).

    Attributes:
        domains: the counters read.
        unavailable: the domains not measured, with the reasons.
    """

    domains: list[Domain]
    unavailable: list[Unavailable]
    nvml: Any = None
    _last: list[int | None] = field(default_factory=list)
    _total: list[int] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @classmethod
    def open(cls, powercap_root: Path | None = None, nvml: Any = None, gpu: bool = True) -> EnergyMeter:
        """Find the RAPL zones under ``powercap_root`` (default :data:`POWERCAP_ROOT`) and (``gpu``) NVML's GPUs;
        never raises."""
        domains, missing = rapl_domains(POWERCAP_ROOT if powercap_root is None else powercap_root)
        started = None
        if gpu:
            d, m = nvml_domains(nvml)
            domains, missing = domains + d, missing + m
            started = sys.modules.get("pynvml") if nvml is None else nvml
        else:
            missing.append(Unavailable("nvml", "nvml", "GPU sampling off"))
        return cls(domains, missing, started if any(x.source == "nvml" for x in domains) else None)

    def close(self) -> None:
        """Shut NVML down when this meter started it (its counters are then no longer read)."""
        if self.nvml is not None:
            try:
                self.nvml.nvmlShutdown()
            except Exception:
                pass
            self.nvml = None

    def _read_all(self) -> list[int | None]:
        out: list[int | None] = []
        for i, d in enumerate(self.domains):
            if self._last and self._last[i] is None:
                out.append(None)
                continue
            try:
                out.append(d.read_uj())
            except Exception as e:
                self.unavailable.append(Unavailable(d.domain, d.source, f"read failed during the measurement"
                                                    f" ({type(e).__name__}: {e})", d.name))
                out.append(None)
        return out

    def start(self) -> None:
        """Read every counter: the energy counts from here."""
        self._last = []
        self._last = self._read_all()
        self._total = [0] * len(self.domains)

    def sample(self) -> None:
        """Read every counter and add what each used since the last read (one wraparound corrected); safe to
        call from several threads."""
        with self._lock:
            now = self._read_all()
            for i, (before, after) in enumerate(zip(self._last, now, strict=True)):
                if before is not None and after is not None:
                    self._total[i] += counter_delta_uj(before, after, self.domains[i].max_range_uj)
            self._last = now

    def totals_uj(self) -> dict[str, int | None]:
        """Energy since :meth:`start` per domain id (uJ); None for a domain whose read failed."""
        return {d.domain: (self._total[i] if self._last[i] is not None else None)
                for i, d in enumerate(self.domains)}


def measure_idle(meter: EnergyMeter, duration_s: float, clock: Clock = SYSTEM_CLOCK,
                 parts: int = IDLE_PARTS) -> dict[str, tuple[float, float, float]]:
    """Idle power of every measured domain: ``parts`` back-to-back slices of ``duration_s`` in all, nothing run.

    Returns:
        domain id -> (mean W, 95 % CI low W, high W): Student's t interval of the slices' powers
        (:func:`inferperf.stats.mean_ci`). Domains whose read failed are left out.
    """
    powers: dict[str, list[float]] = {d.domain: [] for d in meter.domains}
    for _ in range(parts):
        meter.start()
        t0 = clock.now_ns()
        clock.sleep(duration_s / parts)
        meter.sample()
        dt_s = (clock.now_ns() - t0) / 1e9
        for key, uj in meter.totals_uj().items():
            if uj is not None and dt_s > 0:
                powers[key].append(uj / 1e6 / dt_s)
    out = {}
    for key, p in powers.items():
        if len(p) == parts:
            lo, hi = mean_ci(p)
            out[key] = (sum(p) / len(p), lo, hi)
    return out


def unavailable_block(reason: str) -> dict[str, Any]:
    """``metrics.energy`` when nothing could be measured for a reason that covers every domain."""
    return {"window_s": None, "inferences": None, "idle_s": None,
            "domains": [{"domain": "all", "source": None, "status": "unavailable", "reason": reason}], "notes": []}


def energy_block(meter: EnergyMeter, idle: dict[str, tuple[float, float, float]] | None, idle_s: float,
                 window_s: float, inferences: int, client_shares_package: bool = False) -> dict[str, Any]:
    """``metrics.energy`` of a Result (docs/results-schema.md): each domain measured or unavailable with the reason.

    Per measured domain: ``energy_j`` over the window, ``power_w``, ``idle_power_w`` and its 95 % interval,
    ``active_energy_j = energy_j - idle_power_w * window_s`` and ``joules_per_inference = active_energy_j /
    inferences`` with the interval the idle power's interval gives it (the counter itself is exact to its
    resolution; run-to-run spread is the repeats' business).

    Args:
        meter: started before the window and sampled at its end.
        idle: :func:`measure_idle`'s figures, or None when no idle power was measured (then no active energy).
        idle_s: how long the idle measurement took (s).
        window_s: the metered window (s).
        inferences: the queries answered in it.
        client_shares_package: a load client measured on the server's machine (its package counts both).
    """
    totals = meter.totals_uj()
    rows: list[dict[str, Any]] = []
    for d in meter.domains:
        uj = totals[d.domain]
        if uj is None:
            continue  # its read failed: listed in meter.unavailable with the error
        e_j = uj / 1e6
        row: dict[str, Any] = {"domain": d.domain, "name": d.name, "source": d.source, "status": "measured",
                               "energy_j": e_j, "power_w": e_j / window_s if window_s > 0 else None,
                               "idle_power_w": None, "idle_power_w_ci95": None, "active_energy_j": None,
                               "joules_per_inference": None, "joules_per_inference_ci95": None}
        if idle and d.domain in idle:
            mean, lo, hi = idle[d.domain]
            row.update(idle_power_w=mean, idle_power_w_ci95=[lo, hi], active_energy_j=e_j - mean * window_s)
            if inferences > 0:
                row.update(joules_per_inference=row["active_energy_j"] / inferences,
                           joules_per_inference_ci95=[(e_j - hi * window_s) / inferences,
                                                      (e_j - lo * window_s) / inferences])
        rows.append(row)
    rows += [{"domain": u.domain, "name": u.name, "source": u.source, "status": "unavailable", "reason": u.reason}
             for u in meter.unavailable]
    notes = []
    packages = [r["name"] for r in rows if r["status"] == "measured" and r["source"] == "rapl"
                and str(r["name"]).startswith(("package", "psys"))]
    if packages:
        notes.append(f"{', '.join(packages)}: the counter covers the whole socket, every process on it (idle power"
                     " subtracted), not only this one")
        if client_shares_package:
            notes.append("the load client runs on the server's machine: the package counter counts the client"
                         " too (client and server share the socket)")
    if idle is None:
        notes.append("no idle power measured: energy_j is the gross energy, no joules per inference")
    return {"window_s": window_s, "inferences": inferences, "idle_s": idle_s if idle is not None else None,
            "domains": rows, "notes": notes}



class EnergyWindow:
    """Meters a window of work done elsewhere (a load step on an event loop): a daemon thread reads ``meter``
    every ``interval_s`` (so one wraparound between reads at most) and once more at exit; ``window_s`` is the
    metered time on ``clock``.
    """

    def __init__(self, meter: EnergyMeter, clock: Clock = SYSTEM_CLOCK, interval_s: float = 0.1) -> None:
        self.meter = meter
        self.window_s = 0.0
        self._clock = clock
        self._interval_s = interval_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="inferperf-energy", daemon=True)
        self._t0 = 0

    def _loop(self) -> None:
        while not self._stop.wait(self._interval_s):
            self.meter.sample()

    def __enter__(self) -> EnergyWindow:
        self.meter.start()
        self._t0 = self._clock.now_ns()
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        self._thread.join()
        self.meter.sample()
        self.window_s = (self._clock.now_ns() - self._t0) / 1e9

    def stop(self) -> None:
        """Stop the reader thread (if it runs); the totals so far stay readable."""
        self._stop.set()

    def so_far(self) -> float:
        """Read the counters now, the thread still running (a server's window has no end known in advance);
        returns the seconds metered so far."""
        self.meter.sample()
        return (self._clock.now_ns() - self._t0) / 1e9


def serving_energy(clock: Clock = SYSTEM_CLOCK) -> EnergyWindow:
    """An energy window started now for a server (``inferperf serve``): its thread runs only when a counter is
    readable; read with :meth:`EnergyWindow.so_far`. No idle power: the server is ready before any is measured."""
    window = EnergyWindow(EnergyMeter.open(), clock)
    if window.meter.domains:
        window.__enter__()
    else:
        window.meter.start()
    return window
