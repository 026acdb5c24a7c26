"""Serving paths a new user hits first (issue 24 items 1-3), on a real local server (127.0.0.1, ephemeral port).

* a fresh server has warmed the whole path, app and batcher, before it says ready (item 1);
* a string (BYTES) model is served, warmed from ``workload.input_data``, and echoes JSON and binary
  tensors byte for byte (item 2);
* every backend answers one real request through ``serve`` (item 3: torch ``module:function`` and
  TorchScript models declare no outputs and answered 500).
"""

from __future__ import annotations

import struct
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import orjson
import pytest

from inferperf.config import BenchConfig
from inferperf.serve.options import ServeOptions
from inferperf.serve.server import prepare, serving, start
from tests.models import seeded_mlp_onnx

HL = "Inference-Header-Content-Length"
DELAY_US = 100_000


def _cfg(**extra: Any) -> BenchConfig:
    return BenchConfig.model_validate({"session": {"intra_op_num_threads": 1}, "warmup": {"iterations": 1}, **extra})


def string_identity_onnx(path: Path) -> Path:
    """ONNX ``t = Identity(s)``: ``s`` [batch, 2] STRING -> ``t`` [batch, 2] STRING."""
    import onnx
    from onnx import TensorProto, helper

    graph = helper.make_graph(
        [helper.make_node("Identity", ["s"], ["t"])], "string_identity",
        [helper.make_tensor_value_info("s", TensorProto.STRING, ["batch", 2])],
        [helper.make_tensor_value_info("t", TensorProto.STRING, ["batch", 2])],
    )  # fmt: skip
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, str(path))
    return path


# ------------------------------------------------------------------ item 1: the whole path is warm before ready


def test_a_fresh_server_sends_one_request_per_shape_through_the_app_and_batcher_before_ready(tmp_path) -> None:
    """Before ``start`` returns (ready), the batcher has dispatched one warm-up batch per shape (1 and 4 rows)
    whose requests came through the app (the client path's disconnect check asked: Starlette's, which this
    once was, imported anyio's backend on its first call, 15+ ms, which made the first client's batch late);
    no figure counts them; and the first client's
    batch then goes out by the delay rule on the batcher's clock, at or after its deadline."""
    mlp = seeded_mlp_onnx(tmp_path / "mlp.onnx")
    app = prepare(str(mlp), _cfg(), ServeOptions(max_batch_size=4, max_queue_delay_us=DELAY_US), name="mlp")
    model = app.models["mlp"]
    model.batcher.record = True
    asked: list[str] = []
    handle = start(app)
    try:
        warm = list(model.batcher.dispatched)
        for _, batch in warm:
            for r in batch:
                asked.append(type(getattr(r.is_disconnected, "__self__", None)).__name__)
        assert sorted(sum(r.rows for r in batch) for _, batch in warm) == [1, 4]  # one batch per shape
        assert asked == ["DisconnectWatch", "DisconnectWatch"]  # the client path's disconnect check
        stats = model.stats()
        assert stats["inference_count"] == 0 and stats["execution_count"] == 0
        assert app.metrics.window_summary()["request_ms"] is None
        counted = [line for line in app.metrics.exposition().decode().splitlines()
                   if line.startswith("inferperf_requests_total{")]
        assert counted and all(line.endswith(" 0.0") for line in counted), counted  # series at 0 (issue 41 item 6)

        x = np.linspace(-1, 1, 32, dtype=np.float32).reshape(1, 32)
        body = {"inputs": [{"name": "x", "datatype": "FP32", "shape": [1, 32], "data": x.ravel().tolist()}]}
        r = httpx.post(f"{handle.url}/v2/models/mlp/infer", json=body, timeout=30)
        assert r.status_code == 200
        dispatch_ns, batch = model.batcher.dispatched[len(warm)]
        assert [q.rows for q in batch] == [1]
        assert dispatch_ns >= batch[0].arrival_ns + DELAY_US * 1000  # the delay rule, on the batcher's clock
        assert model.stats()["execution_count"] == 1 and app.metrics.window_summary()["request_ms"]["count"] == 1
    finally:
        handle.stop()


