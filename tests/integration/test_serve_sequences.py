"""Sequence models served as Triton serves them (issue 42): Triton's example ``simple_sequence`` (direct) and
``simple_dyna_sequence`` (oldest, CORRID) over HTTP and gRPC, their refusals in Triton's words, their served
configuration, and an accumulator whose state the server keeps (``sequence_batching.state``) right over 40
interleaved sequences (127.0.0.1, ephemeral ports; the server always stopped)."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import grpc
import httpx
import numpy as np
import pytest

from inferperf.serve.server import prepare_repository, start
from tests.integration.test_serve_grpc import Stub, infer_request, outputs_of
from tests.triton_repository import _save, make_repository

ACC_CONFIG = """
name: "acc"
platform: "onnxruntime_onnx"
max_batch_size: 8
sequence_batching {
  max_sequence_idle_microseconds: 5000000
  oldest { max_candidate_sequences: 16  max_queue_delay_microseconds: 500 }
  control_input [ { name: "START" control [ { kind: CONTROL_SEQUENCE_START  int32_false_true: [ 0, 1 ] } ] } ]
  state [ { input_name: "ACC_IN"  output_name: "ACC_OUT"  data_type: TYPE_INT32  dims: [ 1 ]
            initial_state: { data_type: TYPE_INT32  dims: [ 1 ]  zero_data: true  name: "zero" } } ]
}
input [ { name: "INPUT"  data_type: TYPE_INT32  dims: [ 1 ] } ]
output [ { name: "OUTPUT"  data_type: TYPE_INT32  dims: [ 1 ] } ]
instance_group [ { count: 2  kind: KIND_CPU } ]
"""


def _accumulator(path: Path) -> None:
    """ACC_OUT = ACC_IN + INPUT, OUTPUT = ACC_OUT (START is an input it ignores: Triton feeds it anyway)."""
    from onnx import TensorProto, helper

    i32 = TensorProto.INT32
    ins = [helper.make_tensor_value_info(n, i32, ["batch", 1]) for n in ("INPUT", "START", "ACC_IN")]
    outs = [helper.make_tensor_value_info(n, i32, ["batch", 1]) for n in ("OUTPUT", "ACC_OUT")]
    nodes = [helper.make_node("Add", ["ACC_IN", "INPUT"], ["ACC_OUT"]), helper.make_node("Identity", ["ACC_OUT"], ["OUTPUT"]),
             helper.make_node("Identity", ["START"], ["unused"])]
    _save(helper.make_graph(nodes, "acc", ins, outs), path)


DIRECT_CONFIG = ACC_CONFIG.replace('name: "acc"', 'name: "acc_direct"').replace(
    "oldest { max_candidate_sequences: 16  max_queue_delay_microseconds: 500 }", "direct { }")


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    repo = make_repository(tmp_path_factory.mktemp("seq") / "model_repository")
    shutil.rmtree(repo / "simple_identity")  # the python backend: not served, not needed here
    (repo / "acc" / "1").mkdir(parents=True)
    (repo / "acc" / "config.pbtxt").write_text(ACC_CONFIG)
    _accumulator(repo / "acc" / "1" / "model.onnx")
    (repo / "acc_direct" / "1").mkdir(parents=True)
    (repo / "acc_direct" / "config.pbtxt").write_text(DIRECT_CONFIG)
    _accumulator(repo / "acc_direct" / "1" / "model.onnx")
    handle = start(prepare_repository(repo), "127.0.0.1", 0, ready_timeout_s=120, grpc_port=0)
    try:
        yield handle
    finally:
        handle.stop()


def _http(url: str, model: str, value: int, **params: Any) -> httpx.Response:
    body = {"inputs": [{"name": "INPUT", "datatype": "INT32", "shape": [1, 1], "data": [value]}],
            "parameters": params}
    return httpx.post(f"{url}/v2/models/{model}/infer", json=body, timeout=30)


def _out(r: httpx.Response) -> int:
    assert r.status_code == 200, r.text
    return int(r.json()["outputs"][0]["data"][0])


def test_the_metadata_hides_the_control_inputs_and_the_config_says_sequence_batching(server) -> None:  # noqa: ANN001
    meta = httpx.get(f"{server.url}/v2/models/simple_dyna_sequence", timeout=10).json()
    assert [t["name"] for t in meta["inputs"]] == ["INPUT"] and [t["name"] for t in meta["outputs"]] == ["OUTPUT"]
    cfg = httpx.get(f"{server.url}/v2/models/simple_dyna_sequence/config", timeout=10).json()
    sb = cfg["sequence_batching"]
    assert "dynamic_batching" not in cfg and sb["oldest"]["max_candidate_sequences"] == 1024
    assert [c["name"] for c in sb["control_input"]] == ["START", "END", "READY", "CORRID"]
    assert sb["control_input"][3]["control"][0] == {"kind": "CONTROL_SEQUENCE_CORRID", "data_type": "TYPE_UINT64"}
    assert "direct" in httpx.get(f"{server.url}/v2/models/simple_sequence/config", timeout=10).json()["sequence_batching"]
    acc = httpx.get(f"{server.url}/v2/models/acc", timeout=10).json()
    assert [t["name"] for t in acc["inputs"]] == ["INPUT"] and [t["name"] for t in acc["outputs"]] == ["OUTPUT"]


def test_a_state_or_control_input_the_model_does_not_have_is_unavailable_at_load(tmp_path: Path) -> None:
    """The config's sequence_batching is held against the model when it loads (as Triton does), not at the
    first request: a state of another type, one the model does not have, a control of another datatype."""
    from inferperf.serve.build import close_models

    repo = tmp_path / "repo"
    cases = {"bad_type": ACC_CONFIG.replace("data_type: TYPE_INT32  dims: [ 1 ]\n", "data_type: TYPE_FP32  dims: [ 1 ]\n", 1),
             "bad_name": ACC_CONFIG.replace('output_name: "ACC_OUT"', 'output_name: "NOPE"'),
             "bad_control": ACC_CONFIG.replace("int32_false_true: [ 0, 1 ]", "fp32_false_true: [ 0, 1 ]")}
    for name, text in cases.items():
        (repo / name / "1").mkdir(parents=True)
        (repo / name / "config.pbtxt").write_text(text.replace('name: "acc"', f'name: "{name}"'))
        _accumulator(repo / name / "1" / "model.onnx")
    (repo / "ok" / "1").mkdir(parents=True)
    (repo / "ok" / "config.pbtxt").write_text(ACC_CONFIG.replace('name: "acc"', 'name: "ok"'))
    _accumulator(repo / "ok" / "1" / "model.onnx")
    warnings: list[str] = []
    app = prepare_repository(repo, warn=warnings.append)
    try:
        assert sorted(app.models) == ["ok"]
        text = "\n".join(warnings)
        assert "state input_name 'ACC_IN' is FP32" in text and "state output_name 'NOPE' is not an output" in text
        assert "control_input 'START' is FP32, the model's input is INT32" in text
    finally:
        close_models(app.all_models())


def test_tritons_sequence_models_answer_as_its_clients_expect_over_http(server) -> None:  # noqa: ANN001
    """simple_sequence: READY * (INPUT + START); simple_dyna_sequence adds the correlation id at END."""
    url = server.url
    values = [0, 11, 7, 5]
    got = [_out(_http(url, "simple_sequence", v, sequence_id=1000, sequence_start=k == 0,
                      sequence_end=k == len(values) - 1)) for k, v in enumerate(values)]
    assert got == [1, 11, 7, 5]
    got = [_out(_http(url, "simple_sequence", v, sequence_id="a-string-id", sequence_start=k == 0,
                      sequence_end=k == 1)) for k, v in enumerate([20, -3])]
    assert got == [21, -3]
    got = [_out(_http(url, "simple_dyna_sequence", v, sequence_id=1001, sequence_start=k == 0,
                      sequence_end=k == 2)) for k, v in enumerate([0, 9, 1])]
    assert got == [1, 9, 1 + 1001]


def test_refusals_in_tritons_words_and_the_server_serves_on(server) -> None:  # noqa: ANN001
    url = server.url
    r = _http(url, "simple_sequence", 1)
    assert r.status_code == 400 and "must specify a non-zero or non-empty correlation ID" in r.json()["error"]
    r = _http(url, "simple_sequence", 1, sequence_id=77)
    assert r.status_code == 400 and "must specify the START flag" in r.json()["error"]
    assert _out(_http(url, "simple_sequence", 1, sequence_id=78, sequence_start=True)) == 2
    assert _out(_http(url, "simple_sequence", 1, sequence_id=78, sequence_start=True)) == 2  # restarted (Triton)
    for bad in ("not-a-number", -7):
        r = _http(url, "simple_dyna_sequence", 1, sequence_id=bad, sequence_start=True)
        assert r.status_code == 400 and ("send an integer id" in r.json()["error"] or "unsigned" in r.json()["error"])
    body = {"inputs": [{"name": "INPUT", "datatype": "INT32", "shape": [2, 1], "data": [1, 2]}],
            "parameters": {"sequence_id": 79, "sequence_start": True}}
    r = httpx.post(f"{url}/v2/models/simple_sequence/infer", json=body, timeout=30)
    assert r.status_code == 400 and "must specify batch-size 1" in r.json()["error"]
    r = _http(url, "simple_sequence", 1, sequence_id=78, sequence_end="yes")
    assert r.status_code == 400 and "must be a boolean" in r.json()["error"]
    assert _out(_http(url, "simple_sequence", 4, sequence_id=78, sequence_end=True)) == 4


def test_sequences_over_grpc_with_int_and_string_ids(server) -> None:  # noqa: ANN001
    with grpc.insecure_channel(f"127.0.0.1:{server.grpc_port}") as ch:
        stub = Stub(ch)
        for sid, values, want in ((2000, [0, 5, 6], [1, 5, 6 + 2000]), ("2001", [3, 4], [4, 4 + 2001])):
            got = []
            for k, v in enumerate(values):
                msg = infer_request("simple_dyna_sequence", {"INPUT": np.array([[v]], np.int32)})
                p = msg.parameters
                if isinstance(sid, int):
                    p["sequence_id"].int64_param = sid
                else:
                    p["sequence_id"].string_param = sid
                p["sequence_start"].bool_param = k == 0
                p["sequence_end"].bool_param = k == len(values) - 1
                got.append(int(outputs_of(stub("ModelInfer", _msg=msg))["OUTPUT"][0, 0]))
            assert got == want
        with pytest.raises(grpc.RpcError) as e:
            stub("ModelInfer", _msg=infer_request("simple_sequence", {"INPUT": np.array([[1]], np.int32)}))
        assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT and "correlation ID" in e.value.details()


@pytest.mark.parametrize("model", ["acc", "acc_direct"])
def test_the_server_keeps_an_accumulators_state_over_interleaved_sequences(server, model: str) -> None:  # noqa: ANN001
    """40 sequences of 6 requests each from 8 client threads, interleaved: oldest (16 candidate slots, 2
    instances, batched across sequences) and direct (2 instances x 8 rows: each sequence pinned to its slot's
    instance, the rest waiting for a slot): every answer is its sequence's running sum."""
    rng = np.random.default_rng(0)
    plans = {sid: [int(v) for v in rng.integers(-20, 20, 6)] for sid in range(1, 41)}
    before = httpx.get(f"{server.url}/v2/models/{model}/stats", timeout=10).json()["model_stats"][0]

    def run(sid: int) -> list[int]:
        values = plans[sid]
        return [_out(_http(server.url, model, v, sequence_id=sid, sequence_start=k == 0,
                           sequence_end=k == len(values) - 1)) for k, v in enumerate(values)]

    with ThreadPoolExecutor(8) as pool:
        got = dict(zip(plans, pool.map(run, plans), strict=True))
    assert got == {sid: [int(x) for x in np.cumsum(v)] for sid, v in plans.items()}
    stats = httpx.get(f"{server.url}/v2/models/{model}/stats", timeout=10).json()["model_stats"][0]
    assert stats["inference_count"] - before["inference_count"] == 240


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_load_drives_whole_sequences_and_every_request_is_accepted(server, protocol: str) -> None:  # noqa: ANN001
    """``load`` on a sequence model (issue 42 item 3): 3 streams of sequences of 5 +- 1 requests on the
    accumulator, ids from a range: no refusal (a request out of order, or for a sequence not started, would be a
    400), the server counts every request, and the Result says how many sequences the step held."""
    from inferperf.loadgen.options import LoadConfig
    from inferperf.loadgen.run import load

    url = f"grpc://127.0.0.1:{server.grpc_port}" if protocol == "grpc" else server.url
    before = httpx.get(f"{server.url}/v2/models/acc/stats", timeout=10).json()["model_stats"][0]["inference_count"]
    (r,) = load(LoadConfig(url=url, model="acc", concurrency=[3], sequence_length=5, sequence_id_range="500:599",
                           requests=60, warmup_s=0.2, measurement_interval_ms=500))
    assert r.metrics.errors.count == 0 and r.metrics.latency_ms.count >= 60
    seq = r.metrics.client["sequences"]
    assert seq["started"] >= 60 / 6 and seq["ended"] >= seq["started"] - 3 and seq["mean_length"] == 5
    after = httpx.get(f"{server.url}/v2/models/acc/stats", timeout=10).json()["model_stats"][0]["inference_count"]
    assert after - before >= r.metrics.latency_ms.count


def test_load_refuses_what_sequences_cannot_do(server) -> None:  # noqa: ANN001
    from inferperf.errors import UsageError
    from inferperf.loadgen.gen_target import read_load_target
    from inferperf.loadgen.options import LoadConfig

    with pytest.raises(UsageError, match="driven by the closed loop"):
        read_load_target(LoadConfig(url=server.url, model="acc", request_rate=[10]))
    with pytest.raises(UsageError, match="is not a sequence model"):
        read_load_target(LoadConfig(url=server.url, model="simple", concurrency=[1], sequence_length=4))
