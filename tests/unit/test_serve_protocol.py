"""KServe v2 JSON + Triton binary tensor decoding/encoding (issue 12, items 2 and 8)."""

from __future__ import annotations

import json
import struct

import numpy as np
import orjson
import pytest

from inferperf.serve.protocol import HEADER_LENGTH, InferRequest, decode_request, encode_response
from inferperf.serve.tensor_types import ProtocolError, TensorSpec

X = TensorSpec("x", "FP32", (-1, 3))
Y = TensorSpec("y", "FP32", (-1, 2))


def _decode(body: bytes, header_length: str | None = None, inputs=(X,), outputs=(Y,), mbs: int = 4) -> InferRequest:
    return decode_request(body, header_length, list(inputs), list(outputs), mbs)


def _binary_body(header: dict, *blobs: bytes) -> tuple[bytes, str]:
    head = orjson.dumps(header)
    return head + b"".join(blobs), str(len(head))


def _bytes_blob(items: list[bytes]) -> bytes:
    return b"".join(struct.pack("<I", len(b)) + b for b in items)


def _strict_loads(text: bytes) -> object:
    def refuse(name: str) -> None:
        raise ValueError(f"non-standard JSON constant {name}")

    return json.loads(text, parse_constant=refuse)


@pytest.mark.parametrize(
    ("datatype", "data", "expected"),
    [
        ("FP32", [1.5, 2, -3], np.array([1.5, 2, -3], np.float32)),
        ("FP16", [0.5, 1, 2], np.array([0.5, 1, 2], np.float16)),
        ("INT64", [1, -2, 2**40], np.array([1, -2, 2**40], np.int64)),
        ("INT32", [1, -2, 3], np.array([1, -2, 3], np.int32)),
        ("UINT8", [0, 255, 7], np.array([0, 255, 7], np.uint8)),
        ("BOOL", [True, False, True], np.array([True, False, True])),
        ("BYTES", ["a", "", "héllo"], np.array([b"a", b"", "héllo".encode()], dtype=object)),
    ],
)
def test_json_datatypes_decode_to_numpy(datatype: str, data: list, expected: np.ndarray) -> None:
    spec = TensorSpec("t", datatype, (-1, 3))
    body = orjson.dumps({"inputs": [{"name": "t", "datatype": datatype, "shape": [1, 3], "data": data}]})
    req = _decode(body, inputs=[spec])
    arr = req.inputs["t"]
    assert arr.dtype == expected.dtype and arr.shape == (1, 3) and req.rows == 1
    assert list(arr.reshape(-1)) == list(expected)


def test_flat_and_nested_data_decode_equal() -> None:
    flat = orjson.dumps({"inputs": [{"name": "x", "datatype": "FP32", "shape": [2, 3], "data": [1, 2, 3, 4, 5, 6]}]})
    nested = orjson.dumps(
        {"inputs": [{"name": "x", "datatype": "FP32", "shape": [2, 3], "data": [[1, 2, 3], [4, 5, 6]]}]}
    )
    a, b = _decode(flat).inputs["x"], _decode(nested).inputs["x"]
    np.testing.assert_array_equal(a, b)
    assert a.shape == (2, 3) and _decode(flat).rows == 2


def test_shape_with_wrong_element_count_is_400_naming_tensor() -> None:
    spec = TensorSpec("x", "FP32", (-1, 1))
    body = orjson.dumps({"inputs": [{"name": "x", "datatype": "FP32", "shape": [2, 1], "data": [1, 2, 3]}]})
    with pytest.raises(ProtocolError, match=r"input 'x'.*needs 2 elements.*holds 3") as e:
        _decode(body, inputs=[spec])
    assert e.value.status == 400


