"""KServe v2 / Triton gRPC tensors: a ``ModelInferRequest`` decoded into the same
:class:`~inferperf.serve.protocol.InferRequest` the HTTP forms give, and the answer encoded as a
``ModelInferResponse``.

Both request forms are read: ``raw_input_contents`` (one bytes entry per input, in the inputs' order; the layout
of Triton's binary extension, BYTES elements each behind a 4-byte little-endian length: decoded by
:func:`~inferperf.serve.binary_tensors.decode_binary`, zero-copy) and the typed ``contents`` of each input (the
``InferTensorContents`` field of its datatype). Inputs are checked by :mod:`.request_checks`, so a request is
refused with the same words over gRPC as over HTTP. Outputs are answered in ``raw_output_contents``, as Triton's
gRPC server answers (tritonclient's ``as_numpy`` reads them); a requested output's ``classification``
parameter answers its top-K classes (Triton's classification extension).

Sources: triton-inference-server/common ``protobuf/grpc_service.proto`` (the vendored descriptor); KServe's
``grpc_predict_v2.proto`` (the same field numbers); Triton's docs/protocol/extension_classification.md.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from .binary_tensors import binary_data, decode_binary
from .protocol import InferRequest, answered
from .request_checks import check_input, request_rows
from .sequences import sequence_params
from .shm import serving as shm_serving
from .tensor_types import NUMPY_DTYPE, ProtocolError, TensorLike, datatype_of
from ..workload.triton_protos import message

#: KServe v2 datatype -> its ``InferTensorContents`` field (FP16 and BF16 have none: raw contents only)
TYPED_FIELD = {"BOOL": "bool_contents", "INT8": "int_contents", "INT16": "int_contents", "INT32": "int_contents",
               "INT64": "int64_contents", "UINT8": "uint_contents", "UINT16": "uint_contents",
               "UINT32": "uint_contents", "UINT64": "uint64_contents", "FP32": "fp32_contents",
               "FP64": "fp64_contents", "BYTES": "bytes_contents"}  # fmt: skip


def parameter(params: Any, key: str) -> Any:
    """The value of ``InferParameter`` ``key`` in a parameters map (bool, int, str, float or uint), None if absent."""
    if key not in params:
        return None
    p = params[key]
    which = p.WhichOneof("parameter_choice")
    return getattr(p, which) if which else None


def _typed(name: str, contents: Any, datatype: str, shape: tuple[int, ...]) -> np.ndarray:
    """Input ``name`` from its typed contents: exactly ``prod(shape)`` elements of its datatype's field."""
    field = TYPED_FIELD.get(datatype)
    if field is None:
        raise ProtocolError(f"input '{name}': {datatype} has no typed contents field: send it in raw_input_contents")
    values = getattr(contents, field)
    n = math.prod(shape)
    if len(values) != n:
        raise ProtocolError(f"input '{name}': shape {list(shape)} needs {n} elements, contents.{field} holds "
                            f"{len(values)}")
    if datatype == "BYTES":
        arr = np.empty(n, dtype=object)
        arr[:] = list(values)
        return arr.reshape(shape)
    dtype = NUMPY_DTYPE[datatype]
    if dtype.kind in "iu":  # int_contents / uint_contents carry 8- and 16-bit types in 32 bits: check the range
        wide = np.array(values, dtype=np.uint64 if dtype.kind == "u" else np.int64)
        info = np.iinfo(dtype)
        if wide.size and (wide.min() < info.min or wide.max() > info.max):
            raise ProtocolError(f"input '{name}': contents.{field} holds values outside {datatype}'s range "
                                f"[{info.min}, {info.max}]")
        return wide.astype(dtype).reshape(shape)
    return np.array(values, dtype=dtype).reshape(shape)


def _shm_params(params: Any, tensor: str) -> dict[str, Any] | None:
    """A tensor's ``shared_memory_region`` / ``_offset`` / ``_byte_size`` parameters as the HTTP form's dict, or
    None when it names no region.

    Raises:
        ProtocolError: an offset or byte size without a region (Triton's words).
    """
    region = parameter(params, "shared_memory_region")
    if region is None:
        for key in ("shared_memory_offset", "shared_memory_byte_size"):
            if key in params:
                raise ProtocolError(f"'{key}' can not be specified without 'shared_memory_region' parameter for "
                                    f"tensor '{tensor}'")
        return None
    return {"shared_memory_region": region, "shared_memory_offset": parameter(params, "shared_memory_offset") or 0,
            "shared_memory_byte_size": parameter(params, "shared_memory_byte_size")}


