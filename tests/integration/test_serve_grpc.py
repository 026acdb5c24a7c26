"""KServe v2 / Triton gRPC beside HTTP (issue 40 item 1): the same models, checks, statuses and counters over
``inference.GRPCInferenceService`` (a grpc client on 127.0.0.1, an ephemeral port; the server always stopped).

Two models: the stand-in echo of test_serve_app (FP32 / INT64 / BYTES; its mode switches to queue-full) for the
protocol, and the real ``ServedModel`` over a seeded ONNX MLP for numbers checked against onnxruntime.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator
from typing import Any

import grpc
import httpx
import numpy as np
import orjson
import pytest

from inferperf.config import BenchConfig
from inferperf.errors import UsageError
from inferperf.serve.options import ServeOptions
from inferperf.serve.server import serving
from inferperf.workload.triton_protos import message, service
from tests.integration.test_serve_app import StandIn
from tests.models import seeded_mlp_onnx


class Stub:
    """Calls any RPC of the service by name with the vendored messages (what a generated stub does)."""

    def __init__(self, channel: grpc.Channel, key: str | None = None) -> None:
        self.channel = channel
        self.metadata = (("authorization", f"Bearer {key}"),) if key else None
        self.methods = {m.name: m for m in service().methods}

    def __call__(self, rpc: str, timeout: float = 30.0, **fields: Any) -> Any:
        m = self.methods[rpc]
        req, resp = message(m.input_type.full_name), message(m.output_type.full_name)
        call = self.channel.unary_unary(f"/inference.GRPCInferenceService/{rpc}",
                                        request_serializer=req.SerializeToString, response_deserializer=resp.FromString)
        msg = fields.pop("_msg", None) or req(**fields)
        return call(msg, timeout=timeout, metadata=self.metadata)

    def stream(self, requests: list[Any], timeout: float = 30.0) -> list[Any]:
        """ModelStreamInfer: send ``requests``, return every answer."""
        resp = message("inference.ModelStreamInferResponse")
        call = self.channel.stream_stream("/inference.GRPCInferenceService/ModelStreamInfer",
                                          request_serializer=message("inference.ModelInferRequest").SerializeToString,
                                          response_deserializer=resp.FromString)
        return list(call(iter(requests), timeout=timeout, metadata=self.metadata))


def infer_request(model: str, tensors: dict[str, np.ndarray], raw: bool = True, **kw: Any) -> Any:
    """A ModelInferRequest of ``tensors`` (name -> array; BYTES as object arrays), raw or typed contents."""
    from inferperf.serve.binary_tensors import binary_data
    from inferperf.serve.grpc_tensors import TYPED_FIELD
    from inferperf.serve.tensor_types import datatype_of

    msg = message("inference.ModelInferRequest")(model_name=model, **kw)
    for name, arr in tensors.items():
        dt = "BYTES" if arr.dtype == object else datatype_of(arr)
        t = msg.inputs.add(name=name, datatype=dt, shape=arr.shape)
        if raw:
            blob = binary_data(arr)
            msg.raw_input_contents.append(blob if isinstance(blob, bytes) else blob.tobytes())
        else:
            getattr(t.contents, TYPED_FIELD[dt]).extend(arr.ravel().tolist())
    return msg


def outputs_of(resp: Any) -> dict[str, np.ndarray]:
    """name -> array of a ModelInferResponse's raw outputs (BYTES as a list of bytes)."""
    from inferperf.serve.binary_tensors import decode_binary

    out = {}
    for t, raw in zip(resp.outputs, resp.raw_output_contents, strict=True):
        out[t.name] = decode_binary(t.name, raw, 0, len(raw), t.datatype, tuple(t.shape))
    return out


@pytest.fixture(scope="module")
def echo() -> Iterator[tuple[Any, StandIn, Stub]]:
    model = StandIn()
    with serving(model, grpc_port=0) as handle, grpc.insecure_channel(f"127.0.0.1:{handle.grpc_port}") as ch:
        yield handle, model, Stub(ch)