@pytest.mark.parametrize(
    ("entry", "match"),
    [
        ({"name": "z", "datatype": "FP32", "shape": [1, 3], "data": [1, 2, 3]}, "unknown input 'z'"),
        ({"name": "x", "datatype": "INT64", "shape": [1, 3], "data": [1, 2, 3]}, "input 'x': datatype 'INT64'"),
        ({"name": "x", "datatype": "FP32", "shape": [1, 4], "data": [1, 2, 3, 4]}, r"input 'x': shape \[1, 4\]"),
        ({"name": "x", "datatype": "FP32", "shape": [5, 3], "data": [0] * 15}, "outside 1..max_batch_size"),
        ({"name": "x", "datatype": "FP32", "shape": [1, -3], "data": [1]}, "negative dim"),
        ({"name": "x", "datatype": "FP32", "shape": "1x3", "data": [1]}, "list of integers"),
        ({"name": "x", "datatype": "FP32", "shape": [1, 3], "data": ["a", 2, 3]}, "input 'x': 'data' does not hold"),
        ({"name": "x", "datatype": "FP32", "shape": [1, 3]}, "neither 'data'"),
    ],
)
def test_json_faults_are_400_naming_the_tensor(entry: dict, match: str) -> None:
    with pytest.raises(ProtocolError, match=match) as e:
        _decode(orjson.dumps({"inputs": [entry]}))
    assert e.value.status == 400


def test_fractional_values_for_integer_inputs_are_refused() -> None:
    spec = TensorSpec("ids", "INT64", (-1, 2))
    body = orjson.dumps({"inputs": [{"name": "ids", "datatype": "INT64", "shape": [1, 2], "data": [1, 2.5]}]})
    with pytest.raises(ProtocolError, match="input 'ids': 'data' does not hold INT64 values"):
        _decode(body, inputs=[spec])


def test_uint8_overflow_and_bool_from_numbers_are_refused() -> None:
    u8 = TensorSpec("u", "UINT8", (-1, 1))
    with pytest.raises(ProtocolError, match="input 'u'"):
        _decode(orjson.dumps({"inputs": [{"name": "u", "datatype": "UINT8", "shape": [1, 1], "data": [300]}]}), inputs=[u8])
    b = TensorSpec("b", "BOOL", (-1, 1))
    with pytest.raises(ProtocolError, match="input 'b'"):
        _decode(orjson.dumps({"inputs": [{"name": "b", "datatype": "BOOL", "shape": [1, 1], "data": [2]}]}), inputs=[b])


def test_binary_input_is_a_zero_copy_view_and_id_and_outputs_kept() -> None:
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    header = {
        "id": "r1",
        "inputs": [{"name": "x", "datatype": "FP32", "shape": [2, 3], "parameters": {"binary_data_size": 24}}],
        "outputs": [{"name": "y", "parameters": {"binary_data": True}}],
    }
    body, hl = _binary_body(header, x.tobytes())
    req = _decode(body, hl)
    np.testing.assert_array_equal(req.inputs["x"], x)
    assert req.inputs["x"].base is not None and not req.inputs["x"].flags.owndata  # a view into the body
    assert req.id == "r1" and req.outputs == ["y"] and req.binary == {"y": True}


def test_binary_int64_and_bytes_inputs_decode() -> None:
    ids = TensorSpec("ids", "INT64", (-1, 2))
    txt = TensorSpec("txt", "BYTES", (-1, 1))
    i = np.array([[1, 2**40]], np.int64)
    blob = _bytes_blob([b"hello"])
    header = {
        "inputs": [
            {"name": "ids", "datatype": "INT64", "shape": [1, 2], "parameters": {"binary_data_size": 16}},
            {"name": "txt", "datatype": "BYTES", "shape": [1, 1], "parameters": {"binary_data_size": len(blob)}},
        ]
    }
    body, hl = _binary_body(header, i.tobytes(), blob)
    req = _decode(body, hl, inputs=[ids, txt])
    np.testing.assert_array_equal(req.inputs["ids"], i)
    assert req.inputs["txt"].tolist() == [[b"hello"]]


def _x_header(size: object, shape: list[int] | None = None, datatype: str = "FP32", name: str = "x") -> dict:
    return {"inputs": [{"name": name, "datatype": datatype, "shape": shape or [1, 3], "parameters": {"binary_data_size": size}}]}


