"""``inferperf load grpc://HOST:PORT`` against ``inferperf serve``'s gRPC service on 127.0.0.1 (issue 40 item 3):
the same closed and open loops, step verdicts, statistics and refusals as HTTP load; loose bounds, no speed claims.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

from inferperf.config import BenchConfig
from inferperf.errors import UsageError
from inferperf.loadgen.options import LoadConfig
from inferperf.loadgen.run import load
from inferperf.serve.options import ServeOptions
from inferperf.serve.server import serving
from tests.integration.test_serve_app import StandIn
from tests.models import seeded_mlp_onnx

FAST = {"warmup_s": 0.3, "duration_s": 1.5, "measurement_interval_ms": 500}


@pytest.fixture(scope="module")
def mlp(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    path = seeded_mlp_onnx(tmp_path_factory.mktemp("load-grpc") / "mlp.onnx")
    cfg = BenchConfig.model_validate({"session": {"intra_op_num_threads": 1}, "warmup": {"iterations": 1}})
    with serving(str(path), cfg, ServeOptions(max_batch_size=4), name="mlp", grpc_port=0) as handle:
        yield handle


def _url(handle: Any) -> str:
    return f"grpc://127.0.0.1:{handle.grpc_port}"


@pytest.mark.parametrize("streaming", [False, True])
def test_closed_loop_over_grpc_with_its_server_block(mlp, streaming: bool) -> None:  # noqa: ANN001
    before = mlp.metrics.value("requests", "mlp", "200")
    (r,) = load(LoadConfig(url=_url(mlp), model="mlp", concurrency=[2], streaming=streaming, **FAST))
    assert r.kind == "load" and r.config.scenario == "concurrent" and r.config.concurrency == 2
    assert r.metrics.errors.count == 0 and r.metrics.latency_ms.count > 10
    assert r.config.backend == "grpc" and r.config.workload.protocol == ("grpc-stream" if streaming else "grpc")
    s = r.metrics.server
    assert s is not None and s["requests"] >= r.metrics.latency_ms.count  # ModelStatistics, differenced
    assert mlp.metrics.value("requests", "mlp", "200") - before >= r.metrics.latency_ms.count
    assert r.metrics.client["connections"]["peak"] == 2
    t = r.metrics.client["transport"]
    assert t["client"] == ("grpc.aio ModelStreamInfer" if streaming else "inferperf HTTP/2 ModelInfer")
    assert t["grpcio"] and t["protobuf"]  # the versions its figures depend on
    assert r.model.inputs[0].name == "x" and r.model.path.startswith("grpc://127.0.0.1:")


def test_open_loop_over_grpc(mlp) -> None:  # noqa: ANN001
    (r,) = load(LoadConfig(url=_url(mlp), model="mlp", request_rate=[50], arrival="poisson", **FAST))
    assert r.config.scenario == "server" and r.metrics.errors.count == 0
    assert 15 < r.metrics.client["send_rate"] < 120 and r.metrics.latency_ms.count > 10


def test_refusals_are_counted_by_their_grpc_code() -> None:
    """A server that refuses every request for back-pressure (queue full: UNAVAILABLE, HTTP's 503): each is an
    error of kind grpc_unavailable, none is a latency, and the step is not VALID."""
    from inferperf.serve.model import ModelMetadata, TensorMeta

    md = ModelMetadata("echo", ("1",), "python_model", (TensorMeta("f", "FP32", (-1, 3)),),
                       (TensorMeta("f2", "FP32", (-1, 3)),))
    with serving(StandIn(mode="full", metadata=md), grpc_port=0) as handle:
        (r,) = load(LoadConfig(url=_url(handle), model="echo", concurrency=[1], **FAST))
    e = r.metrics.errors
    assert e.count > 10 and set(e.by_kind) == {"grpc_unavailable"} and r.metrics.latency_ms.count == 0
    assert not r.validity.valid


def test_the_api_key_goes_as_call_metadata(tmp_path) -> None:  # noqa: ANN001
    from inferperf.loadgen.gen_target import read_load_target
    from inferperf.serve.build import prepare
    from inferperf.serve.server import start

    path = seeded_mlp_onnx(tmp_path / "mlp.onnx")
    app = prepare(str(path), BenchConfig.model_validate({"warmup": {"iterations": 1}}), ServeOptions(), name="mlp")
    app.require_api_key("k3y")
    handle = start(app, grpc_port=0)
    try:
        with pytest.raises(UsageError, match="UNAUTHENTICATED: missing API key"):
            read_load_target(LoadConfig(url=_url(handle), model="mlp", concurrency=[1]))
        (r,) = load(LoadConfig(url=_url(handle), model="mlp", concurrency=[1], headers=["Authorization:Bearer k3y"],
                               **FAST))
        assert r.metrics.errors.count == 0 and r.metrics.latency_ms.count > 5 and r.metrics.server is not None
    finally:
        handle.stop()


def test_what_cannot_be_loaded_is_one_line(mlp, tmp_path) -> None:  # noqa: ANN001
    from inferperf.loadgen.gen_target import read_load_target

    with pytest.raises(UsageError, match="model 'nope' is not served at grpc://.*NOT_FOUND: Request for unknown model"):
        read_load_target(LoadConfig(url=_url(mlp), model="nope", concurrency=[1]))
    with pytest.raises(UsageError, match="input 'x'"):
        read_load_target(LoadConfig(url=_url(mlp), model="mlp", concurrency=[1], shapes=["x:1x5"]))
    with pytest.raises(UsageError, match="unreachable"):
        from inferperf.loadgen.grpc_client import read_grpc_target

        read_grpc_target(LoadConfig(url="grpc://127.0.0.1:9", model="mlp", concurrency=[1]), timeout_s=1.0)
    for bad, words in (({"url": "http://127.0.0.1:1", "streaming": True}, "--streaming is gRPC's ModelStreamInfer"),
                       ({"url": _url(mlp), "protocol": "binary"}, "always sends raw contents"),
                       ({"url": _url(mlp), "body": str(tmp_path / "b")}, "drop --body")):
        with pytest.raises(ValueError, match=words):
            LoadConfig(model="mlp", concurrency=[1], **bad)


def test_payloads_are_the_http_loads_inputs_as_raw_contents(mlp) -> None:  # noqa: ANN001
    """The gRPC pool holds the same seeded inputs as the HTTP pool of the same settings, byte for byte."""
    from inferperf.loadgen.gen_target import read_load_target
    from inferperf.serve.grpc_tensors import decode_infer
    from inferperf.serve.tensor_types import TensorSpec
    from inferperf.workload.triton_protos import message

    g = read_load_target(LoadConfig(url=_url(mlp), model="mlp", concurrency=[1], input_pool_size=3, protocol="json"))
    h = read_load_target(LoadConfig(url=mlp.url, model="mlp", concurrency=[1], input_pool_size=3, protocol="binary"))
    assert g.shapes == h.shapes == [{"x": [1, 32]}] and len(g.payloads) == 3 and g.config["max_batch_size"] == 4
    spec = [TensorSpec("x", "FP32", (-1, 32))]
    for gp, hp in zip(g.payloads, h.payloads, strict=True):
        req = decode_infer(message("inference.ModelInferRequest").FromString(gp), spec, [], 4)
        assert req.inputs["x"].tobytes() in hp  # the HTTP request's binary tensor
        assert np.isfinite(req.inputs["x"]).all()
