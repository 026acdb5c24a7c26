"""A request's tensors checked against the model's, whatever form carried them (KServe v2 JSON, Triton's binary
extension, and next gRPC and shared memory): one home for the checks, so every transport refuses the same
requests with the same words.

Every fault is a :class:`~inferperf.serve.tensor_types.ProtocolError` (400) naming the tensor and what the model
expects. Sources: https://github.com/kserve/open-inference-protocol (inference request); Triton's
``max_batch_size`` meaning (model_configuration.md: most rows per request, 0 = no batch dim).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from .tensor_types import ProtocolError, TensorLike


def check_shape(name: str, shape: Any) -> tuple[int, ...]:
    """``shape`` as sent (a list of ints >= 0) as a tuple.

    Raises:
        ProtocolError: not a list of integers, or a negative dim.
    """
    if not isinstance(shape, (list, tuple)) or not all(type(d) is int for d in shape):
        raise ProtocolError(f"input '{name}': 'shape' must be a list of integers, got {shape!r}")
    if any(d < 0 for d in shape):
        raise ProtocolError(f"input '{name}': shape {list(shape)} has a negative dim")
    return tuple(shape)


def check_input(name: str, datatype: Any, shape_sent: Any, specs: Mapping[str, TensorLike],
                seen: Mapping[str, Any]) -> tuple[TensorLike, tuple[int, ...]]:
    """The model's spec of input ``name`` sent as ``datatype`` (KServe v2 name, e.g. ``FP32``) and
    ``shape_sent``, and that shape as a tuple; ``seen``: the inputs already taken from this request.

    Raises:
        ProtocolError: an unknown input, one given twice, a malformed shape (:func:`check_shape`), a datatype
            or shape the model does not take (a spec dim of -1 takes any size).
    """
    spec = specs.get(name)
    if spec is None:
        raise ProtocolError(f"unknown input '{name}': the model's inputs are {sorted(specs)}")
    if name in seen:
        raise ProtocolError(f"input '{name}' is given twice")
    shape = check_shape(name, shape_sent)
    if datatype != spec.datatype:
        raise ProtocolError(f"input '{name}': datatype {datatype!r} does not match the model's {spec.datatype}")
    expected = list(spec.shape)
    ok = len(shape) == len(expected) and all(e < 0 or e == d for e, d in zip(expected, shape, strict=True))
    if not ok:
        raise ProtocolError(f"input '{name}': shape {list(shape)} does not match the model's {expected} (-1 = any)")
    return spec, shape


def request_rows(arrays: Mapping[str, np.ndarray], specs: Sequence[TensorLike], max_batch_size: int) -> int:
    """The request's batch rows once every input is decoded: 1 when the model has no batch dim
    (``max_batch_size`` 0), else the inputs' common first dim, within 1..``max_batch_size``.

    Raises:
        ProtocolError: a missing input, inputs that disagree on their rows, rows outside 1..max_batch_size.
    """
    missing = [s.name for s in specs if s.name not in arrays]
    if missing:
        raise ProtocolError(f"missing input(s) {missing}: the model needs {[s.name for s in specs]}")
    if max_batch_size <= 0:
        return 1
    rows = {name: (a.shape[0] if a.ndim else 0) for name, a in arrays.items()}
    first = next(iter(rows.values()))
    if any(r != first for r in rows.values()):
        raise ProtocolError(f"inputs disagree on the batch dim (rows): {rows}")
    if first < 1 or first > max_batch_size:
        raise ProtocolError(f"batch of {first} rows is outside 1..max_batch_size ({max_batch_size})")
    return first


__all__ = ["check_input", "check_shape", "request_rows"]