@pytest.mark.parametrize(
    ("header_length", "match"),
    [("99999", "larger than the body"), ("-5", "negative"), ("abc", "not a number"), ("12x", "not a number"),
     ("--5", "not a number"), ("\u00b2", "not a number"), ("\u0661\u0662", "not a number")],  # '²', Arabic-Indic 12
)
def test_malformed_header_length_is_400(header_length: str, match: str) -> None:
    body, _ = _binary_body(_x_header(12), np.zeros(3, np.float32).tobytes())
    with pytest.raises(ProtocolError, match=match) as e:
        _decode(body, header_length)
    assert e.value.status == 400


@pytest.mark.parametrize(
    ("size", "shape", "match"),
    [
        (8, [1, 3], "input 'x': shape \\[1, 3\\] of FP32 needs 12 bytes, binary_data_size is 8"),
        (400, [1, 3], "input 'x': binary_data_size 400 runs past the body"),
        (-4, [1, 3], "input 'x': binary_data_size -4"),
        ("12", [1, 3], "input 'x': binary_data_size '12'"),
        (12, [4, 3], "input 'x': shape \\[4, 3\\] of FP32 needs 48 bytes"),
    ],
)
def test_binary_size_disagreeing_with_shape_is_400_naming_tensor(size: object, shape: list[int], match: str) -> None:
    body, hl = _binary_body(_x_header(size, shape), np.zeros(3, np.float32).tobytes())
    with pytest.raises(ProtocolError, match=match):
        _decode(body, hl, mbs=8)


def test_huge_claimed_shape_is_refused_without_allocating() -> None:
    spec = TensorSpec("t", "BYTES", (-1, -1))
    body, hl = _binary_body(_x_header(8, [1, 10**12], "BYTES", "t"), b"\0" * 8)
    with pytest.raises(ProtocolError, match="input 't': 1000000000000 BYTES elements need"):
        _decode(body, hl, inputs=[spec])
    fspec = TensorSpec("x", "FP32", (-1, -1))
    body, hl = _binary_body(_x_header(12, [1, 10**12]), b"\0" * 12)
    with pytest.raises(ProtocolError, match="input 'x'.*needs 4000000000000 bytes"):
        _decode(body, hl, inputs=[fspec])


@pytest.mark.parametrize(
    ("blob", "match"),
    [
        (struct.pack("<I", 50) + b"hello", "BYTES element 0 claims 50 bytes, 5 left"),
        (_bytes_blob([b"ab"]) + b"\x01\x00", "BYTES element 1 has a truncated length prefix"),
        (_bytes_blob([b"ab", b"cd"]) + b"zz", "2 bytes left after 2 BYTES"),
    ],
)
def test_truncated_bytes_prefixes_are_400_naming_tensor(blob: bytes, match: str) -> None:
    spec = TensorSpec("t", "BYTES", (-1, 2))
    body, hl = _binary_body(_x_header(len(blob), [1, 2], "BYTES", "t"), blob)
    with pytest.raises(ProtocolError, match=f"input 't': {match}") as e:
        _decode(body, hl, inputs=[spec])
    assert e.value.status == 400


def test_trailing_bytes_after_binary_inputs_are_400() -> None:
    body, hl = _binary_body(_x_header(12), np.zeros(4, np.float32).tobytes())
    with pytest.raises(ProtocolError, match="4 bytes of binary data follow"):
        _decode(body, hl)


def test_misc_faults() -> None:
    with pytest.raises(ProtocolError, match="not valid JSON"):
        _decode(b"{nope")
    with pytest.raises(ProtocolError, match="non-empty 'inputs'"):
        _decode(b"{}")
    with pytest.raises(ProtocolError, match="unknown output 'q'"):
        _decode(orjson.dumps({"inputs": [{"name": "x", "datatype": "FP32", "shape": [1, 3], "data": [1, 2, 3]}], "outputs": [{"name": "q"}]}))
    two = [TensorSpec("a", "FP32", (-1, 1)), TensorSpec("b", "FP32", (-1, 1))]
    with pytest.raises(ProtocolError, match=r"missing input\(s\) \['b'\]"):
        _decode(orjson.dumps({"inputs": [{"name": "a", "datatype": "FP32", "shape": [1, 1], "data": [1]}]}), inputs=two)
    body = orjson.dumps({"inputs": [{"name": n, "datatype": "FP32", "shape": [r, 1], "data": [0] * r} for n, r in (("a", 1), ("b", 2))]})
    with pytest.raises(ProtocolError, match="disagree on the batch dim"):
        _decode(body, inputs=two)


