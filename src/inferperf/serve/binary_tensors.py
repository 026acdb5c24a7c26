"""Triton's binary tensor extension: tensors carried as raw bytes after the JSON header
(``binary_data_size``), decoded as zero-copy views and encoded from the arrays' buffers. BYTES elements are each a
4-byte little-endian length and the bytes. The binary codec beside the JSON one (:mod:`.protocol`,
:mod:`.json_tensors`), for every front end that carries raw tensors (HTTP today; gRPC's raw contents and shared
memory next).

Source: Triton's docs/protocol/extension_binary_data.md.
"""

from __future__ import annotations

import math
import struct
from typing import Any

import numpy as np

from .tensor_types import NUMPY_DTYPE, ProtocolError

_U32 = struct.Struct("<I")


def decode_binary(name: str, body: bytes, offset: int, size: Any, datatype: str, shape: tuple[int, ...]) -> np.ndarray:
    """Input ``name``'s tensor of ``shape`` from ``size`` bytes of ``body`` at ``offset``: a zero-copy
    ``np.frombuffer`` view, or BYTES elements (:func:`decode_bytes`).

    Raises:
        ProtocolError: a size that is not a non-negative integer, runs past the body or does not match the shape.
    """
    if type(size) is not int or size < 0:
        raise ProtocolError(f"input '{name}': binary_data_size {size!r} must be a non-negative integer")
    if offset + size > len(body):
        raise ProtocolError(
            f"input '{name}': binary_data_size {size} runs past the body ({len(body) - offset} bytes left)"
        )
    n = math.prod(shape)
    if datatype == "BYTES":
        return decode_bytes(name, body, offset, size, n).reshape(shape)
    dtype = NUMPY_DTYPE[datatype]
    if n * dtype.itemsize != size:
        raise ProtocolError(
            f"input '{name}': shape {list(shape)} of {datatype} needs {n * dtype.itemsize} bytes,"
            f" binary_data_size is {size}"
        )
    return np.frombuffer(body, dtype=dtype, count=n, offset=offset).reshape(shape)


def decode_bytes(name: str, body: bytes, offset: int, size: int, n: int) -> np.ndarray:
    """BYTES elements: 4-byte little-endian length, then the bytes; exactly ``n`` of them in ``size`` bytes."""
    if n * 4 > size:
        raise ProtocolError(f"input '{name}': {n} BYTES elements need at least {n * 4} bytes, got {size}")
    end, pos = offset + size, offset
    items = []
    for i in range(n):
        if pos + 4 > end:
            raise ProtocolError(f"input '{name}': BYTES element {i} has a truncated length prefix")
        (length,) = _U32.unpack_from(body, pos)
        pos += 4
        if pos + length > end:
            raise ProtocolError(f"input '{name}': BYTES element {i} claims {length} bytes, {end - pos} left")
        items.append(body[pos : pos + length])
        pos += length
    if pos != end:
        raise ProtocolError(f"input '{name}': {end - pos} bytes left after {n} BYTES elements")
    arr = np.empty(n, dtype=object)
    arr[:] = items
    return arr


def binary_data(arr: np.ndarray) -> bytes | memoryview:
    """``arr`` as binary tensor data: the raw buffer (a view), or BYTES elements each behind its 4-byte
    little-endian length."""
    if arr.dtype.kind in "OSU":
        parts = []
        for x in arr.reshape(-1).tolist():
            b = x if isinstance(x, bytes) else str(x).encode()
            parts += [_U32.pack(len(b)), b]
        return b"".join(parts)
    return memoryview(np.ascontiguousarray(arr)).cast("B")


__all__ = ["binary_data", "decode_binary", "decode_bytes"]