@pytest.fixture(scope="module")
def mlp(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Any, Any, Stub]]:
    path = seeded_mlp_onnx(tmp_path_factory.mktemp("grpc") / "mlp.onnx")
    cfg = BenchConfig.model_validate({"session": {"intra_op_num_threads": 1}, "warmup": {"iterations": 1}})
    opts = ServeOptions(max_batch_size=8, dynamic_batching=True, max_queue_delay_us=2000)
    with serving(str(path), cfg, opts, name="mlp", grpc_port=0) as handle, \
            grpc.insecure_channel(f"127.0.0.1:{handle.grpc_port}") as ch:
        yield handle, path, Stub(ch)


def _code(e: pytest.ExceptionInfo[grpc.RpcError]) -> grpc.StatusCode:
    return e.value.code()


def test_health_metadata_config_and_statistics(mlp) -> None:  # noqa: ANN001
    handle, _, stub = mlp
    assert stub("ServerLive").live and stub("ServerReady").ready
    assert stub("ModelReady", name="mlp").ready and not stub("ModelReady", name="nope").ready
    meta = stub("ServerMetadata")
    assert meta.name == "inferperf" and "binary_tensor_data" in meta.extensions
    md = stub("ModelMetadata", name="mlp")
    http_md = httpx.get(f"{handle.url}/v2/models/mlp").json()
    assert [(t.name, t.datatype, list(t.shape)) for t in md.inputs] == [
        (t["name"], t["datatype"], t["shape"]) for t in http_md["inputs"]]
    cfg = stub("ModelConfig", name="mlp").config
    assert cfg.name == "mlp" and cfg.max_batch_size == 8 and cfg.input[0].name == "x" and list(cfg.input[0].dims) == [32]
    assert cfg.dynamic_batching.max_queue_delay_microseconds == 2000
    before = stub("ModelStatistics", name="mlp").model_stats[0].inference_stats.success.count
    stub("ModelInfer", _msg=infer_request("mlp", {"x": np.ones((2, 32), np.float32)}))
    after = stub("ModelStatistics", name="mlp").model_stats[0]
    assert after.inference_stats.success.count == before + 1 and after.inference_count >= 2
    assert [s.name for s in stub("ModelStatistics").model_stats] == ["mlp"]  # no name: every model


@pytest.mark.parametrize("raw", [True, False])
def test_infer_answers_what_onnxruntime_and_http_answer(mlp, raw: bool) -> None:  # noqa: ANN001
    import onnxruntime as ort

    handle, path, stub = mlp
    x = np.random.default_rng(3).standard_normal((3, 32)).astype(np.float32)
    resp = stub("ModelInfer", _msg=infer_request("mlp", {"x": x}, raw=raw, id="r-1"))
    assert resp.model_name == "mlp" and resp.id == "r-1"
    got = outputs_of(resp)
    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    names = [o.name for o in sess.get_outputs()]
    expected = dict(zip(names, sess.run(None, {"x": x}), strict=True))
    assert list(got) == names
    for name in names:
        np.testing.assert_allclose(got[name], expected[name], rtol=1e-5, atol=1e-6)
    body = {"inputs": [{"name": "x", "datatype": "FP32", "shape": [3, 32], "data": x.ravel().tolist()}]}
    http = httpx.post(f"{handle.url}/v2/models/mlp/infer", content=orjson.dumps(body)).json()
    np.testing.assert_allclose(got[names[0]].ravel(), np.array(http["outputs"][0]["data"], np.float32), rtol=1e-6)


def test_bytes_int64_and_requested_outputs_raw_and_typed(echo) -> None:  # noqa: ANN001
    _, _, stub = echo
    s = np.array([[b"ab"], [b"c"]], dtype=object)
    tensors = {"f": np.ones((2, 3), np.float32), "i": np.array([[1, 2], [3, 4]], np.int64), "s": s}
    for raw in (True, False):
        msg = infer_request("echo", tensors, raw=raw)
        msg.outputs.add(name="s2")
        msg.outputs.add(name="i2")
        got = outputs_of(stub("ModelInfer", _msg=msg))
        assert list(got) == ["s2", "i2"]
        assert got["s2"].ravel().tolist() == [b"AB", b"C"]
        np.testing.assert_array_equal(got["i2"], tensors["i"] + 1)


