"""``inferperf serve --model-repository examples/repository``: three models (one in Triton's layout with two
versions) served by one server, each answering with its own file's outputs (issue 14, item 1)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import httpx
import numpy as np
import onnxruntime as ort
import pytest

from inferperf.serve.server import prepare_repository, start

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "repository"


@pytest.fixture(scope="module")
def repo_server():
    """The example repository served in this process on an ephemeral 127.0.0.1 port; stopped at the end."""
    warnings: list[str] = []
    app = prepare_repository(EXAMPLE, warn=warnings.append)
    handle = start(app, "127.0.0.1", 0, ready_timeout_s=60)
    try:
        yield handle, warnings
    finally:
        handle.stop()


def _expected(path: Path, x: np.ndarray) -> dict[str, np.ndarray]:
    s = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    return dict(zip([o.name for o in s.get_outputs()], s.run(None, {"x": x}), strict=True))


def _infer(url: str, x: np.ndarray) -> dict[str, np.ndarray]:
    body = {"inputs": [{"name": "x", "shape": list(x.shape), "datatype": "FP32", "data": x.ravel().tolist()}],
            "parameters": {"binary_data_output": False}}
    r = httpx.post(url, json=body, timeout=30)
    assert r.status_code == 200, r.text
    return {o["name"]: np.array(o["data"], np.float32).reshape(o["shape"]) for o in r.json()["outputs"]}


def test_every_model_and_version_answers_with_its_own_file(repo_server) -> None:
    handle, warnings = repo_server
    base = f"{handle.url}/v2/models"
    x = np.random.default_rng(3).standard_normal((3, 32)).astype(np.float32)
    got = {v: _infer(f"{base}/mlp_triton/versions/{v}/infer", x) for v in ("1", "2")}
    for v in ("1", "2"):
        want = _expected(EXAMPLE / "mlp_triton" / v / "model.onnx", x)
        np.testing.assert_allclose(got[v]["y"], want["y"], rtol=1e-5, atol=1e-6)
    assert not np.allclose(got["1"]["y"], got["2"]["y"])  # two seeds: the versions really differ
    np.testing.assert_allclose(_infer(f"{base}/mlp_triton/infer", x)["y"], got["2"]["y"], rtol=1e-6)  # default = highest
    np.testing.assert_allclose(_infer(f"{base}/mlp/infer", x)["y"], _expected(EXAMPLE / "mlp" / "model.onnx", x)["y"],
                               rtol=1e-5, atol=1e-6)
    x4 = np.arange(8, dtype=np.float32).reshape(2, 4)
    np.testing.assert_array_equal(_infer(f"{base}/scale/infer", x4)["y"], 2 * x4)
    assert warnings == [f"{EXAMPLE / 'mlp_triton' / 'config.pbtxt'}: inferperf ignores model_warmup"]


def test_metadata_config_and_unknown_versions(repo_server) -> None:
    handle, _ = repo_server
    base = f"{handle.url}/v2/models"
    meta = httpx.get(f"{base}/mlp_triton", timeout=10).json()
    assert meta["versions"] == ["1", "2"] and meta["inputs"] == [{"name": "x", "datatype": "FP32", "shape": [-1, 32]}]
    config = httpx.get(f"{base}/mlp_triton/config", timeout=10).json()
    assert config["max_batch_size"] == 4
    assert config["dynamic_batching"]["max_queue_delay_microseconds"] == 500
    assert config["dynamic_batching"]["preferred_batch_size"] == [4]
    assert config["instance_group"][0]["count"] == 2  # from config.pbtxt, not inferperf's defaults
    assert config["version_policy"] == {"specific": {"versions": [1, 2]}}
    r = httpx.get(f"{base}/mlp_triton/versions/3", timeout=10)
    assert r.status_code == 404 and "versions ['1', '2']" in r.json()["error"]
    assert httpx.get(f"{base}/nope", timeout=10).status_code == 404
    stats = httpx.get(f"{base}/stats", timeout=10).json()["model_stats"]
    assert sorted((s["name"], s["version"]) for s in stats) == [("mlp", "1"), ("mlp_triton", "1"), ("mlp_triton", "2"), ("scale", "1")]


@pytest.mark.parametrize(("args", "text"), [
    (["--model-repository", str(EXAMPLE), "--max-batch-size", "2"],
     "--max-batch-size with --model-repository: set them per model in its model.yaml"),
    (["zoo:tiny-cnn", "--model-repository", str(EXAMPLE)], "MODEL with --model-repository"),
    ([], "give a MODEL (ONNX file or zoo:NAME) or --model-repository DIR"),
    (["--model-repository", str(EXAMPLE / "nope")], "is not a folder"),
])
def test_repository_flag_errors_are_one_line_exit_2(args: list[str], text: str) -> None:
    proc = subprocess.run([sys.executable, "-m", "inferperf", "serve", *args], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1 and text in proc.stderr, proc.stderr
