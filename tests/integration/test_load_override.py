"""Load-time overrides (issue 41 item 3): Triton's ``config`` and ``file:`` load parameters, over HTTP and gRPC,
on ``inferperf serve --model-repository DIR --model-control-mode explicit``. The override replaces the folder's
configuration (it is not merged: the tensors are completed from the model), a malformed one is refused in
Triton's words ("failed to load") and the versions already serving stay."""

from __future__ import annotations

import base64
import json
import shutil
from pathlib import Path

import grpc
import httpx
import pytest

from inferperf.serve.options import ServeOptions
from inferperf.serve.server import prepare_repository, start
from inferperf.workload.triton_protos import message

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "repository"
X = {"inputs": [{"name": "x", "shape": [1, 32], "datatype": "FP32", "data": [0.5] * 32}]}


@pytest.fixture()
def served(tmp_path: Path):
    """The example repository (a copy) in explicit mode with gRPC on, mlp_triton loaded (max_batch_size 4)."""
    repo = tmp_path / "repo"
    shutil.copytree(EXAMPLE, repo)
    app = prepare_repository(repo, mode="explicit", load_models=["mlp_triton"])
    handle = start(app, "127.0.0.1", 0, ready_timeout_s=60, grpc_port=0)
    try:
        yield handle, repo
    finally:
        handle.stop()


def _load(url: str, name: str, **params: str) -> httpx.Response:
    return httpx.post(f"{url}/v2/repository/models/{name}/load", json={"parameters": params}, timeout=120)


def _config(url: str, name: str) -> dict:
    return httpx.get(f"{url}/v2/models/{name}/config", timeout=10).json()


def test_a_config_override_replaces_the_configuration_and_a_malformed_one_keeps_the_served_model(served) -> None:
    handle, _ = served
    url = handle.url
    assert _config(url, "mlp_triton")["max_batch_size"] == 4
    bad = _load(url, "mlp_triton", config='"parameters": {"config": {{"max_batch_size": "16"}}}')
    assert bad.status_code == 400 and bad.json()["error"].startswith("failed to load 'mlp_triton'"), bad.text
    assert "invalid config override" in bad.json()["error"]
    assert _config(url, "mlp_triton")["max_batch_size"] == 4  # still the folder's, still serving
    unknown = _load(url, "mlp_triton", config='{"max_batch_sized": 16}')
    assert unknown.status_code == 400 and "max_batch_sized" in unknown.json()["error"]

    r = _load(url, "mlp_triton", config='{"max_batch_size": "16"}')
    assert r.status_code == 200, r.text
    cfg = _config(url, "mlp_triton")
    assert cfg["max_batch_size"] == 16
    # replaced, not merged: the folder's dynamic batching and 2 instances are gone, the tensors are the model's
    assert "dynamic_batching" not in cfg and [i["count"] for i in cfg["instance_group"]] == [1]
    assert {t["name"] for t in cfg["input"]} == {"x"} and {t["name"] for t in cfg["output"]} == {"y", "s"}
    batch = {"inputs": [{"name": "x", "shape": [12, 32], "datatype": "FP32", "data": [0.5] * 32 * 12}]}
    assert httpx.post(f"{url}/v2/models/mlp_triton/infer", json=batch, timeout=10).status_code == 200
    # a plain load reads the folder's config again
    assert _load(url, "mlp_triton").status_code == 200 and _config(url, "mlp_triton")["max_batch_size"] == 4


def test_file_overrides_make_the_model_folder(served) -> None:
    """file:1/model.onnx (base64 over HTTP) with a config serves those bytes; without a config, with a path out
    of the folder, or with a name over NAME_MAX, it is refused (400, 400, 500) and the server keeps serving."""
    handle, repo = served
    url = handle.url
    onnx = base64.b64encode((repo / "mlp_triton" / "1" / "model.onnx").read_bytes()).decode()
    config = json.dumps({"max_batch_size": 2})
    r = _load(url, "scale", config=config, **{"file:1/model.onnx": onnx})
    assert r.status_code == 200, r.text
    assert _config(url, "scale")["max_batch_size"] == 2
    out = httpx.post(f"{url}/v2/models/scale/infer", json=X, timeout=10).json()
    assert {o["name"] for o in out["outputs"]} == {"y", "s"}  # mlp's file, under the name scale

    alone = _load(url, "mlp_triton", **{"file:1/model.onnx": onnx})
    assert alone.status_code == 400 and "need a 'config' override too" in alone.json()["error"]
    escape = _load(url, "mlp_triton", config="{}", **{"file:../../x.onnx": onnx})
    assert escape.status_code == 400 and "inside the model folder" in escape.json()["error"]
    long = _load(url, "mlp_triton", config="{}", **{"file:" + "A" * 256: base64.b64encode(b"a").decode()})
    assert long.status_code == 500 and "failed to poll from model repository" in long.json()["error"]
    not_b64 = _load(url, "mlp_triton", config="{}", **{"file:1/model.onnx": "not base64!"})
    assert not_b64.status_code == 400 and "base64" in not_b64.json()["error"]
    assert httpx.post(f"{url}/v2/models/mlp_triton/infer", json=X, timeout=10).status_code == 200
    layout = _load(url, "mlp", config="{}")
    assert layout.status_code == 400 and "Triton-layout" in layout.json()["error"]
    staged = Path(handle.app.control._staged["scale"].root)
    assert staged.is_dir()
    assert httpx.post(f"{url}/v2/repository/models/scale/unload", timeout=60).status_code == 200
    assert not staged.exists()  # the staging folder goes with the model


def test_the_override_over_grpc(served) -> None:
    """RepositoryModelLoad's parameters: config as string_param, files as bytes_param; a malformed config is
    INVALID_ARGUMENT with "failed to load", a name over NAME_MAX INTERNAL with Triton's words."""
    handle, repo = served
    Load = message("inference.RepositoryModelLoadRequest")  # noqa: N806
    with grpc.insecure_channel(f"127.0.0.1:{handle.grpc_port}") as ch:
        call = ch.unary_unary("/inference.GRPCInferenceService/RepositoryModelLoad",
                              request_serializer=Load.SerializeToString,
                              response_deserializer=message("inference.RepositoryModelLoadResponse").FromString)
        req = Load(model_name="mlp_triton")
        req.parameters["config"].string_param = '{"max_batch_size": 16}'
        call(req, timeout=120)
        assert _config(handle.url, "mlp_triton")["max_batch_size"] == 16
        req.parameters["config"].string_param = "{not json"
        with pytest.raises(grpc.RpcError) as e:
            call(req, timeout=60)
        assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT and "failed to load" in e.value.details()
        req.parameters["config"].string_param = "{}"
        req.parameters["file:" + "A" * 256].bytes_param = b"a"
        with pytest.raises(grpc.RpcError) as e:
            call(req, timeout=60)
        assert e.value.code() == grpc.StatusCode.INTERNAL
        assert "failed to poll from model repository" in e.value.details()
        bad_kind = Load(model_name="mlp_triton")
        bad_kind.parameters["config"].bytes_param = b"{}"
        with pytest.raises(grpc.RpcError) as e:
            call(bad_kind, timeout=60)
        assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT and "string parameter" in e.value.details()
    assert _config(handle.url, "mlp_triton")["max_batch_size"] == 16
