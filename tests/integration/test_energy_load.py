"""Energy in load Results (issue 31 item 2): a local target is metered by this machine's counters, and a
package counter then counts the load client too (the block says so); a target on another machine is unavailable
with that reason and costs no idle second."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from inferperf.loadgen.energy import StepEnergy, target_is_local
from inferperf.loadgen.options import LoadConfig
from inferperf.loadgen.run import load
from inferperf.measure import energy
from tests.powercap import package_tree

FAST = {"warmup_s": 0.2, "duration_s": 0.6, "measurement_interval_ms": 300, "energy_idle_s": 0.05}



def test_a_local_target_is_metered_and_the_shared_socket_is_named(server, tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(energy, "POWERCAP_ROOT", package_tree(tmp_path / "powercap"))
    (r,) = load(LoadConfig(url=server.url, model="mlp", concurrency=[1], **FAST))
    block = r.metrics.energy
    pkg = [d for d in block["domains"] if d["domain"] == "intel-rapl:0"][0]
    assert pkg["status"] == "measured" and pkg["idle_power_w"] == 0.0 and pkg["joules_per_inference"] == 0.0
    assert block["inferences"] >= r.metrics.latency_ms.count > 0  # every 2xx answer of the step, warm-up too
    assert block["window_s"] >= r.metrics.throughput.duration_s and block["idle_s"] == 0.05
    assert any("counts the client too" in n for n in block["notes"])


def test_without_counters_every_domain_says_why(server, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(energy, "POWERCAP_ROOT", tmp_path / "absent")
    (r,) = load(LoadConfig(url=server.url, model="mlp", concurrency=[1], **FAST))
    reasons = [d["reason"] for d in r.metrics.energy["domains"]]
    assert all(d["status"] == "unavailable" for d in r.metrics.energy["domains"])
    assert any("no powercap in this system" in x for x in reasons) and r.metrics.energy["idle_s"] is None


def test_a_target_on_another_machine_is_not_metered_from_here(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(energy, "POWERCAP_ROOT", package_tree(tmp_path / "powercap"))
    assert target_is_local("http://127.0.0.1:8000") and target_is_local("http://localhost:1")
    assert target_is_local("http://[::1]:8000")
    assert not target_is_local("http://203.0.113.7:8000")  # TEST-NET-3: never this machine
    remote = StepEnergy("http://203.0.113.7:8000", idle_s=5.0)
    assert remote.meter is None and remote.idle is None  # no idle second spent
    with remote.metering():
        pass
    block = remote.block(np.array([200], dtype=np.int16))
    assert "another machine" in block["domains"][0]["reason"] and block["domains"][0]["status"] == "unavailable"
