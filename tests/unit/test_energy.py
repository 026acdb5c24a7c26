"""Energy counters (issue 31 item 2) on a fixture powercap tree and a stand-in NVML: counters, wraparound,
missing files, no permission, no powercap, no GPU; idle power subtracted on the fake clock."""

from __future__ import annotations

import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from inferperf.clock import FakeClock
from inferperf.measure import energy
from inferperf.measure.energy import (Domain, EnergyMeter, counter_delta_uj, energy_block, measure_idle,
                                      nvml_domains, rapl_domains)

RANGE = 262_143_328_850  # a real package's max_energy_range_uj


def _zone(root: Path, zone: str, name: str, energy_uj: int | None, max_range: int | None = RANGE) -> Path:
    d = root / zone
    d.mkdir(parents=True)
    (d / "name").write_text(name + "\n")
    if energy_uj is not None:
        (d / "energy_uj").write_text(f"{energy_uj}\n")
    if max_range is not None:
        (d / "max_energy_range_uj").write_text(f"{max_range}\n")
    return d


@pytest.fixture
def powercap(tmp_path: Path) -> Path:
    root = tmp_path / "powercap"
    (root / "intel-rapl").mkdir(parents=True)  # the control type: no counter, not a zone
    _zone(root, "intel-rapl:0", "package-0", 1_000_000)
    _zone(root, "intel-rapl:0:0", "core", RANGE - 500_000)  # about to wrap
    _zone(root, "intel-rapl:1", "package-1", None)  # no energy_uj
    _zone(root, "intel-rapl:0:1", "dram", 5, max_range=None)  # no range: a wrap could not be corrected
    return root


def test_counter_delta_corrects_one_wraparound() -> None:
    assert counter_delta_uj(100, 350, RANGE) == 250
    assert counter_delta_uj(RANGE - 500_000, 1_500_000, RANGE) == 2_000_000
    assert counter_delta_uj(7, 7, None) == 0
    with pytest.raises(ValueError, match="went down"):
        counter_delta_uj(10, 5, None)


def test_the_fixture_tree_gives_the_readable_zones_and_says_why_not_for_the_others(powercap: Path) -> None:
    found, missing = rapl_domains(powercap)
    assert [(d.domain, d.name, d.max_range_uj) for d in found] == [("intel-rapl:0", "package-0", RANGE),
                                                                    ("intel-rapl:0:0", "core", RANGE)]
    why = {u.domain: u.reason for u in missing}
    assert set(why) == {"intel-rapl:1", "intel-rapl:0:1"}
    assert "energy_uj unreadable" in why["intel-rapl:1"]
    assert "max_energy_range_uj unreadable" in why["intel-rapl:0:1"] and "wraparound" in why["intel-rapl:0:1"]


def test_the_meter_adds_the_deltas_across_a_wraparound(powercap: Path) -> None:
    meter = EnergyMeter.open(powercap, gpu=False)
    meter.start()
    (powercap / "intel-rapl:0" / "energy_uj").write_text("3000000\n")
    (powercap / "intel-rapl:0:0" / "energy_uj").write_text("1500000\n")  # wrapped: 500000 before, 1500000 after
    meter.sample()
    (powercap / "intel-rapl:0" / "energy_uj").write_text("4000000\n")
    meter.sample()
    assert meter.totals_uj() == {"intel-rapl:0": 3_000_000, "intel-rapl:0:0": 2_000_000}
    (powercap / "intel-rapl:0" / "energy_uj").unlink()  # gone mid-way: dropped, with the error
    meter.sample()
    assert meter.totals_uj()["intel-rapl:0"] is None
    assert any(u.domain == "intel-rapl:0" and "read failed" in u.reason for u in meter.unavailable)


