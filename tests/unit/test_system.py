"""Machine inventory: pure parsers on fixture text/dirs, and one real collection."""

from __future__ import annotations

import os
import sys
import types
from collections.abc import Callable
from pathlib import Path

import psutil
import pytest

from inferperf import system
from inferperf.results.model import SystemInfo
from inferperf.system import (
    collect_system,
    cpu_limit_display,
    default_intra_op_threads,
    effective_cpus,
    parse_cache_size,
    parse_cfs,
    parse_cpu_max,
    parse_cpuinfo,
    parse_cpulist,
    read_caches,
    read_cgroup_cpu_limit,
    read_numa_nodes,
    read_smt_active,
)

X86_CPUINFO = """\
processor\t: 0
vendor_id\t: GenuineIntel
model name\t: Intel(R) Xeon(R) Platinum 8480+
flags\t\t: fpu sse sse2 sse4_1 sse4_2 fma avx f16c avx2 avx512f avx512_vnni amx_tile amx_int8 hypervisor

processor\t: 1
model name\t: Intel(R) Xeon(R) Platinum 8480+
flags\t\t: fpu sse
"""

ARM_CPUINFO = """\
processor\t: 0
BogoMIPS\t: 50.00
Features\t: fp asimd evtstrm aes asimdhp cpuid asimddp sve i8mm bf16
CPU implementer\t: 0x41
"""


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


# --- cgroup quota -> effective CPUs ---------------------------------------------------------------


def test_cgroup_v2_two_cpus_caps_64_cpu_affinity(tmp_path: Path) -> None:
    _write(tmp_path / "cpu.max", "200000 100000\n")
    quota = read_cgroup_cpu_limit(tmp_path)
    assert quota == 2.0
    assert effective_cpus(64, quota) == 2


def test_cgroup_v2_fractional_quota_rounds_up(tmp_path: Path) -> None:
    _write(tmp_path / "cpu.max", "150000 100000\n")
    quota = read_cgroup_cpu_limit(tmp_path)
    assert quota == 1.5
    assert effective_cpus(64, quota) == 2
    assert cpu_limit_display(quota) == "1.5 (2 used)"


def test_cgroup_v2_max_means_affinity_decides(tmp_path: Path) -> None:
    _write(tmp_path / "cpu.max", "max 100000\n")
    quota = read_cgroup_cpu_limit(tmp_path)
    assert quota is None
    assert effective_cpus(len({0, 1, 2, 3}), quota) == 4
    assert cpu_limit_display(quota) == "none"


@pytest.mark.parametrize("sub", ["cpu", "cpu,cpuacct"])
def test_cgroup_v1_unlimited_quota(tmp_path: Path, sub: str) -> None:
    _write(tmp_path / sub / "cpu.cfs_quota_us", "-1\n")
    _write(tmp_path / sub / "cpu.cfs_period_us", "100000\n")
    assert read_cgroup_cpu_limit(tmp_path) is None


def test_cgroup_v1_quota(tmp_path: Path) -> None:
    _write(tmp_path / "cpu,cpuacct" / "cpu.cfs_quota_us", "250000\n")
    _write(tmp_path / "cpu,cpuacct" / "cpu.cfs_period_us", "100000\n")
    assert read_cgroup_cpu_limit(tmp_path) == 2.5
    assert effective_cpus(8, 2.5) == 3


def test_no_cgroup_files_means_no_limit(tmp_path: Path) -> None:
    assert read_cgroup_cpu_limit(tmp_path) is None


@pytest.mark.parametrize(
    ("text", "expected"),
    [("max 100000", None), ("max", None), ("50000 100000", 0.5), ("300000", 3.0), ("", None), ("x y", None)],
)
def test_parse_cpu_max(text: str, expected: float | None) -> None:
    assert parse_cpu_max(text) == expected


def test_parse_cfs() -> None:
    assert parse_cfs("-1", "100000") is None
    assert parse_cfs("50000", "100000") == 0.5
    assert parse_cfs("garbage", "100000") is None


def test_effective_cpus_at_least_one() -> None:
    assert effective_cpus(4, 0.1) == 1
    assert effective_cpus(0, None) == 1
    assert effective_cpus(2, 8.0) == 2


def test_cpu_limit_display_integral() -> None:
    assert cpu_limit_display(2.0) == "2"


# --- cpulist / cpuinfo / sysfs ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("0-3,8,10-11", [0, 1, 2, 3, 8, 10, 11]),
        ("0", [0]),
        ("0-1\n", [0, 1]),
        ("", []),
        ("5,1-2", [1, 2, 5]),
    ],
)
def test_parse_cpulist(text: str, expected: list[int]) -> None:
    assert parse_cpulist(text) == expected


def test_parse_cpulist_rejects_garbage() -> None:
    with pytest.raises(ValueError):
        parse_cpulist("a-b")


def test_parse_cpuinfo_x86() -> None:
    model, flags = parse_cpuinfo(X86_CPUINFO)
    assert model == "Intel(R) Xeon(R) Platinum 8480+"
    assert {"avx2", "fma", "f16c", "avx512_vnni", "amx_tile", "amx_int8", "sse4_2"} <= set(flags)
    assert "hypervisor" not in flags and "fpu" not in flags
    assert flags == sorted(flags)


def test_parse_cpuinfo_arm_has_no_guessed_model() -> None:
    model, flags = parse_cpuinfo(ARM_CPUINFO)
    assert model is None
    assert {"asimd", "asimdhp", "asimddp", "sve", "i8mm", "bf16"} <= set(flags)


def test_parse_cpuinfo_empty() -> None:
    assert parse_cpuinfo("") == (None, [])