def test_bad_input_gets_its_status_and_https_words_and_the_server_keeps_serving(echo) -> None:  # noqa: ANN001
    handle, model, stub = echo
    good = {"f": np.ones((1, 3), np.float32), "i": np.ones((1, 2), np.int64), "s": np.array([[b"x"]], dtype=object)}

    def refused(msg: Any, code: grpc.StatusCode, words: str) -> None:
        with pytest.raises(grpc.RpcError) as e:
            stub("ModelInfer", _msg=msg)
        assert _code(e) == code and words in e.value.details(), (e.value.code(), e.value.details())
        assert stub("ModelInfer", _msg=infer_request("echo", good)).outputs  # still serving

    wrong_shape = infer_request("echo", {**good, "f": np.ones((1, 4), np.float32)})
    refused(wrong_shape, grpc.StatusCode.INVALID_ARGUMENT, "input 'f': shape [1, 4] does not match the model's [-1, 3]")
    wrong_type = infer_request("echo", {**good, "f": np.ones((1, 3), np.float64)})
    refused(wrong_type, grpc.StatusCode.INVALID_ARGUMENT, "datatype 'FP64' does not match the model's FP32")
    short = infer_request("echo", good)
    short.raw_input_contents[0] = short.raw_input_contents[0][:-4]
    refused(short, grpc.StatusCode.INVALID_ARGUMENT, "needs 12 bytes, binary_data_size is 8")
    typed_short = infer_request("echo", good, raw=False)
    del typed_short.inputs[0].contents.fp32_contents[-1]
    refused(typed_short, grpc.StatusCode.INVALID_ARGUMENT, "needs 3 elements, contents.fp32_contents holds 2")
    missing = infer_request("echo", {"f": good["f"]})
    refused(missing, grpc.StatusCode.INVALID_ARGUMENT, "missing input(s) ['i', 's']")
    refused(infer_request("nope", good), grpc.StatusCode.NOT_FOUND, "Request for unknown model: 'nope' is not found")
    over = infer_request("echo", {**good, "s": np.array([[b"x" * 5000]], dtype=object)})  # over the 4 KiB limit
    refused(over, grpc.StatusCode.RESOURCE_EXHAUSTED, "over the limit (4096): raise --max-body-bytes")
    with pytest.raises(grpc.RpcError) as e:  # far over: gRPC's own limit (the largest body limit + 64 KiB)
        stub("ModelInfer", _msg=infer_request("echo", {**good, "s": np.array([[b"x" * 80_000]], dtype=object)}))
    assert _code(e) == grpc.StatusCode.RESOURCE_EXHAUSTED
    model.mode = "full"
    try:
        refused_full = infer_request("echo", good)
        with pytest.raises(grpc.RpcError) as e:
            stub("ModelInfer", _msg=refused_full)
        assert _code(e) == grpc.StatusCode.UNAVAILABLE  # back-pressure, as Triton answers it
    finally:
        model.mode = "ok"
    with pytest.raises(grpc.RpcError) as e:
        stub("TraceSetting")
    assert _code(e) == grpc.StatusCode.UNIMPLEMENTED and "tracing" in e.value.details()
    with pytest.raises(grpc.RpcError) as e:  # served, but only with --allow-client-shm
        stub("SystemSharedMemoryStatus")
    assert _code(e) == grpc.StatusCode.PERMISSION_DENIED and "--allow-client-shm" in e.value.details()
    status = httpx.get(f"{handle.url}/metrics").text
    assert 'inferperf_requests_total{model="echo",status="400"}' in status  # gRPC refusals counted as HTTP's


