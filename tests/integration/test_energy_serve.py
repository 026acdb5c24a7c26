"""Energy in the serve Result (issue 31 item 2): the counters are metered from the serving window's start; a
fixture powercap tree's counter moving by 2 J while the server answers is 2 J in ``metrics.energy``."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from inferperf.config import BenchConfig
from inferperf.measure import energy
from inferperf.serve.result import serve_result
from inferperf.serve.server import serving
from tests.models import seeded_mlp_onnx
from tests.powercap import package_tree, set_counter

CFG = BenchConfig.model_validate({"session": {"intra_op_num_threads": 1}, "warmup": {"iterations": 1}})
BODY = {"inputs": [{"name": "x", "datatype": "FP32", "shape": [1, 32], "data": [0.5] * 32}]}


def test_the_serving_window_is_metered(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    tree = package_tree(tmp_path / "powercap", energy_uj=1_000)
    monkeypatch.setattr(energy, "POWERCAP_ROOT", tree)
    mlp = seeded_mlp_onnx(tmp_path / "mlp.onnx")
    with serving(str(mlp), CFG, name="mlp") as handle:
        for _ in range(3):
            assert httpx.post(f"{handle.url}/v2/models/mlp/infer", json=BODY, timeout=10).status_code == 200
        set_counter(tree, "intel-rapl:0", 2_001_000)  # atomic: the window samples meanwhile
        block = serve_result(handle.app, str(mlp), CFG).metrics.energy
    pkg = [d for d in block["domains"] if d["domain"] == "intel-rapl:0"][0]
    assert pkg["status"] == "measured" and pkg["energy_j"] == pytest.approx(2.0)
    assert block["inferences"] == 3 and block["window_s"] > 0
    assert pkg["idle_power_w"] is None and pkg["joules_per_inference"] is None
    assert any("no idle power measured" in n for n in block["notes"])


def test_without_counters_the_serve_result_says_why(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(energy, "POWERCAP_ROOT", tmp_path / "absent")
    mlp = seeded_mlp_onnx(tmp_path / "mlp.onnx")
    with serving(str(mlp), CFG, name="mlp") as handle:
        block = serve_result(handle.app, str(mlp), CFG).metrics.energy
    assert {d["status"] for d in block["domains"]} == {"unavailable"}
    assert any("no powercap in this system" in d["reason"] for d in block["domains"])


def test_the_reader_thread_ends_with_the_servers_metrics(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import gc

    from inferperf.serve.metrics import ServerMetrics

    monkeypatch.setattr(energy, "POWERCAP_ROOT", package_tree(tmp_path / "powercap"))
    m = ServerMetrics()
    m.start_window()
    thread = m.energy._thread
    assert thread.is_alive()
    del m
    gc.collect()
    thread.join(timeout=5)  # bounded: the finalizer set its stop event
    assert not thread.is_alive()