def test_no_powercap_and_no_permission_are_reasons_not_errors(tmp_path: Path, powercap: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    found, missing = rapl_domains(tmp_path / "absent")
    assert found == [] and "no powercap in this system" in missing[0].reason
    (tmp_path / "empty").mkdir()
    assert "no RAPL zone" in rapl_domains(tmp_path / "empty")[1][0].reason
    real = energy._read_int

    def root_only(path: Path) -> int:
        if path.name == "energy_uj":
            raise PermissionError(13, "Permission denied", str(path))
        return real(path)

    monkeypatch.setattr(energy, "_read_int", root_only)
    found, missing = rapl_domains(powercap)
    assert found == []
    perm = [u for u in missing if u.domain == "intel-rapl:0"][0]
    assert "no permission to read" in perm.reason and "CVE-2020-8694" in perm.reason


class _FakeNvml:
    """Two GPUs: 0 has an energy counter (mJ), 1 does not."""

    def __init__(self) -> None:
        self.mj = 5_000

    def nvmlInit(self) -> None:
        pass

    def nvmlDeviceGetCount(self) -> int:
        return 2

    def nvmlDeviceGetHandleByIndex(self, i: int) -> int:
        return i

    def nvmlDeviceGetName(self, h: int) -> bytes:
        return b"Fake GPU"

    def nvmlDeviceGetTotalEnergyConsumption(self, h: int) -> int:
        if h == 1:
            raise RuntimeError("Not Supported")
        return self.mj


def test_nvml_energy_per_gpu_and_the_reasons_when_there_is_none(monkeypatch: pytest.MonkeyPatch) -> None:
    nv = _FakeNvml()
    found, missing = nvml_domains(nv)
    assert [(d.domain, d.name, d.max_range_uj) for d in found] == [("nvml:0", "Fake GPU", None)]
    assert missing[0].domain == "nvml:1" and "no energy counter" in missing[0].reason
    meter = EnergyMeter(found, missing)
    meter.start()
    nv.mj += 1_250
    meter.sample()
    assert meter.totals_uj() == {"nvml:0": 1_250_000}
    monkeypatch.setitem(sys.modules, "pynvml", None)  # import pynvml -> ImportError
    assert "pynvml not installed" in nvml_domains()[1][0].reason
    no_driver = SimpleNamespace(nvmlInit=lambda: (_ for _ in ()).throw(OSError("libnvidia-ml.so.1 not found")))
    assert "no GPU: NVML did not start" in nvml_domains(no_driver)[1][0].reason


def _steady(clock: FakeClock, watts: list[float]) -> Domain:
    """A counter drawing ``watts[0]`` W from the fake clock's time (``watts`` mutable: change the draw)."""
    state = {"uj": 0.0, "t": clock.now_ns()}

    def read() -> int:
        now = clock.now_ns()
        state["uj"] += watts[0] * (now - state["t"]) / 1e3  # W x ns x 1e-9 s/ns x 1e6 uJ/J
        state["t"] = now
        return int(state["uj"])

    return Domain("intel-rapl:0", "package-0", "rapl", read, RANGE)


def test_idle_power_is_measured_and_subtracted_per_inference_on_the_fake_clock() -> None:
    clock = FakeClock(start_ns=10**9)
    watts = [10.0]
    meter = EnergyMeter([_steady(clock, watts)], [energy.Unavailable("nvml", "nvml", "no GPU: test")])
    idle = measure_idle(meter, 1.0, clock)
    assert idle["intel-rapl:0"] == pytest.approx((10.0, 10.0, 10.0))
    watts[0] = 25.0  # the model runs: 15 W over idle
    meter.start()
    clock.advance_ns(2 * 10**9)
    meter.sample()
    block = energy_block(meter, idle, 1.0, window_s=2.0, inferences=100)
    pkg = block["domains"][0]
    assert pkg["status"] == "measured" and pkg["energy_j"] == pytest.approx(50.0)
    assert pkg["power_w"] == pytest.approx(25.0) and pkg["active_energy_j"] == pytest.approx(30.0)
    assert pkg["joules_per_inference"] == pytest.approx(0.3)
    assert pkg["joules_per_inference_ci95"] == pytest.approx([0.3, 0.3])
    assert block["domains"][1] == {"domain": "nvml", "name": None, "source": "nvml", "status": "unavailable",
                                   "reason": "no GPU: test"}
    assert any("whole socket" in n for n in block["notes"])
    assert not any("load client" in n for n in block["notes"])  # must-say-no: no client here
    shared = energy_block(meter, idle, 1.0, window_s=2.0, inferences=100, client_shares_package=True)
    assert any("counts the client too" in n for n in shared["notes"])  # must-say-yes


def test_a_noisy_idle_gives_an_interval_that_carries_into_joules_per_inference() -> None:
    clock = FakeClock()
    watts = [10.0]
    draws = iter([8.0, 12.0, 9.0, 11.0, 10.0])

    meter = EnergyMeter([_steady(clock, watts)], [])

    def sleep(seconds: float) -> None:
        watts[0] = next(draws)
        clock.advance_ns(round(seconds * 1e9))

    clock.sleep = sleep  # type: ignore[method-assign]
    idle = measure_idle(meter, 1.0, clock)
    mean, lo, hi = idle["intel-rapl:0"]
    assert mean == pytest.approx(10.0) and lo < 10.0 < hi
    meter.start()
    watts[0] = 20.0
    clock.advance_ns(10**9)
    meter.sample()
    row = energy_block(meter, idle, 1.0, window_s=1.0, inferences=10)["domains"][0]
    assert row["joules_per_inference"] == pytest.approx(1.0)
    jlo, jhi = row["joules_per_inference_ci95"]
    assert jlo == pytest.approx((20.0 - hi) / 10) and jhi == pytest.approx((20.0 - lo) / 10)


def test_repeats_pool_energy_over_runs_with_an_interval_between_them() -> None:
    from inferperf.measure.energy_pool import pool_energy

    def run(e_j: float, idle_w: float, n: int) -> dict:
        row = {"domain": "intel-rapl:0", "name": "package-0", "source": "rapl", "status": "measured",
               "energy_j": e_j, "power_w": e_j, "idle_power_w": idle_w, "idle_power_w_ci95": [idle_w, idle_w],
               "active_energy_j": e_j - idle_w, "joules_per_inference": (e_j - idle_w) / n,
               "joules_per_inference_ci95": [(e_j - idle_w) / n] * 2}
        gone = {"domain": "nvml", "name": None, "source": "nvml", "status": "unavailable", "reason": "no GPU"}
        return {"window_s": 1.0, "inferences": n, "idle_s": 1.0, "domains": [row, gone], "notes": ["a"]}

    pooled = pool_energy([run(30.0, 10.0, 100), run(50.0, 10.0, 100)])  # 0.2 and 0.4 J per inference
    pkg, gpu = pooled["domains"]
    assert pooled["window_s"] == 2.0 and pooled["inferences"] == 200 and pooled["notes"] == ["a"]
    assert pkg["energy_j"] == 80.0 and pkg["active_energy_j"] == 60.0
    assert pkg["joules_per_inference"] == pytest.approx(0.3) and pkg["per_run"] == pytest.approx([0.2, 0.4])
    lo, hi = pkg["joules_per_inference_ci95"]
    assert lo < 0.2 and hi > 0.4  # two runs: a wide t interval
    assert gpu["status"] == "unavailable" and gpu["reason"] == "no GPU"
    assert pool_energy([None, None]) is None
