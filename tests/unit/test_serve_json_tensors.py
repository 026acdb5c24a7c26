"""Large JSON bodies through simdjson (serve/json_tensors.py) decode exactly as the orjson path does: the same
arrays, bit for bit, and the same 400 messages for every malformed case."""

from __future__ import annotations

import numpy as np
import orjson
import pytest

from inferperf.serve import json_tensors
from inferperf.serve.protocol import decode_request
from inferperf.serve.tensor_types import ProtocolError, TensorSpec

pytestmark = pytest.mark.skipif(not json_tensors.available(), reason="pysimdjson missing: pip install pysimdjson")

N = 40_000  # elements: every body below is well over json_tensors.MIN_BYTES


def _decode(body: bytes, spec: TensorSpec):
    return decode_request(body, None, [spec], [TensorSpec("y", "FP32", (-1, 1))], 0)


def _both(body: bytes, spec: TensorSpec, monkeypatch) -> tuple[object, object]:
    """(simdjson path, orjson path) outcomes: the array, or the ProtocolError message and status."""
    assert len(body) >= json_tensors.MIN_BYTES

    def outcome():
        try:
            return _decode(body, spec).inputs[spec.name]
        except ProtocolError as e:
            return (str(e), e.status)

    fast = outcome()
    with monkeypatch.context() as m:
        m.setattr(json_tensors, "MIN_BYTES", 1 << 40)  # every body through orjson
        slow = outcome()
    return fast, slow


def _body(data, datatype="FP32", shape=(N,), name="x") -> bytes:
    return orjson.dumps({"id": "r1", "inputs": [{"name": name, "datatype": datatype, "shape": list(shape), "data": data}],
                         "parameters": {"binary_data_output": True}})


@pytest.mark.parametrize("datatype", ["FP32", "FP64", "FP16"])
def test_flat_floats_equal_the_orjson_path_bit_for_bit(datatype, monkeypatch):
    x = np.random.default_rng(0).standard_normal(N) * 1e3
    values = [int(v) if i % 7 == 0 else float(v) for i, v in enumerate(np.round(x, 4))]  # ints mixed in
    fast, slow = _both(_body(values, datatype), TensorSpec("x", datatype, (N,)), monkeypatch)
    assert isinstance(fast, np.ndarray) and fast.dtype == slow.dtype and fast.shape == (N,)
    assert fast.tobytes() == slow.tobytes()


@pytest.mark.parametrize("datatype", ["INT64", "INT32", "INT8", "UINT8", "UINT64"])
def test_flat_ints_equal_the_orjson_path(datatype, monkeypatch):
    info = np.iinfo(np.dtype(datatype.lower()))
    values = np.random.default_rng(1).integers(max(info.min, -(2**62)), min(info.max, 2**62), N).tolist()
    fast, slow = _both(_body(values, datatype), TensorSpec("x", datatype, (N,)), monkeypatch)
    assert isinstance(fast, np.ndarray) and fast.dtype == slow.dtype and np.array_equal(fast, slow)


def test_nested_data_and_request_fields_survive(monkeypatch):
    x = np.arange(N, dtype=np.float32).reshape(100, N // 100)
    body = _body(x.tolist(), shape=x.shape)
    fast, slow = _both(body, TensorSpec("x", "FP32", (-1, N // 100)), monkeypatch)
    assert np.array_equal(fast, x) and np.array_equal(slow, x)
    req = _decode(body, TensorSpec("x", "FP32", (-1, N // 100)))
    assert req.id == "r1" and req.binary_default is True


@pytest.mark.parametrize(
    ("data", "datatype", "shape"),
    [
        ([1.5] + [1] * (N - 1), "INT64", (N,)),  # a fraction in an integer tensor
        ([300] + [1] * (N - 1), "UINT8", (N,)),  # out of the dtype's range
        ([-1] + [1] * (N - 1), "UINT32", (N,)),
        ([1.0] * (N - 1), "FP32", (N,)),  # one element short
        ([1.0] * N + [2.0], "FP32", (N,)),  # one too many
        (["a"] + [1.0] * (N - 1), "FP32", (N,)),  # a string among numbers
        ([None] + [1.0] * (N - 1), "FP32", (N,)),
        ([[1.0, 2.0]] + [1.0] * (N - 2), "FP32", (N,)),  # ragged
        ([True, False] * (N // 2), "BOOL", (N,)),  # valid BOOL (list path)
        ([1, 0] * (N // 2), "BOOL", (N,)),  # numbers are not BOOL
        (["ab"] * N, "BYTES", (N,)),
    ],
)
def test_every_other_case_gives_the_orjson_paths_answer(data, datatype, shape, monkeypatch):
    fast, slow = _both(_body(data, datatype, shape), TensorSpec("x", datatype, tuple(-1 for _ in shape)), monkeypatch)
    if isinstance(slow, np.ndarray):
        assert isinstance(fast, np.ndarray) and fast.dtype == slow.dtype
        assert np.array_equal(fast, slow, equal_nan=fast.dtype.kind == "f")  # null reads as NaN on both paths
    else:
        assert fast == slow and slow[1] == 400


def test_invalid_json_is_a_400():
    body = _body([1.0] * N)[:-5]
    with pytest.raises(ProtocolError, match="not valid JSON") as e:
        _decode(body, TensorSpec("x", "FP32", (N,)))
    assert e.value.status == 400