def test_warmup_off_serves_at_once_and_says_so(tmp_path) -> None:
    from inferperf.serve.server import banner

    mlp = seeded_mlp_onnx(tmp_path / "mlp.onnx")
    app = prepare(str(mlp), _cfg(), ServeOptions(max_batch_size=4), name="mlp", warmup=False)
    model = app.models["mlp"]
    model.batcher.record = True
    assert model.warmup_feeds == []
    assert "warm-up off (--warmup 0)" in banner(app, "http://127.0.0.1:1")
    handle = start(app)
    try:
        assert model.batcher.dispatched == []
        body = {"inputs": [{"name": "x", "datatype": "FP32", "shape": [1, 32], "data": [0.5] * 32}]}
        assert httpx.post(f"{handle.url}/v2/models/mlp/infer", json=body, timeout=30).status_code == 200
    finally:
        handle.stop()


# ------------------------------------------------------------------ item 2: string (BYTES) models


def _bytes_blob(items: list[bytes]) -> bytes:
    return b"".join(struct.pack("<I", len(b)) + b for b in items)


def _split_bytes(blob: bytes) -> list[bytes]:
    out, pos = [], 0
    while pos < len(blob):
        (n,) = struct.unpack_from("<I", blob, pos)
        out.append(blob[pos + 4 : pos + 4 + n])
        pos += 4 + n
    return out


def test_a_string_model_is_warmed_from_input_data_and_echoes_json_and_binary(tmp_path) -> None:
    model = string_identity_onnx(tmp_path / "strings.onnx")
    data = tmp_path / "strings.npz"
    np.savez(data, s=np.array([["warm", "up"], ["héllo", "x"]]))
    cfg = _cfg(workload={"input_data": str(data)})
    with serving(str(model), cfg, ServeOptions(max_batch_size=4, max_queue_delay_us=1000), name="strings") as h:
        served = h.app.models["strings"]
        assert sorted(next(iter(f.values())).shape[0] for f in served.warmup_feeds) == [1, 4]
        meta = httpx.get(f"{h.url}/v2/models/strings", timeout=10).json()
        assert meta["inputs"] == [{"name": "s", "datatype": "BYTES", "shape": [-1, 2]}]
        assert meta["outputs"] == [{"name": "t", "datatype": "BYTES", "shape": [-1, 2]}]

        words = [["naïve", "café"], ["", "a b"], ["x" * 300, "ünï"]]
        body = {"inputs": [{"name": "s", "datatype": "BYTES", "shape": [3, 2], "data": words}]}
        r = httpx.post(f"{h.url}/v2/models/strings/infer", json=body, timeout=30)
        assert r.status_code == 200, r.text
        out = r.json()["outputs"][0]
        assert out["datatype"] == "BYTES" and out["shape"] == [3, 2]
        assert out["data"] == [w for row in words for w in row]

        items = ["naïve".encode(), b"", "中文".encode(), b"tab\there"]
        blob = _bytes_blob(items)
        head = orjson.dumps({"inputs": [{"name": "s", "datatype": "BYTES", "shape": [2, 2],
                                         "parameters": {"binary_data_size": len(blob)}}],
                             "outputs": [{"name": "t", "parameters": {"binary_data": True}}]})  # fmt: skip
        r = httpx.post(f"{h.url}/v2/models/strings/infer", content=head + blob, headers={HL: str(len(head))},
                       timeout=30)  # fmt: skip
        assert r.status_code == 200, r.text
        n = int(r.headers[HL])
        doc = orjson.loads(r.content[:n])
        assert doc["outputs"][0]["shape"] == [2, 2]
        assert _split_bytes(r.content[n:]) == items

        bad = _bytes_blob([b"\xff\xfe", b"ok"])
        head = orjson.dumps({"inputs": [{"name": "s", "datatype": "BYTES", "shape": [1, 2],
                                         "parameters": {"binary_data_size": len(bad)}}]})  # fmt: skip
        r = httpx.post(f"{h.url}/v2/models/strings/infer", content=head + bad, headers={HL: str(len(head))},
                       timeout=30)  # fmt: skip
        assert r.status_code == 400 and "not UTF-8" in r.json()["error"]


