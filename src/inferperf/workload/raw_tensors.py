"""Tensors as KServe v2 raw contents (Triton's binary tensor layout), as a client sends them in
``raw_input_contents``, an HTTP binary body or a shared-memory region.

Source: triton-inference-server/server ``docs/protocol/extension_binary_data.md`` (BYTES elements each behind a
4-byte little-endian length; other types little-endian, row-major).
"""

from __future__ import annotations

from typing import Any

import numpy as np


def raw_contents(arr: Any) -> bytes:
    """``arr`` (numpy array, any shape) as KServe v2 raw contents: its little-endian bytes, row-major, or for
    BYTES (object, bytes or str dtypes) each element behind a 4-byte little-endian length."""
    if arr.dtype.kind in "OSU":
        parts = []
        for x in arr.reshape(-1).tolist():
            b = x if isinstance(x, bytes) else str(x).encode()
            parts += [len(b).to_bytes(4, "little"), b]
        return b"".join(parts)
    return np.ascontiguousarray(arr).astype(arr.dtype.newbyteorder("<"), copy=False).tobytes()


__all__ = ["raw_contents"]
