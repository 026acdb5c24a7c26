"""Energy in bench Results (issue 31 item 2): every domain measured or unavailable with the reason; on a fixture
powercap tree the package is measured with its idle power; on this machine (no powercap) the reason says so."""

from __future__ import annotations

from pathlib import Path

import pytest

from inferperf.clock import FakeClock
from inferperf.config import BenchConfig, StopOptions, WarmupOptions
from inferperf.measure import energy
from inferperf.measure.bench import run_once
from tests.powercap import package_tree

QUICK = {"backend": "null", "null_latency_ms": [0.2], "warmup": WarmupOptions(iterations=2),
         "stop": StopOptions(min_iterations=20, min_duration_s=0.05, max_duration_s=10)}



def test_a_readable_package_counter_is_measured_with_idle_power(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(energy, "POWERCAP_ROOT", package_tree(tmp_path / "powercap"))
    r = run_once("null", BenchConfig(energy_idle_s=0.05, **QUICK))
    block = r.metrics.energy
    pkg = [d for d in block["domains"] if d["domain"] == "intel-rapl:0"][0]
    assert pkg["status"] == "measured" and pkg["name"] == "package-0"
    assert pkg["energy_j"] == 0.0 and pkg["idle_power_w"] == 0.0  # the fixture's counter never moves
    assert pkg["joules_per_inference"] == 0.0 and pkg["joules_per_inference_ci95"] == [0.0, 0.0]
    assert block["inferences"] == r.metrics.latency_ms.count and block["window_s"] > 0
    assert block["idle_s"] == 0.05
    assert any("whole socket" in n for n in block["notes"])
    nvml = [d for d in block["domains"] if d["source"] == "nvml"]
    assert nvml and all(d["status"] == "unavailable" and d["reason"] for d in nvml)


def test_without_powercap_or_sampler_every_domain_says_why(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(energy, "POWERCAP_ROOT", tmp_path / "absent")
    block = run_once("null", BenchConfig(**QUICK)).metrics.energy
    assert {d["status"] for d in block["domains"]} == {"unavailable"}
    assert any("no powercap in this system" in d["reason"] for d in block["domains"])
    assert block["idle_s"] is None  # nothing to measure: no idle second spent
    off = run_once("null", BenchConfig(sampler=False, **QUICK)).metrics.energy
    assert "--no-sampler" in off["domains"][0]["reason"]
    fake = run_once("null", BenchConfig(**QUICK), clock=FakeClock()).metrics.energy
    assert "fake clock" in fake["domains"][0]["reason"]


def test_a_pipeline_run_is_metered_too(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every Result kind that runs a model says what energy it measured: the pipeline's run, over its window."""
    from inferperf.pipeline.run import run_pipeline
    from tests.integration.test_pipeline_engine import fn, quick, spec

    monkeypatch.setattr(energy, "POWERCAP_ROOT", package_tree(tmp_path / "powercap"))
    monkeypatch.setattr("inferperf.pipeline.run.DEFAULT_IDLE_S", 0.05)
    [r] = run_pipeline(spec(fn("double", "double")), quick(concurrency=1))
    block = r.metrics.energy
    pkg = [d for d in block["domains"] if d["domain"] == "intel-rapl:0"][0]
    assert pkg["status"] == "measured" and pkg["idle_power_w"] == 0.0
    assert block["inferences"] == r.metrics.latency_ms.count + r.config.warmup.iterations and block["window_s"] > 0
