"""gRPC tensors decoded and encoded against the model's specs (serve/grpc_tensors.py), and the status codes a
refusal carries (serve/grpc_service.py): issue 40 item 1."""

from __future__ import annotations

import grpc
import numpy as np
import pytest

from inferperf.serve.grpc_service import grpc_code
from inferperf.serve.grpc_tensors import TYPED_FIELD, decode_infer, encode_infer
from inferperf.serve.tensor_types import ProtocolError, TensorSpec
from inferperf.workload.triton_protos import message

SPECS = [TensorSpec("x", "FP32", (-1, 2)), TensorSpec("h", "FP16", (-1, 2)), TensorSpec("s", "BYTES", (-1, 1))]
OUTS = [TensorSpec("y", "FP32", (-1, 2))]


def _msg(**inputs: tuple[str, list[int], object]) -> object:
    m = message("inference.ModelInferRequest")(model_name="m", id="q")
    for name, (dt, shape, contents) in inputs.items():
        t = m.inputs.add(name=name, datatype=dt, shape=shape)
        if isinstance(contents, bytes):
            m.raw_input_contents.append(contents)
        else:
            getattr(t.contents, TYPED_FIELD.get(dt, "fp32_contents")).extend(contents)
    return m


def test_raw_and_typed_contents_decode_to_the_same_arrays() -> None:
    x = np.array([[1.5, -2.0]], np.float32)
    h = np.array([[0.5, 3.0]], np.float16)
    s_raw = b"\x02\x00\x00\x00ab"
    raw = decode_infer(_msg(x=("FP32", [1, 2], x.tobytes()), h=("FP16", [1, 2], h.tobytes()),
                            s=("BYTES", [1, 1], s_raw)), SPECS, OUTS, 4)
    assert raw.rows == 1 and raw.id == "q" and raw.binary_default
    np.testing.assert_array_equal(raw.inputs["x"], x)
    np.testing.assert_array_equal(raw.inputs["h"], h)
    assert raw.inputs["s"].tolist() == [[b"ab"]]
    specs = [SPECS[0], SPECS[2]]
    typed = decode_infer(_msg(x=("FP32", [1, 2], [1.5, -2.0]), s=("BYTES", [1, 1], [b"ab"])), specs, OUTS, 4)
    np.testing.assert_array_equal(typed.inputs["x"], x)
    assert typed.inputs["s"].tolist() == [[b"ab"]]


@pytest.mark.parametrize(("build", "words"), [
    (lambda: _msg(h=("FP16", [1, 2], [1, 2])), "FP16 has no typed contents field: send it in raw_input_contents"),
    (lambda: _msg(x=("FP32", [2, 2], [1.0, 2.0])), "shape [2, 2] needs 4 elements, contents.fp32_contents holds 2"),
    (lambda: _msg(x=("FP32", [1, 2], b"\x00" * 4)), "needs 8 bytes, binary_data_size is 4"),
    (lambda: _msg(x=("FP32", [9, 2], b"\x00" * 72)), "batch of 9 rows is outside 1..max_batch_size (4)"),
    (lambda: _msg(), "request needs a non-empty 'inputs' list"),
])
def test_refusals_name_the_tensor_and_the_fix(build, words: str) -> None:  # noqa: ANN001
    specs = [SPECS[0], SPECS[1]] if "FP16" in words else [SPECS[0]]
    with pytest.raises(ProtocolError, match=None) as e:
        decode_infer(build(), specs, OUTS, 4)
    assert words in str(e.value) and e.value.status == 400


def test_raw_for_some_inputs_only_and_both_forms_are_refused() -> None:
    m = _msg(x=("FP32", [1, 2], b"\x00" * 8))
    m.inputs.add(name="s", datatype="BYTES", shape=[1, 1]).contents.bytes_contents.append(b"a")
    with pytest.raises(ProtocolError, match="1 raw_input_contents for 2 inputs"):
        decode_infer(m, [SPECS[0], SPECS[2]], OUTS, 4)
    both = _msg(x=("FP32", [1, 2], b"\x00" * 8))
    both.inputs[0].contents.fp32_contents.extend([1.0, 2.0])
    with pytest.raises(ProtocolError, match="give raw_input_contents or typed contents, not both"):
        decode_infer(both, [SPECS[0]], OUTS, 4)


def test_an_int8_value_out_of_range_is_refused() -> None:
    m = _msg(i=("INT8", [1, 1], [300]))
    with pytest.raises(ProtocolError, match="values outside INT8's range"):
        decode_infer(m, [TensorSpec("i", "INT8", (-1, 1))], OUTS, 4)


def test_outputs_come_back_raw_in_the_requested_order_with_the_request_id() -> None:
    m = _msg(x=("FP32", [1, 2], [1.0, 2.0]))
    m.outputs.add(name="b")
    m.outputs.add(name="a")
    outs = [TensorSpec("a", "INT64", (-1,)), TensorSpec("b", "FP32", (-1, 2))]
    req = decode_infer(m, [SPECS[0]], outs, 4)
    resp = encode_infer("m", "1", req, {"a": np.array([7], np.int64), "b": np.array([[0.5, 1.0]], np.float32)})
    assert [o.name for o in resp.outputs] == ["b", "a"] and resp.id == "q" and resp.model_version == "1"
    assert [list(o.shape) for o in resp.outputs] == [[1, 2], [1]] and resp.outputs[1].datatype == "INT64"
    assert np.frombuffer(resp.raw_output_contents[0], np.float32).tolist() == [0.5, 1.0]
    assert np.frombuffer(resp.raw_output_contents[1], np.int64).tolist() == [7]
    m.outputs.add(name="nope")
    with pytest.raises(ProtocolError, match="unknown output 'nope'"):
        decode_infer(m, [SPECS[0]], outs, 4)


@pytest.mark.parametrize(("status", "code"), [(400, grpc.StatusCode.INVALID_ARGUMENT), (404, grpc.StatusCode.NOT_FOUND),
                                              (413, grpc.StatusCode.RESOURCE_EXHAUSTED),
                                              (503, grpc.StatusCode.UNAVAILABLE), (504, grpc.StatusCode.DEADLINE_EXCEEDED),
                                              (500, grpc.StatusCode.INTERNAL), (499, grpc.StatusCode.CANCELLED),
                                              (418, grpc.StatusCode.INVALID_ARGUMENT), (502, grpc.StatusCode.INTERNAL)])
def test_a_refusal_carries_tritons_status_code(status: int, code: grpc.StatusCode) -> None:
    assert grpc_code(status) == code
