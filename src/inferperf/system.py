"""Machine inventory: CPU model and ISA flags, cores, SMT, NUMA, caches, affinity,
cgroup CPU quota, governor, memory, OS, Python, package versions and GPUs.

Sources are Linux's ``/proc/cpuinfo``, sysfs (``/sys/devices/system/cpu``,
``/sys/devices/system/node``), the cgroup filesystem (``/sys/fs/cgroup``),
:mod:`psutil` and :mod:`importlib.metadata`. Unknown values are ``None``, never
guessed. Parsing lives in pure functions that take text or a directory, so
tests run them on fixtures. No runtime (onnxruntime, torch, ...) is imported:
versions come from package metadata; ``pynvml`` is imported lazily, if present.
"""

from __future__ import annotations

import functools
import math
import os
import platform
import re
from importlib import metadata
from pathlib import Path

import psutil

from inferperf.results.model import GpuInfo, SystemInfo

ISA_FLAGS_OF_INTEREST: tuple[str, ...] = (
    "sse4_2", "avx", "avx2", "fma", "f16c", "avx_vnni", "avx512f", "avx512bw", "avx512vl",
    "avx512_vnni", "avx512_bf16", "avx512_fp16", "amx_tile", "amx_bf16", "amx_int8",
    "neon", "asimd", "asimdhp", "asimddp", "i8mm", "bf16", "sve", "sve2",
)  # fmt: skip
"""x86 ``flags`` / ARM ``Features`` names (as /proc/cpuinfo spells them) that matter for inference kernels."""

PACKAGES: tuple[str, ...] = (
    "inferperf", "numpy", "onnx", "onnxruntime", "pydantic", "psutil",
    "scipy", "typer", "rich", "openvino", "torch",
)  # fmt: skip
"""Distributions whose versions are recorded when installed."""

_SYS_CPU = Path("/sys/devices/system/cpu")
_SYS_NODE = Path("/sys/devices/system/node")
_CGROUP = Path("/sys/fs/cgroup")