def test_no_batch_dim_model_takes_rows_1() -> None:
    spec = TensorSpec("x", "FP32", (2, 3))
    req = _decode(orjson.dumps({"inputs": [{"name": "x", "datatype": "FP32", "shape": [2, 3], "data": [0] * 6}]}), inputs=[spec], mbs=0)
    assert req.rows == 1 and req.inputs["x"].shape == (2, 3)


def _req(**kw) -> InferRequest:
    return InferRequest(id=kw.pop("id", None), inputs={}, rows=1, outputs=kw.pop("outputs", None), **kw)


def test_json_response_is_flat_strict_json_with_id() -> None:
    y = np.array([[1.5, -2.0]], np.float32)
    body, headers = encode_response("m", "1", _req(id="abc"), {"y": y, "z": np.array([[7]], np.int64)})
    doc = _strict_loads(body)
    assert headers["content-type"] == "application/json"
    assert doc == {
        "model_name": "m",
        "model_version": "1",
        "id": "abc",
        "outputs": [
            {"name": "y", "datatype": "FP32", "shape": [1, 2], "data": [1.5, -2.0]},
            {"name": "z", "datatype": "INT64", "shape": [1, 1], "data": [7]},
        ],
    }


def test_requested_outputs_only_and_bytes_and_fp16_json() -> None:
    outs = {"y": np.zeros((1, 2), np.float32), "s": np.array([[b"hi"]], dtype=object), "h": np.array([0.5], np.float16)}
    body, _ = encode_response("m", "1", _req(outputs=["s", "h"]), outs)
    doc = _strict_loads(body)
    assert [o["name"] for o in doc["outputs"]] == ["s", "h"]
    assert doc["outputs"][0] == {"name": "s", "datatype": "BYTES", "shape": [1, 1], "data": ["hi"]}
    assert doc["outputs"][1]["datatype"] == "FP16" and doc["outputs"][1]["data"] == [0.5]


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_non_finite_json_output_is_refused_with_binary_hint(bad: float) -> None:
    y = np.array([[1.0, bad]], np.float32)
    with pytest.raises(ProtocolError, match="output 'y' holds non-finite.*binary") as e:
        encode_response("m", "1", _req(), {"y": y})
    assert e.value.status == 500
    body, headers = encode_response("m", "1", _req(binary_default=True), {"y": y})  # binary carries them
    n = int(headers[HEADER_LENGTH])
    _strict_loads(body[:n])
    out = np.frombuffer(body[n:], np.float32)
    assert out[0] == 1.0 and (np.isnan(out[1]) if np.isnan(bad) else out[1] == bad)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16])
def test_literal_mode_writes_tritons_nan_and_infinity_tokens(dtype) -> None:
    """``--json-nonfinite literal``: NaN, Infinity, -Infinity tokens (never null), the finite values exact;
    a strict parser refuses the answer (it is not RFC 8259 JSON), Python's json reads it back."""
    y = np.array([[0.1, np.nan, np.inf, -np.inf]], dtype)
    body, _ = encode_response("m", "1", _req(), {"y": y, "z": np.ones((1, 2), dtype)}, nonfinite="literal")
    assert b"null" not in body and b",NaN,Infinity,-Infinity]" in body
    with pytest.raises(ValueError):
        _strict_loads(body)
    doc = json.loads(body)
    got = np.array(doc["outputs"][0]["data"], dtype)
    assert got[0] == y[0, 0] and np.isnan(got[1]) and got[2] == np.inf and got[3] == -np.inf
    assert doc["outputs"][1]["data"] == [1.0, 1.0]  # finite outputs take the usual path
    body, _ = encode_response("m", "1", _req(), {"z": np.ones((1, 2), dtype)}, nonfinite="literal")
    _strict_loads(body)  # all finite: plain JSON whatever the mode