def test_a_string_model_without_data_names_both_ways_out(tmp_path) -> None:
    from inferperf.errors import UsageError

    model = string_identity_onnx(tmp_path / "strings.onnx")
    with pytest.raises(UsageError, match=r"--input-data FILE.npz .* or --warmup 0"):
        prepare(str(model), _cfg(), ServeOptions(max_batch_size=4), name="strings")


# ------------------------------------------------------------------ item 3: every backend through serve


def _post_x(url: str, name: str, shape: list[int]) -> httpx.Response:
    n = int(np.prod(shape))
    body = {"inputs": [{"name": "x", "datatype": "FP32", "shape": shape,
                        "data": np.linspace(-1, 1, n, dtype=np.float32).tolist()}]}  # fmt: skip
    return httpx.post(f"{url}/v2/models/{name}/infer", json=body, timeout=60)


@pytest.mark.parametrize("backend", ["onnxruntime", "openvino"])
def test_onnx_backends_answer_a_real_request_through_serve(tmp_path, backend: str) -> None:
    if backend == "openvino":
        pytest.importorskip("openvino")
    mlp = seeded_mlp_onnx(tmp_path / "mlp.onnx")
    cfg = _cfg(backend=backend)
    with serving(str(mlp), cfg, ServeOptions(max_batch_size=4), name="mlp") as h:
        r = _post_x(h.url, "mlp", [2, 32])
        assert r.status_code == 200, r.text
        outs = {o["name"]: o for o in r.json()["outputs"]}
        assert outs["y"]["shape"] == [2, 16] and outs["s"]["shape"] == [2, 1]
        x = np.linspace(-1, 1, 64, dtype=np.float32).reshape(2, 32)
        assert np.allclose(outs["s"]["data"], x.sum(axis=1), atol=1e-4)


def _torch_reference(shape: list[int]) -> np.ndarray:
    import torch

    from tests.models import seeded_cnn

    module, _ = seeded_cnn()
    x = torch.from_numpy(np.linspace(-1, 1, int(np.prod(shape)), dtype=np.float32).reshape(shape))
    with torch.inference_mode():
        return module(x).numpy()


@pytest.mark.parametrize("kind", ["module:function", "torchscript"])
def test_torch_models_without_declared_outputs_answer_through_serve(tmp_path, kind: str) -> None:
    """A ``module:function`` and a TorchScript file declare no outputs: the server probes them once
    (``output_0``, as the ONNX export names them), lists them in the metadata and answers 200 with the
    module's own numbers, for 2 concurrent-batchable rows (module:function) and the traced batch of 1."""
    pytest.importorskip("torch")
    if kind == "module:function":
        model, shape, opts = "tests.models:seeded_cnn", [2, 3, 32, 32], ServeOptions(max_batch_size=4)
    else:
        from inferperf.backends.torch_backend import save_torchscript
        from tests.models import seeded_cnn

        module, examples = seeded_cnn()
        model = str(save_torchscript(module, {"x": examples[0]}, tmp_path / "cnn.pt"))
        shape, opts = [1, 3, 32, 32], ServeOptions(max_batch_size=0)
    with serving(model, _cfg(backend="torch"), opts, name="cnn") as h:
        meta = httpx.get(f"{h.url}/v2/models/cnn", timeout=10).json()
        assert [o["name"] for o in meta["outputs"]] == ["output_0"]
        r = _post_x(h.url, "cnn", shape)
        assert r.status_code == 200, r.text
        (out,) = r.json()["outputs"]
        assert out["name"] == "output_0" and out["shape"] == [shape[0], 10]
        assert np.allclose(np.array(out["data"]).reshape(shape[0], 10), _torch_reference(shape), atol=1e-5)