def test_a_stream_answers_each_request_and_a_refusal_does_not_end_it(mlp) -> None:  # noqa: ANN001
    _, _, stub = mlp
    xs = [np.full((1, 32), k, np.float32) for k in range(4)]
    reqs = [infer_request("mlp", {"x": x}, id=f"s-{k}") for k, x in enumerate(xs)]
    reqs.insert(2, infer_request("mlp", {"x": np.ones((1, 5), np.float32)}, id="bad"))
    answers = stub.stream(reqs)
    assert len(answers) == 5
    errors = [a.error_message for a in answers if a.error_message]
    assert len(errors) == 1 and "shape [1, 5]" in errors[0]
    ok = {a.infer_response.id: outputs_of(a.infer_response) for a in answers if not a.error_message}
    assert sorted(ok) == ["s-0", "s-1", "s-2", "s-3"]
    single = {f"s-{k}": outputs_of(stub("ModelInfer", _msg=infer_request("mlp", {"x": x}))) for k, x in enumerate(xs)}
    for rid, outs in ok.items():
        for name, arr in outs.items():
            np.testing.assert_allclose(arr, single[rid][name], rtol=1e-6)


def test_the_api_key_is_call_metadata_and_health_needs_none(tmp_path) -> None:  # noqa: ANN001
    from inferperf.serve.build import prepare
    from inferperf.serve.server import start

    app = prepare(StandIn(), BenchConfig(), ServeOptions())
    app.require_api_key("s3cret")
    handle = start(app, grpc_port=0)
    try:
        with grpc.insecure_channel(f"127.0.0.1:{handle.grpc_port}") as ch:
            anon, keyed, wrong = Stub(ch), Stub(ch, "s3cret"), Stub(ch, "nope")
            assert anon("ServerLive").live and anon("ServerReady").ready
            for stub, what in ((anon, "missing"), (wrong, "wrong")):
                with pytest.raises(grpc.RpcError) as e:
                    stub("ModelMetadata", name="echo")
                assert _code(e) == grpc.StatusCode.UNAUTHENTICATED and f"{what} API key" in e.value.details()
            assert keyed("ModelMetadata", name="echo").name == "echo"
    finally:
        handle.stop()


def test_a_grpc_port_in_use_is_one_line_naming_the_flag() -> None:
    from inferperf.serve.build import prepare
    from inferperf.serve.server import start

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        app = prepare(StandIn(), BenchConfig(), ServeOptions())
        with pytest.raises(UsageError, match="--grpc-port"):
            start(app, grpc_port=taken.getsockname()[1])


def test_a_cancelled_rpc_leaves_the_queue_and_its_rows_never_run(tmp_path) -> None:  # noqa: ANN001
    """As a disconnected HTTP client's request (test_serve_app): queued behind a 1 s batching delay, the RPC is
    cancelled; the batcher drops it (cancelled +1, queue depth 0), the model never sees its rows, and the server
    keeps serving."""
    import time

    path = seeded_mlp_onnx(tmp_path / "mlp.onnx")
    cfg = BenchConfig.model_validate({"session": {"intra_op_num_threads": 1}, "warmup": {"iterations": 1}})
    opts = ServeOptions(max_batch_size=8, max_queue_delay_us=1_000_000)
    with serving(str(path), cfg, opts, name="mlp", grpc_port=0) as handle, \
            grpc.insecure_channel(f"127.0.0.1:{handle.grpc_port}") as ch:
        m = message("inference.ModelInferResponse")
        call = ch.unary_unary("/inference.GRPCInferenceService/ModelInfer",
                              request_serializer=message("inference.ModelInferRequest").SerializeToString,
                              response_deserializer=m.FromString)
        future = call.future(infer_request("mlp", {"x": np.ones((1, 32), np.float32)}), timeout=30)
        deadline = time.monotonic() + 10
        while handle.metrics.value("queue_depth", "mlp") != 1:
            assert time.monotonic() < deadline, "the request never queued"
            time.sleep(0.01)
        future.cancel()
        while handle.metrics.value("cancelled", "mlp") != 1:
            assert time.monotonic() < deadline, "the batcher did not drop the cancelled request"
            time.sleep(0.01)
        stats = Stub(ch)("ModelStatistics", name="mlp").model_stats[0]
        assert stats.inference_count == 0 and stats.execution_count == 0
        assert handle.metrics.value("queue_depth", "mlp") == 0
        assert outputs_of(Stub(ch)("ModelInfer", timeout=30, _msg=infer_request("mlp", {"x": np.ones((1, 32), np.float32)})))