def test_binary_response_roundtrip_per_output_override() -> None:
    y = np.arange(4, dtype=np.float32).reshape(2, 2)
    s = np.array([b"ab", b""], dtype=object)
    req = _req(binary_default=True, binary={"z": False})
    body, headers = encode_response("m", "1", req, {"y": y, "s": s, "z": np.array([3], np.int32)})
    n = int(headers[HEADER_LENGTH])
    assert headers["content-type"] == "application/octet-stream"
    doc = _strict_loads(body[:n])
    sizes = [o.get("parameters", {}).get("binary_data_size") for o in doc["outputs"]]
    assert sizes == [16, 4 + 2 + 4, None] and doc["outputs"][2]["data"] == [3]
    assert len(body) == n + 16 + 10
    np.testing.assert_array_equal(np.frombuffer(body[n : n + 16], np.float32).reshape(2, 2), y)
    assert body[n + 16 :] == _bytes_blob([b"ab", b""])


def test_coalescing_transport_writes_each_response_in_one_piece() -> None:
    from inferperf.serve.http_protocol import CoalescingTransport

    class Raw:
        def __init__(self) -> None:
            self.writes: list[bytes] = []
            self.closed = False

        def write(self, data: bytes) -> None:
            self.writes.append(data)

        def close(self) -> None:
            self.closed = True

        def is_closing(self) -> bool:
            return self.closed

    raw = Raw()
    t = CoalescingTransport(raw)
    t.write(b"HTTP/1.1 100 Continue\r\n\r\n")  # interim: at once
    t.write(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\n")  # held ...
    assert raw.writes == [b"HTTP/1.1 100 Continue\r\n\r\n"]
    t.write(b"ok")  # ... and sent with its body
    t.write(b"HTTP/1.1 204 No Content\r\n\r\n")
    t.write(b"")  # an empty body still flushes
    t.write(b"HTTP/1.1 500 Internal Server Error\r\ncontent-length: 1\r\n\r\n")
    t.close()  # close flushes what is held
    assert raw.writes[1:] == [b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok", b"HTTP/1.1 204 No Content\r\n\r\n",
                              b"HTTP/1.1 500 Internal Server Error\r\ncontent-length: 1\r\n\r\n"]  # fmt: skip
    assert raw.closed and t.is_closing()


@pytest.mark.parametrize("n", [3, 30_000])  # 30,000 floats: a body over 64 KiB, first tried by simdjson
def test_nan_and_infinity_tokens_are_read_as_triton_reads_them(n: int) -> None:
    """perf_analyzer's JSON tensors carry NaN / Infinity / -Infinity (rapidjson's kWriteNanAndInfFlag), and
    Triton reads them (kParseNanAndInfFlag): so does inferperf, on both parser paths."""
    values = ["NaN", "Infinity", "-Infinity", *(["1.5"] * (n - 3))]
    body = ('{"inputs":[{"name":"x","datatype":"FP32","shape":[1,%d],"data":[%s]}]}' % (n, ",".join(values))).encode()
    x = _decode(body, inputs=[TensorSpec("x", "FP32", (-1, n))]).inputs["x"]
    assert x.dtype == np.float32 and x.shape == (1, n)
    assert np.isnan(x[0, 0]) and x[0, 1] == np.inf and x[0, 2] == -np.inf and (x[0, 3:] == 1.5).all()


@pytest.mark.parametrize("body", [b'{"inputs": NaNa}', b'{"inputs": [NaN', b'{"id": "NaN", nope}', b"nan"])
def test_bodies_with_nonfinite_lookalikes_stay_invalid_json(body: bytes) -> None:
    with pytest.raises(ProtocolError, match="request body is not valid JSON") as e:
        _decode(body)
    assert e.value.status == 400
