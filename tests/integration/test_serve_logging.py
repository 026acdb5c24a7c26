"""Triton's logging extension on a running server (issue 41 item 5): ``GET/POST /v2/logging`` and gRPC
``LogSettings`` change what the server writes at run time; the server metadata lists ``logging``."""

from __future__ import annotations

import logging

import grpc
import httpx
import numpy as np
import pytest

from inferperf.config import BenchConfig
from inferperf.serve.options import ServeOptions
from inferperf.serve.server import prepare, start
from inferperf.workload.triton_protos import message
from tests.models import seeded_mlp_onnx

BODY = {"inputs": [{"name": "x", "datatype": "FP32", "shape": [1, 32], "data": np.ones(32).tolist()}]}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory):
    mlp = seeded_mlp_onnx(tmp_path_factory.mktemp("logging") / "mlp.onnx")
    app = prepare(str(mlp), BenchConfig.model_validate({"warmup": {"iterations": 1}}), ServeOptions(), name="mlp")
    handle = start(app, "127.0.0.1", 0, ready_timeout_s=60, grpc_port=0)
    try:
        yield handle
    finally:
        handle.stop()


def _verbose_lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "inferperf.serve" and r.levelno < logging.INFO]


def test_verbose_level_1_writes_one_line_per_request_and_0_none(server, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(1, logger="inferperf.serve")
    url = server.url
    assert "logging" in httpx.get(f"{url}/v2", timeout=10).json()["extensions"]
    got = httpx.get(f"{url}/v2/logging", timeout=10).json()
    assert got == {"log_file": "", "log_info": True, "log_warnings": True, "log_errors": True,
                   "log_verbose_level": 0, "log_format": "default"}
    caplog.clear()
    assert httpx.post(f"{url}/v2/models/mlp/infer", json=BODY, timeout=10).status_code == 200
    assert _verbose_lines(caplog) == []
    r = httpx.post(f"{url}/v2/logging", json={"log_verbose_level": 1, "log_format": "ISO8601"}, timeout=10)
    assert r.status_code == 200 and r.json()["log_verbose_level"] == 1 and r.json()["log_format"] == "ISO8601"
    caplog.clear()
    for _ in range(3):
        assert httpx.post(f"{url}/v2/models/mlp/infer", json=BODY, timeout=10).status_code == 200
    lines = _verbose_lines(caplog)
    assert len(lines) == 3 and all(line.startswith("infer model 'mlp': status 200 in ") for line in lines)
    bad = httpx.post(f"{url}/v2/logging", json={"log_verbose_level": -1}, timeout=10)
    assert bad.status_code == 400 and "integer >= 0" in bad.json()["error"]
    assert httpx.post(f"{url}/v2/logging", content=b"[1]", timeout=10).status_code == 400
    r = httpx.post(f"{url}/v2/logging", json={"log_verbose_level": 0, "log_format": "default"}, timeout=10)
    caplog.clear()
    assert httpx.post(f"{url}/v2/models/mlp/infer", json=BODY, timeout=10).status_code == 200
    assert _verbose_lines(caplog) == []


def test_grpc_log_settings_reads_and_changes_the_same_settings(server) -> None:
    Req, Resp = message("inference.LogSettingsRequest"), message("inference.LogSettingsResponse")  # noqa: N806
    with grpc.insecure_channel(f"127.0.0.1:{server.grpc_port}") as ch:
        call = ch.unary_unary("/inference.GRPCInferenceService/LogSettings",
                              request_serializer=Req.SerializeToString, response_deserializer=Resp.FromString)
        req = Req()
        req.settings["log_info"].bool_param = False
        req.settings["log_verbose_level"].uint32_param = 2
        resp = call(req, timeout=10)
        assert resp.settings["log_info"].bool_param is False and resp.settings["log_verbose_level"].uint32_param == 2
        assert resp.settings["log_format"].string_param == "default"
        assert httpx.get(f"{server.url}/v2/logging", timeout=10).json()["log_verbose_level"] == 2
        wrong = Req()
        wrong.settings["log_errors"].string_param = "yes"
        with pytest.raises(grpc.RpcError) as e:
            call(wrong, timeout=10)
        assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT and "must be a boolean" in e.value.details()
        reset = Req()
        reset.settings["log_info"].bool_param = True
        reset.settings["log_verbose_level"].uint32_param = 0
        call(reset, timeout=10)
