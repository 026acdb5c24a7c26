"""The KServe v2 tensor types: datatype <-> numpy dtype and Triton's ``data_type``, a tensor's spec, and the
protocol's error. The vocabulary every codec (JSON, binary, and the next: gRPC, shared memory) and the
classification extension share, in a module that imports none of them.

Sources: https://github.com/kserve/open-inference-protocol (tensor data types); Triton's model_config.proto
(``data_type``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

#: KServe v2 datatype -> numpy dtype (BYTES -> object array of ``bytes``).
NUMPY_DTYPE: dict[str, Any] = {
    "BOOL": np.dtype(np.bool_), "UINT8": np.dtype(np.uint8), "UINT16": np.dtype(np.uint16),
    "UINT32": np.dtype(np.uint32), "UINT64": np.dtype(np.uint64), "INT8": np.dtype(np.int8),
    "INT16": np.dtype(np.int16), "INT32": np.dtype(np.int32), "INT64": np.dtype(np.int64),
    "FP16": np.dtype(np.float16), "FP32": np.dtype(np.float32), "FP64": np.dtype(np.float64),
    "BYTES": np.dtype(object),
}  # fmt: skip
_DATATYPE_OF = {v: k for k, v in NUMPY_DTYPE.items() if k != "BYTES"}
#: KServe datatype -> Triton model-config ``data_type``.
TRITON_DATA_TYPE = {k: ("TYPE_STRING" if k == "BYTES" else f"TYPE_{k}") for k in NUMPY_DTYPE}


class ProtocolError(Exception):
    """A request the protocol refuses; ``status`` is the HTTP code (400 unless stated)."""

    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.status = status


class TensorLike(Protocol):
    """Model tensor metadata: ``name``, KServe ``datatype`` and ``shape`` (-1 = free, batch dim included)."""

    name: str
    datatype: str
    shape: Sequence[int]


@dataclass(frozen=True)
class TensorSpec:
    """A model input or output as the protocol sees it (``shape`` has -1 for free dims); ``labels``: an
    output's class labels by index, for the classification extension (None = none)."""

    name: str
    datatype: str
    shape: tuple[int, ...]
    labels: tuple[str, ...] | None = field(default=None, compare=False, repr=False)


def datatype_of(array: np.ndarray) -> str:
    """KServe datatype of a numpy array (object/str arrays are BYTES).

    Raises:
        ProtocolError: 500 for a dtype KServe cannot carry.
    """
    if array.dtype.kind in "OSU":
        return "BYTES"
    try:
        return _DATATYPE_OF[array.dtype]
    except KeyError:
        raise ProtocolError(f"output dtype {array.dtype} has no KServe v2 datatype", status=500) from None



__all__ = ["NUMPY_DTYPE", "TRITON_DATA_TYPE", "ProtocolError", "TensorLike", "TensorSpec", "datatype_of"]