def _read(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except (OSError, UnicodeDecodeError):
        return None


def parse_cpuinfo(text: str) -> tuple[str | None, list[str]]:
    """Parse ``/proc/cpuinfo`` text (see proc(5)) into CPU model and ISA flags of interest.

    Args:
        text: the file's contents.

    Returns:
        ``(model, flags)``: model from the first ``model name`` line (x86; ``Hardware``
        or ``Processor`` on ARM), ``None`` when absent; flags are the members of
        :data:`ISA_FLAGS_OF_INTEREST` present in the first ``flags`` (x86) or
        ``Features`` (ARM) line, sorted.
    """
    fields: dict[str, str] = {}
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        key = key.strip().lower()
        if sep and key not in fields:
            fields[key] = value.strip()
    model = fields.get("model name") or fields.get("hardware") or fields.get("processor")
    if model is not None and model.isdigit():  # x86 "processor : 0" is an index, not a name
        model = None
    present = set((fields.get("flags") or fields.get("features") or "").split())
    return model or None, sorted(present.intersection(ISA_FLAGS_OF_INTEREST))


def parse_cpulist(text: str) -> list[int]:
    """Parse a kernel CPU list (``"0-3,8,10-11"``) into sorted CPU ids.

    The format is the one of sysfs ``cpulist`` files and ``cpuset.cpus``
    (kernel docs: admin-guide/cputopology). Empty text gives ``[]``.

    Raises:
        ValueError: on a malformed item.
    """
    cpus: set[int] = set()
    for item in text.strip().split(","):
        item = item.strip()
        if not item:
            continue
        lo, sep, hi = item.partition("-")
        cpus.update(range(int(lo), int(hi) + 1) if sep else (int(lo),))
    return sorted(cpus)


def parse_cache_size(text: str) -> int:
    """Parse a sysfs cache ``size`` (``"48K"``, ``"32M"``, ``"512"``) into bytes (K = 1024)."""
    m = re.fullmatch(r"\s*(\d+)\s*([KMG]?)B?\s*", text, re.IGNORECASE)
    if m is None:
        raise ValueError(f"bad cache size {text!r}")
    return int(m.group(1)) * 1024 ** " KMG".index(m.group(2).upper() or " ")


def read_caches(cpu_dir: Path = _SYS_CPU / "cpu0") -> dict[str, int] | None:
    """Cache sizes of one CPU from ``cpu_dir/cache/index*/{level,type,size}`` (sysfs).

    Returns:
        e.g. ``{"L1d_bytes": 49152, "L1i_bytes": 32768, "L2_bytes": 1048576, "L3_bytes": 33554432}``
        (bytes; ``d``/``i`` suffix for split data/instruction caches), or ``None`` when unreadable.
    """
    caches: dict[str, int] = {}
    for index in sorted(cpu_dir.glob("cache/index*")):
        level, kind, size = (_read(index / n) for n in ("level", "type", "size"))
        if not level or not size:
            continue
        suffix = {"Data": "d", "Instruction": "i"}.get(kind or "", "")
        try:
            caches[f"L{level}{suffix}_bytes"] = parse_cache_size(size)
        except ValueError:
            continue
    return caches or None


def read_smt_active(cpu_root: Path = _SYS_CPU) -> bool | None:
    """Whether any core runs more than one hardware thread, from sysfs
    ``cpu*/topology/thread_siblings_list``; ``None`` when no such file is readable."""
    seen = False
    for path in cpu_root.glob("cpu[0-9]*/topology/thread_siblings_list"):
        text = _read(path)
        if text is None:
            continue
        seen = True
        try:
            if len(parse_cpulist(text)) > 1:
                return True
        except ValueError:
            continue
    return False if seen else None


def read_numa_nodes(node_root: Path = _SYS_NODE) -> dict[str, list[int]] | None:
    """NUMA node -> CPU ids from sysfs ``node*/cpulist`` (e.g. ``{"0": [0, 1]}``); ``None`` if absent."""
    nodes: dict[str, list[int]] = {}
    for path in node_root.glob("node[0-9]*/cpulist"):
        text = _read(path)
        if text is not None:
            try:
                nodes[path.parent.name[4:]] = parse_cpulist(text)
            except ValueError:
                continue
    return dict(sorted(nodes.items(), key=lambda kv: int(kv[0]))) or None


def parse_cpu_max(text: str) -> float | None:
    """Parse cgroup v2 ``cpu.max`` (``"$MAX $PERIOD"``, µs) into a CPU count.

    See the kernel's admin-guide/cgroup-v2 ("cpu.max"): ``"max 100000"`` means
    no limit (``None``); ``"150000 100000"`` means 1.5 CPUs. A missing period
    defaults to 100000 µs. Malformed text gives ``None``.
    """
    parts = text.split()
    if not parts or parts[0] == "max":
        return None
    try:
        quota, period = int(parts[0]), int(parts[1]) if len(parts) > 1 else 100_000
    except ValueError:
        return None
    return quota / period if quota > 0 and period > 0 else None


def parse_cfs(quota_text: str, period_text: str) -> float | None:
    """Parse cgroup v1 ``cpu.cfs_quota_us`` / ``cpu.cfs_period_us`` (µs) into a CPU count.

    See the kernel's scheduler/sched-bwc (CFS bandwidth control): a quota of
    ``-1`` means no limit (``None``). Malformed text gives ``None``.
    """
    try:
        quota, period = int(quota_text.strip()), int(period_text.strip())
    except ValueError:
        return None
    return quota / period if quota > 0 and period > 0 else None


def read_cgroup_cpu_limit(root: Path = _CGROUP) -> float | None:
    """CPU quota (CPUs, float) of this cgroup, or ``None`` when unlimited or unknown.

    Tries cgroup v2 ``root/cpu.max`` first, then v1 ``cpu.cfs_quota_us`` and
    ``cpu.cfs_period_us`` under ``root/"cpu"`` or ``root/"cpu,cpuacct"``.
    """
    text = _read(root / "cpu.max")
    if text is not None:
        return parse_cpu_max(text)
    for sub in ("cpu", "cpu,cpuacct"):
        quota, period = _read(root / sub / "cpu.cfs_quota_us"), _read(root / sub / "cpu.cfs_period_us")
        if quota is not None and period is not None:
            return parse_cfs(quota, period)
    return None


def effective_cpus(affinity_count: int, quota: float | None) -> int:
    """CPUs a process can really use: ``min(affinity_count, ceil(quota))``, at least 1.

    Args:
        affinity_count: number of CPUs in the process's affinity mask.
        quota: cgroup CPU quota in CPUs, ``None`` when unlimited.
    """
    count = max(1, affinity_count)
    if quota is not None and quota > 0:
        count = min(count, math.ceil(quota))
    return max(1, count)


def cpu_limit_display(quota: float | None) -> str:
    """Human text for a cgroup CPU quota: ``"none"``, ``"2"``, or raw and rounded-up ``"1.5 (2 used)"``."""
    if quota is None:
        return "none"
    if float(quota).is_integer():
        return str(int(quota))
    return f"{quota:g} ({math.ceil(quota)} used)"


def _affinity() -> list[int]:
    try:
        return sorted(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not Linux
        return list(range(os.cpu_count() or 1))


def package_versions(names: tuple[str, ...] = PACKAGES) -> dict[str, str]:
    """Installed versions of ``names`` from package metadata (missing ones are skipped; nothing imported)."""
    versions: dict[str, str] = {}
    for name in names:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return versions


def collect_gpus() -> list[GpuInfo]:
    """GPUs via NVML (``pynvml``, imported here only if installed); any failure gives ``[]``."""
    try:
        import pynvml  # type: ignore[import-not-found]

        pynvml.nvmlInit()
    except Exception:
        return []

    def text(value: object) -> str:
        return value.decode() if isinstance(value, bytes) else str(value)

    try:
        driver = text(pynvml.nvmlSystemGetDriverVersion())
        gpus = []
        for i in range(pynvml.nvmlDeviceGetCount()):
            handle = pynvml.nvmlDeviceGetHandleByIndex(i)
            name, total = text(pynvml.nvmlDeviceGetName(handle)), int(pynvml.nvmlDeviceGetMemoryInfo(handle).total)
            gpus.append(GpuInfo(index=i, name=name, memory_bytes=total, driver=driver))
        return gpus
    except Exception:
        return []
    finally:
        try:
            pynvml.nvmlShutdown()
        except Exception:
            pass


def _cpu_mhz() -> dict[str, float] | None:
    """Current (mean over cores) and maximum CPU frequency in MHz where readable (psutil, else /proc/cpuinfo)."""
    try:
        f = psutil.cpu_freq()
        if f and f.current:
            return {"current": round(float(f.current), 1), **({"max": float(f.max)} if f.max else {})}
    except (OSError, NotImplementedError, AttributeError):
        pass
    mhz = [float(line.split(":")[1]) for line in (_read(Path("/proc/cpuinfo")) or "").splitlines()
           if line.startswith("cpu MHz") and ":" in line]
    return {"current": round(sum(mhz) / len(mhz), 1)} if mhz else None


def _build() -> SystemInfo:
    model, flags = parse_cpuinfo(_read(Path("/proc/cpuinfo")) or "")
    physical = psutil.cpu_count(logical=False)
    affinity = _affinity()
    logical = psutil.cpu_count(logical=True) or os.cpu_count() or len(affinity) or 1
    smt = read_smt_active()
    if smt is None and physical is not None:
        smt = physical < logical
    quota = read_cgroup_cpu_limit()
    try:
        memory: int | None = int(psutil.virtual_memory().total)
    except Exception:
        memory = None
    return SystemInfo(
        cpu_model=model, isa_flags=flags, physical_cores=physical, logical_cores=logical,
        smt_active=smt, numa_nodes=read_numa_nodes(), caches=read_caches(), cpu_affinity=affinity,
        cgroup_cpu_limit=quota, effective_cpus=effective_cpus(len(affinity), quota),
        governor=_read(_SYS_CPU / "cpu0" / "cpufreq" / "scaling_governor") or None,
        cpu_mhz=_cpu_mhz(),
        memory_bytes=memory, os=platform.platform(), python=platform.python_version(),
        packages=package_versions(), gpus=collect_gpus(),
    )  # fmt: skip


@functools.lru_cache(maxsize=8)
def _cached(affinity: tuple[int, ...]) -> SystemInfo:
    return _build()


def collect_system(refresh: bool = False) -> SystemInfo:
    """Inventory of this machine, as seen by this process under its current CPU affinity.

    Cached per process and affinity (a process pinned for a while, as ``plan --validate`` pins itself to the
    load's CPUs, gets the pinned inventory only while pinned: the inventory read while pinned had been kept
    for the rest of the process, and the machine's fingerprint with it); the caller gets its own copy.

    Args:
        refresh: re-read everything (e.g. after changing cgroup limits).

    Returns:
        A :class:`~inferperf.results.model.SystemInfo`; ``effective_cpus`` (>= 1) is the
        affinity count capped by the rounded-up cgroup quota.
    """
    if refresh:
        _cached.cache_clear()
    return _cached(tuple(_affinity())).model_copy(deep=True)


def default_intra_op_threads(info: SystemInfo | None = None) -> int:
    """Default ``intra_op_num_threads``: ``info.effective_cpus`` (>= 1).

    inferperf always sets the thread count explicitly, so a restricted cpuset or
    CPU quota never leads ONNX Runtime to pin threads to CPUs outside the affinity mask.

    Args:
        info: inventory to use; :func:`collect_system` when ``None``.
    """
    return max(1, (info or collect_system()).effective_cpus)


#: the inventory fields a machine fingerprint covers (what changes how fast a configuration runs)
FINGERPRINT_FIELDS = ("cpu_model", "physical_cores", "logical_cores", "smt_active", "effective_cpus",
                      "cgroup_cpu_limit", "cpu_affinity")
#: the runtime versions a fingerprint covers
FINGERPRINT_PACKAGES = ("onnxruntime", "openvino", "torch")


def machine_fingerprint(info: SystemInfo | None = None) -> str:
    """12-hex-digit fingerprint of the machine as far as speed goes: CPU model, core counts, SMT, effective
    CPUs, quota, affinity, memory (GiB) and runtime versions (:data:`FINGERPRINT_FIELDS`,
    :data:`FINGERPRINT_PACKAGES`). Two measurements are comparable only under the same fingerprint
    (tune's study and trial cache are keyed by it)."""
    import hashlib
    import json

    info = info or collect_system()
    doc = {k: getattr(info, k) for k in FINGERPRINT_FIELDS}
    doc["memory_gib"] = round((info.memory_bytes or 0) / 2**30)
    doc["packages"] = {k: info.packages.get(k) for k in FINGERPRINT_PACKAGES if info.packages.get(k)}
    return hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()[:12]