def test_caches_from_sysfs_fixture(tmp_path: Path) -> None:
    for i, (level, kind, size) in enumerate([("1", "Data", "48K"), ("1", "Instruction", "32K"),
                                             ("2", "Unified", "2048K"), ("3", "Unified", "105M")]):  # fmt: skip
        d = tmp_path / "cache" / f"index{i}"
        _write(d / "level", level)
        _write(d / "type", kind)
        _write(d / "size", size)
    assert read_caches(tmp_path) == {
        "L1d_bytes": 48 * 1024,
        "L1i_bytes": 32 * 1024,
        "L2_bytes": 2048 * 1024,
        "L3_bytes": 105 * 1024 * 1024,
    }
    assert read_caches(tmp_path / "missing") is None
    assert parse_cache_size("512") == 512


def test_smt_and_numa_from_sysfs_fixture(tmp_path: Path) -> None:
    cpu = tmp_path / "cpu"
    _write(cpu / "cpu0/topology/thread_siblings_list", "0,2")
    _write(cpu / "cpu1/topology/thread_siblings_list", "1,3")
    assert read_smt_active(cpu) is True
    nosmt = tmp_path / "nosmt"
    _write(nosmt / "cpu0/topology/thread_siblings_list", "0")
    _write(nosmt / "cpu1/topology/thread_siblings_list", "1")
    assert read_smt_active(nosmt) is False
    assert read_smt_active(tmp_path / "missing") is None

    node = tmp_path / "node"
    _write(node / "node1/cpulist", "4-7")
    _write(node / "node0/cpulist", "0-3")
    assert read_numa_nodes(node) == {"0": [0, 1, 2, 3], "1": [4, 5, 6, 7]}
    assert read_numa_nodes(tmp_path / "missing") is None


# --- collect_system ---------------------------------------------------------------------------------


def test_physical_cores_unknown_is_none(monkeypatch: pytest.MonkeyPatch) -> None:
    def fake_cpu_count(logical: bool = True) -> int | None:
        return 8 if logical else None

    monkeypatch.setattr(psutil, "cpu_count", fake_cpu_count)
    monkeypatch.setattr(system, "read_smt_active", lambda *a, **k: None)
    info = collect_system(refresh=True)
    try:
        assert info.physical_cores is None
        assert info.logical_cores == 8
        assert info.smt_active is None  # neither sysfs nor physical/logical can tell
        assert info.effective_cpus >= 1
    finally:
        monkeypatch.undo()
        collect_system(refresh=True)


def _fake_pynvml(fail_at: str | None = None) -> types.ModuleType:
    mod = types.ModuleType("pynvml")

    def call(name: str, value: object) -> Callable[..., object]:
        def fn(*args: object) -> object:
            if name == fail_at:
                raise RuntimeError("NVML error")
            return value

        return fn

    mem = types.SimpleNamespace(total=141 * 2**30)
    for name, value in [("nvmlInit", None), ("nvmlShutdown", None), ("nvmlSystemGetDriverVersion", b"570.1"),
                        ("nvmlDeviceGetCount", 2), ("nvmlDeviceGetHandleByIndex", object()),
                        ("nvmlDeviceGetName", b"NVIDIA H200"), ("nvmlDeviceGetMemoryInfo", mem)]:  # fmt: skip
        setattr(mod, name, call(name, value))
    return mod


def test_gpus_from_fake_nvml(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", _fake_pynvml())
    gpus = system.collect_gpus()
    assert [(g.index, g.name, g.memory_bytes, g.driver) for g in gpus] == [
        (0, "NVIDIA H200", 141 * 2**30, "570.1"),
        (1, "NVIDIA H200", 141 * 2**30, "570.1"),
    ]


@pytest.mark.parametrize("fail_at", ["nvmlInit", "nvmlDeviceGetCount", "nvmlDeviceGetName"])
def test_gpus_nvml_failure_gives_empty(monkeypatch: pytest.MonkeyPatch, fail_at: str) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", _fake_pynvml(fail_at))
    assert system.collect_gpus() == []


def test_gpus_without_pynvml(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", None)  # import raises ImportError
    assert system.collect_gpus() == []


def test_collect_system_on_this_machine() -> None:
    info = collect_system(refresh=True)
    assert isinstance(info, SystemInfo)
    assert info.logical_cores >= 1
    assert info.effective_cpus >= 1
    assert info.cpu_affinity and info.effective_cpus <= len(info.cpu_affinity)
    assert info.python and info.os
    assert "pydantic" in info.packages and "psutil" in info.packages
    SystemInfo.model_validate_json(info.model_dump_json())  # round-trips
    assert default_intra_op_threads(info) == info.effective_cpus
    assert default_intra_op_threads() >= 1


def test_collect_system_is_cached_but_returns_copies() -> None:
    a = collect_system()
    a.isa_flags.append("mutated")
    assert "mutated" not in collect_system().isa_flags


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity") or len(os.sched_getaffinity(0)) < 2,
                    reason="needs 2 CPUs in this process's affinity")
def test_an_inventory_read_while_pinned_is_not_kept_after_the_pinning_ends() -> None:
    """Issue 36 item 5: plan --validate pins itself to the load's CPUs; the inventory first read there was kept for
    the process, so the validation was filed under a 1-CPU machine's fingerprint that no later plan matched."""
    from inferperf.system import machine_fingerprint

    full = sorted(os.sched_getaffinity(0))
    collect_system(refresh=True)
    unpinned = machine_fingerprint()
    os.sched_setaffinity(0, full[-1:])
    try:
        pinned = collect_system()
        assert pinned.cpu_affinity == full[-1:] and pinned.effective_cpus == 1
        assert machine_fingerprint() != unpinned
    finally:
        os.sched_setaffinity(0, full)
    again = collect_system()
    assert again.cpu_affinity == full and machine_fingerprint(again) == unpinned
