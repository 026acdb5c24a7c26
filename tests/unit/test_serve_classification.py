"""Triton's classification extension (serve/classification.py, protocol's ``classification`` parameter;
issue 24, item 6): top K as "value:index[:label]", as Triton's server src/classification.cc writes them."""

from __future__ import annotations

import numpy as np
import orjson
import pytest

from inferperf.serve.classification import ClassificationError, top_k
from inferperf.serve.protocol import decode_request, encode_response
from inferperf.serve.tensor_types import ProtocolError, TensorSpec

X = TensorSpec("x", "FP32", (-1, 4))
Y = TensorSpec("y", "FP32", (-1, 4), labels=("zero", "one", "", "three"))


def test_the_docs_example_top_2() -> None:
    """extension_classification.md: [1.1, 3.3, 0.5, 2.4] -> top 2 by value: "3.3:1", "2.4:3" (labels when given)."""
    out = top_k(np.array([[1.1, 3.3, 0.5, 2.4]], np.float32), 2)
    assert out.shape == (1, 2) and out.tolist() == [[b"3.300000:1", b"2.400000:3"]]  # std::to_string: %f
    assert top_k(np.array([[1.1, 3.3, 0.5, 2.4]], np.float32), 2, ["a", "b", "c", "d"]).tolist() == [
        [b"3.300000:1:b", b"2.400000:3:d"]]


def test_rows_ties_integers_short_labels_and_unbatched() -> None:
    out = top_k(np.array([[1, 5, 10, 4, 10], [7, 7, 0, 0, 1]], np.int32), 3, ["a", "b", "c"])
    assert out.tolist() == [[b"10:2:c", b"10:4", b"5:1:b"], [b"7:0:a", b"7:1:b", b"1:4"]]  # ties: lower index first
    assert top_k(np.array([[2, 9]], np.uint8), 5).tolist() == [[b"9:1", b"2:0"]]  # K past N: N classes
    flat = top_k(np.array([[0.0], [3.0], [1.0]], np.float64), 2, batched=False)  # no batch dim: the whole tensor
    assert flat.shape == (2,) and flat.tolist() == [b"3.000000:1", b"1.000000:2"]


@pytest.mark.parametrize("dtype", [np.float16, np.bool_])
def test_dtypes_triton_does_not_classify_are_refused(dtype: type) -> None:
    with pytest.raises(ClassificationError, match="class result not available for output due to unsupported type"):
        top_k(np.zeros((1, 3), dtype), 1)


def _request(outputs: list[dict]) -> bytes:
    return orjson.dumps({"inputs": [{"name": "x", "datatype": "FP32", "shape": [2, 4], "data": [0.0] * 8}],
                         "outputs": outputs})


def test_the_parameter_answers_bytes_rows_of_k_with_the_specs_labels() -> None:
    req = decode_request(_request([{"name": "y", "parameters": {"classification": 2}}]), None, [X], [Y], 4)
    y = np.array([[0.1, 0.9, 0.5, 0.2], [0.7, 0.1, 0.2, 0.8]], np.float32)
    body, _ = encode_response("m", "1", req, {"y": y})
    (out,) = orjson.loads(body)["outputs"]
    assert (out["datatype"], out["shape"]) == ("BYTES", [2, 2])
    assert out["data"] == ["0.900000:1:one", "0.500000:2", "0.800000:3:three", "0.700000:0:zero"]
    plain = decode_request(_request([{"name": "y", "parameters": {"classification": 0}}]), None, [X], [Y], 4)
    assert orjson.loads(encode_response("m", "1", plain, {"y": y})[0])["outputs"][0]["datatype"] == "FP32"


@pytest.mark.parametrize("count", [-1, 1.5, "2", True])
def test_a_count_that_is_not_a_number_of_classes_is_400(count: object) -> None:
    with pytest.raises(ProtocolError, match="classification .* must be a number of classes >= 0") as e:
        decode_request(_request([{"name": "y", "parameters": {"classification": count}}]), None, [X], [Y], 4)
    assert e.value.status == 400