def decode_infer(msg: Any, inputs: Sequence[TensorLike], outputs: Sequence[TensorLike],
                 max_batch_size: int, shm: Any = None) -> InferRequest:
    """Decode and validate one ``ModelInferRequest`` against the model's tensors.

    Args:
        msg: the request message (raw views point into its ``raw_input_contents``: keep it alive).
        inputs, outputs: the model's tensors (shape with -1 for free dims; batch dim included when
            ``max_batch_size`` > 0).
        max_batch_size: Triton's meaning: most rows per request; 0 = no batch dim.
        shm: the server's :class:`~inferperf.serve.shm.SharedMemory` for inputs and outputs whose parameters name
            a ``shared_memory_region`` (None: such a request is refused, 403). As Triton's gRPC server reads
            them, ``raw_input_contents`` holds one entry per input that is neither in shared memory nor typed.

    Raises:
        ProtocolError: 400 naming the tensor (unknown/missing input, datatype, shape, element or byte count,
            raw contents not one per input, both raw and typed contents, rows over ``max_batch_size``, a shared
            memory span outside its region), an unknown requested output or a bad ``classification`` parameter.
    """
    if not msg.inputs:
        raise ProtocolError("request needs a non-empty 'inputs' list")
    raw = msg.raw_input_contents
    in_shm = [_shm_params(t.parameters, t.name) for t in msg.inputs]
    carried = sum(p is None for p in in_shm)
    if raw and len(raw) != carried:
        raise ProtocolError(f"{len(raw)} raw_input_contents for {carried} inputs not in shared memory: give one per "
                            "such input (in the inputs' order), or none and typed contents")
    specs = {s.name: s for s in inputs}
    arrays: dict[str, np.ndarray] = {}
    index = 0
    for t, params in zip(msg.inputs, in_shm, strict=True):
        spec, shape = check_input(t.name, t.datatype, list(t.shape), specs, arrays)
        if params is not None:
            if t.HasField("contents"):
                raise ProtocolError(f"input '{t.name}': give shared_memory_region or typed contents, not both")
            arrays[t.name] = shm_serving(shm).read(t.name, params, spec.datatype, shape)
        elif raw:
            if t.HasField("contents"):
                raise ProtocolError(f"input '{t.name}': give raw_input_contents or typed contents, not both")
            blob = raw[index]  # upb copies the bytes out at each access: once
            index += 1
            arrays[t.name] = decode_binary(t.name, blob, 0, len(blob), spec.datatype, shape)
        else:
            arrays[t.name] = _typed(t.name, t.contents, spec.datatype, shape)
    params = {k: parameter(msg.parameters, k) for k in ("sequence_id", "sequence_start", "sequence_end")
              if k in msg.parameters}
    req = InferRequest(id=msg.id or None, inputs=arrays, rows=request_rows(arrays, inputs, max_batch_size),
                       outputs=None, binary_default=True, batched=max_batch_size > 0,
                       sequence=sequence_params(params))
    known = {s.name: s for s in outputs}
    names: list[str] = []
    for o in msg.outputs:
        if o.name not in known:
            raise ProtocolError(f"unknown output {o.name!r}: the model's outputs are {sorted(known)}")
        count = parameter(o.parameters, "classification")
        params = _shm_params(o.parameters, o.name)
        if params is not None:
            if count:
                raise ProtocolError(f"output '{o.name}': can't set both 'shared_memory_region' and 'classification'")
            req.shm_outputs[o.name] = params
        if count is not None:
            if type(count) is not int or count < 0:
                raise ProtocolError(f"output '{o.name}': classification {count!r} must be a number of classes >= 0")
            if count:
                req.classification[o.name] = count
                req.labels[o.name] = getattr(known[o.name], "labels", None)
        names.append(o.name)
    req.outputs = names or None
    return req


def encode_infer(model_name: str, model_version: str, req: InferRequest, outputs: dict[str, np.ndarray],
                 shm: Any = None) -> Any:
    """The ``ModelInferResponse`` to ``req``: the requested outputs in the requested order (all, in the given
    order, when none were requested), each as name, datatype and shape with its bytes in ``raw_output_contents``;
    an output asked into shared memory (``req.shm_outputs``) is written there through ``shm`` and its
    ``raw_output_contents`` entry left empty (Triton's gRPC server keeps one entry per output).

    Raises:
        ProtocolError: 400 for an output asked as classes whose dtype Triton does not classify; a shared memory
            span too small or outside its region (:class:`~inferperf.serve.shm.ShmError`).
    """
    resp = message("inference.ModelInferResponse")(model_name=model_name, model_version=model_version,
                                                    id=req.id or "")
    for name in req.outputs or list(outputs):
        arr = answered(name, outputs[name], req)
        resp.outputs.add(name=name, datatype=datatype_of(arr), shape=arr.shape)
        params = req.shm_outputs.get(name)
        if params is not None:
            shm_serving(shm).write(name, params, arr)
            resp.raw_output_contents.append(b"")
            continue
        blob = binary_data(arr)
        resp.raw_output_contents.append(blob if isinstance(blob, bytes) else blob.tobytes())
    return resp


__all__ = ["TYPED_FIELD", "decode_infer", "encode_infer", "parameter"]
