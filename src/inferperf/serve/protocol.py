"""KServe v2 (Open Inference Protocol) REST tensors and Triton's binary tensor extension.

Decoding turns a request body into numpy arrays validated against the model's
tensors: JSON ``data`` (flat or nested, row-major) goes straight into one
``np.array`` of the declared dtype (bodies over 64 KiB through simdjson, whose
flat numeric arrays become numpy buffers without Python floats:
:mod:`inferperf.serve.json_tensors`); binary tensors (``binary_data_size`` plus
the ``Inference-Header-Content-Length`` header) are zero-copy
``np.frombuffer`` views of the body. Every fault is a :class:`ProtocolError`
(400 unless stated) whose message names the tensor and what was expected.
Nothing is allocated from a size the client claims before the body is known
to hold it: a shape of 10^12 elements with 12 bytes of data is refused, not
allocated.

Request JSON may carry the non-standard number tokens ``NaN``, ``Infinity`` and ``-Infinity``, which
Triton's server accepts (rapidjson's ``kParseNanAndInfFlag``) and perf_analyzer sends; such a body is
read with Python's ``json`` (slower) after the fast parsers refuse it.

Encoding writes the response in one piece: JSON via orjson (flat ``data``), or
the JSON header followed by the raw tensors when the client asked for binary
(``parameters.binary_data_output`` on the request or ``binary_data`` on an
output). Non-finite floats (NaN, +-Inf) cannot be written as JSON numbers and
are not turned into ``null``: a JSON answer holding them is refused with 500
and a message telling the client to ask for that output as binary data, unless
the server was started with ``--json-nonfinite literal`` (Triton's ``NaN`` /
``Infinity`` tokens).

A requested output's ``classification`` parameter answers it as its top-K classes (Triton's
classification extension, :mod:`inferperf.serve.classification`), labelled from the output spec's
``labels``.

Sources: https://github.com/kserve/open-inference-protocol (REST), Triton's
docs/protocol/extension_binary_data.md.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import orjson

from . import json_tensors
from .classification import ClassificationError, top_k
from .binary_tensors import binary_data, decode_binary
from .request_checks import check_input, request_rows
from .sequences import sequence_params
from .shm import serving as shm_serving
from .tensor_types import NUMPY_DTYPE, ProtocolError, TensorLike, datatype_of

HEADER_LENGTH = "inference-header-content-length"


@dataclass
class InferRequest:
    """A decoded, validated request.

    ``inputs`` name -> array (shape as sent, batch dim first when the model batches);
    ``rows``: batch rows (1 when ``max_batch_size`` is 0); ``outputs``: requested
    output names in order (None = all); ``binary``: name -> send as binary; ``classification``: name ->
    K, outputs to answer as their top-K classes (Triton's classification extension), with ``labels``
    (name -> labels by class index) and ``batched`` (the model has a batch dim).
    """

    id: str | None
    inputs: dict[str, np.ndarray]
    rows: int
    outputs: list[str] | None
    binary: dict[str, bool] = field(default_factory=dict)
    binary_default: bool = False
    classification: dict[str, int] = field(default_factory=dict)
    labels: dict[str, tuple[str, ...] | None] = field(default_factory=dict)
    batched: bool = False
    shm_outputs: dict[str, dict[str, Any]] = field(default_factory=dict)
    sequence: Any = None


def _as_dict(value: Any, what: str) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ProtocolError(f"{what} must be a JSON object, got {type(value).__name__}")
    return value


_DECIMAL = re.compile(r"-?[0-9]+")


def _parse_header(body: bytes, header_length: str | None) -> tuple[dict[str, Any], int]:
    """Parse the JSON header; returns (header, offset of the binary part)."""
    end = len(body)
    if header_length is not None:
        text = header_length.strip()
        if not _DECIMAL.fullmatch(text):  # ASCII digits only: str.isdigit() also takes '²' and '--5', int() not
            raise ProtocolError(f"Inference-Header-Content-Length '{header_length}' is not a number of bytes")
        end = int(text)
        if end < 0:
            raise ProtocolError(f"Inference-Header-Content-Length {end} is negative: give the JSON header's length")
        if end == 0:
            raise ProtocolError(
                "raw binary requests (Inference-Header-Content-Length: 0) are not supported: send the JSON header"
            )
        if end > len(body):
            raise ProtocolError(
                f"Inference-Header-Content-Length {end} is larger than the body ({len(body)} bytes)"
            )
    text = body[:end] if end != len(body) else body
    try:
        if end >= json_tensors.MIN_BYTES and json_tensors.available():  # big JSON tensors: no Python floats
            header = json_tensors.parse_header(text)
        else:
            header = orjson.loads(text)
    except (orjson.JSONDecodeError, ValueError) as e:
        header = _nonfinite_json(text, e)
    if not isinstance(header, dict):
        raise ProtocolError("request body must be a JSON object with an 'inputs' list")
    return header, end


def _nonfinite_json(text: bytes, error: Exception) -> Any:
    """A body the strict parsers refused: read it if it is JSON with Triton's NaN/Infinity tokens.

    Raises:
        ProtocolError: 400 with the strict parser's message otherwise.
    """
    header = json_tensors.loads_nonfinite(text)
    if header is json_tensors.NOT_JSON:
        raise ProtocolError(f"request body is not valid JSON: {error}")
    return header


def _decode_json_data(name: str, data: Any, datatype: str, shape: tuple[int, ...]) -> np.ndarray:
    n = math.prod(shape)
    if json_tensors.is_lazy(data):  # a large body parsed by simdjson: flat numbers go straight to numpy
        fast = json_tensors.numeric_data(data, NUMPY_DTYPE[datatype], n)
        if fast is not None:
            return fast.reshape(shape)
        data = data.as_list()  # anything else takes the list path below, with its own checks and messages
    if not isinstance(data, list):
        raise ProtocolError(f"input '{name}': 'data' must be a JSON list")
    try:
        if datatype == "BYTES":
            flat = _flatten(data)
            if not all(isinstance(x, str) for x in flat):
                raise ValueError("BYTES elements must be strings")
            arr = np.empty(len(flat), dtype=object)
            arr[:] = [x.encode() for x in flat]
        else:
            arr = np.array(data, dtype=NUMPY_DTYPE[datatype])
            if datatype == "BOOL" and not all(isinstance(x, bool) for x in _flatten(data)):
                raise ValueError("BOOL elements must be true or false")
            if arr.dtype.kind in "iu" and any(type(x) is float for x in _flatten(data)):
                raise ValueError("integer elements must not have a fraction or exponent")  # numpy would truncate
    except (ValueError, TypeError, OverflowError) as e:
        raise ProtocolError(f"input '{name}': 'data' does not hold {datatype} values ({e})") from None
    if arr.size != n:
        raise ProtocolError(f"input '{name}': shape {list(shape)} needs {n} elements, 'data' holds {arr.size}")
    return arr.reshape(shape)


def _flatten(data: list[Any]) -> list[Any]:
    if not any(isinstance(x, list) for x in data):
        return data
    out: list[Any] = []
    stack = [iter(data)]
    while stack:
        for x in stack[-1]:
            if isinstance(x, list):
                stack.append(iter(x))
                break
            out.append(x)
        else:
            stack.pop()
    return out


def decode_request(
    body: bytes,
    header_length: str | None,
    inputs: Sequence[TensorLike],
    outputs: Sequence[TensorLike],
    max_batch_size: int,
    shm: Any = None,
) -> InferRequest:
    """Decode and validate one ``/infer`` body.

    Args:
        body: the whole request body (binary views point into it; keep it alive).
        header_length: the ``Inference-Header-Content-Length`` header (None = the body is all JSON).
        inputs, outputs: the model's tensors (shape with -1 for free dims; batch dim included when
            ``max_batch_size`` > 0).
        max_batch_size: Triton's meaning: most rows per request; 0 = no batch dim.
        shm: the server's :class:`~inferperf.serve.shm.SharedMemory` (inputs and outputs that name a
            ``shared_memory_region``), or None (such a request is refused).

    Raises:
        ProtocolError: 400 naming the tensor (unknown/missing input, datatype, shape, element count,
            rows over ``max_batch_size``, malformed binary data, a shared-memory span outside its region);
            unknown requested outputs; 403 for shared memory on a server that does not allow it.
    """
    header, offset = _parse_header(body, header_length)
    entries = header.get("inputs")
    if not isinstance(entries, list) or not entries:
        raise ProtocolError("request needs a non-empty 'inputs' list")
    specs = {s.name: s for s in inputs}
    arrays: dict[str, np.ndarray] = {}
    for entry in entries:
        if not isinstance(entry, dict) or not isinstance(entry.get("name"), str):
            raise ProtocolError("each input must be an object with a 'name'")
        name = entry["name"]
        spec, shape = check_input(name, entry.get("datatype"), entry.get("shape"), specs, arrays)
        params = _as_dict(entry.get("parameters"), f"input '{name}' parameters")
        if "shared_memory_region" in params:
            if "data" in entry or "binary_data_size" in params:
                raise ProtocolError(f"input '{name}': give 'data', binary_data_size or shared_memory_region, "
                                    "not two")
            arrays[name] = shm_serving(shm).read(name, params, spec.datatype, shape)
        elif "binary_data_size" in params:
            if "data" in entry:
                raise ProtocolError(f"input '{name}': give 'data' or binary_data_size, not both")
            size = params["binary_data_size"]
            arrays[name] = decode_binary(name, body, offset, size, spec.datatype, shape)
            offset += size
        elif "data" in entry:
            arrays[name] = _decode_json_data(name, entry["data"], spec.datatype, shape)
        else:
            raise ProtocolError(f"input '{name}' has neither 'data' nor parameters.binary_data_size")
    if offset != len(body):
        raise ProtocolError(f"{len(body) - offset} bytes of binary data follow the last binary input: check sizes")
    rows = request_rows(arrays, inputs, max_batch_size)
    req_params = _as_dict(header.get("parameters"), "request parameters")
    request_id = header.get("id")
    req = InferRequest(
        id=str(request_id) if request_id is not None else None,
        inputs=arrays,
        rows=rows,
        outputs=None,
        binary_default=bool(req_params.get("binary_data_output", False)),
        batched=max_batch_size > 0,
        sequence=sequence_params(req_params),
    )
    _requested_outputs(header.get("outputs"), {s.name: s for s in outputs}, req)
    return req


def _requested_outputs(entries: Any, known: dict[str, TensorLike], req: InferRequest) -> None:
    if entries is None:
        return
    if not isinstance(entries, list):
        raise ProtocolError("'outputs' must be a list of {\"name\": ...} objects")
    names: list[str] = []
    for entry in entries:
        name = entry.get("name") if isinstance(entry, dict) else None
        if name not in known:
            raise ProtocolError(f"unknown output {name!r}: the model's outputs are {sorted(known)}")
        params = _as_dict(entry.get("parameters"), f"output '{name}' parameters")
        if "classification" in params:
            count = params["classification"]
            if type(count) is not int or count < 0:
                raise ProtocolError(f"output '{name}': classification {count!r} must be a number of classes >= 0")
            if count:
                req.classification[name] = count
                req.labels[name] = getattr(known[name], "labels", None)
        if "binary_data" in params:
            req.binary[name] = bool(params["binary_data"])
        if "shared_memory_region" in params:
            req.shm_outputs[name] = params
        names.append(name)
    req.outputs = names or None


def _json_data(name: str, arr: np.ndarray, nonfinite: str = "error") -> Any:
    flat = np.ascontiguousarray(arr).reshape(-1)
    if flat.dtype.kind == "f" and not np.isfinite(flat).all():
        if nonfinite == "literal":  # Triton's tokens; Python's json writes exactly NaN, Infinity, -Infinity
            import json

            return orjson.Fragment(json.dumps(flat.tolist(), separators=(",", ":")))
        raise ProtocolError(
            f"output '{name}' holds non-finite values (NaN/Inf), which JSON cannot carry:"
            " request it as binary (parameters.binary_data_output=true or outputs[].parameters.binary_data=true),"
            " or start the server with --json-nonfinite literal to write NaN/Infinity tokens as Triton does",
            status=500,
        )
    if flat.dtype.kind in "OSU":
        try:
            return [x.decode() if isinstance(x, bytes) else str(x) for x in flat.tolist()]
        except UnicodeDecodeError:
            raise ProtocolError(f"output '{name}' holds non-UTF-8 bytes: request it as binary", status=500) from None
    return flat.astype(np.float32) if flat.dtype == np.float16 else flat  # orjson has no float16


def answered(name: str, arr: np.ndarray, req: InferRequest) -> np.ndarray:
    """Output ``name`` as ``req`` asked it: its top-K classes when it asked ``classification`` (Triton's
    extension, :func:`~inferperf.serve.classification.top_k`), else ``arr`` itself.

    Raises:
        ProtocolError: 400 for an output whose dtype Triton does not classify.
    """
    if name not in req.classification:
        return arr
    try:
        return top_k(arr, req.classification[name], req.labels.get(name), req.batched)
    except ClassificationError as e:
        raise ProtocolError(f"output '{name}': {e}") from None


def encode_response(
    model_name: str, model_version: str, req: InferRequest, outputs: dict[str, np.ndarray],
    nonfinite: str = "error", shm: Any = None,
) -> tuple[bytes, dict[str, str]]:
    """Encode the answer to ``req`` in one piece.

    Args:
        outputs: name -> array for this request's rows (only the requested ones are sent, in the
            requested order; all, in the given order, when none were requested).
        nonfinite: NaN/+-Inf in a JSON output: ``"error"`` (500) or ``"literal"`` (Triton's ``NaN``,
            ``Infinity``, ``-Infinity`` tokens); see ``ServeOptions.json_nonfinite``.
        shm: the server's shared memory, for outputs asked into a region (``req.shm_outputs``).

    Returns:
        (body, headers): headers hold ``content-type`` and, when any output is binary,
        ``inference-header-content-length``.

    Raises:
        ProtocolError: 500 when an output cannot be written as JSON (non-finite floats, non-UTF-8 bytes);
            400 for an output asked as classes whose dtype Triton does not classify.
    """
    names = req.outputs or list(outputs)
    meta: list[dict[str, Any]] = []
    blobs: list[bytes | memoryview] = []
    for name in names:
        arr = answered(name, outputs[name], req)
        entry: dict[str, Any] = {"name": name, "datatype": datatype_of(arr), "shape": list(arr.shape)}
        params = req.shm_outputs.get(name)
        if params is not None:  # written into the client's region: no data and no parameters in the answer
            shm_serving(shm).write(name, params, arr)  # (Triton's C++ client reads binary_data_size from any parameters)
        elif req.binary.get(name, req.binary_default):
            blob = binary_data(arr)
            entry["parameters"] = {"binary_data_size": len(blob) if isinstance(blob, bytes) else blob.nbytes}
            blobs.append(blob)
        else:
            entry["data"] = _json_data(name, arr, nonfinite)
        meta.append(entry)
    doc: dict[str, Any] = {"model_name": model_name, "model_version": model_version, "outputs": meta}
    if req.id is not None:
        doc["id"] = req.id
    head = orjson.dumps(doc, option=orjson.OPT_SERIALIZE_NUMPY)
    if not blobs:
        return head, {"content-type": "application/json"}
    return b"".join([head, *blobs]), {
        "content-type": "application/octet-stream",
        HEADER_LENGTH: str(len(head)),
    }
