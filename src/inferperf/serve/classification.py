"""Triton's classification extension: an output returned as its top-K classes instead of its values.

A requested output with ``parameters: {"classification": K}`` is answered as a BYTES tensor of shape
``[rows, min(K, N)]`` (``[min(K, N)]`` for a model without a batch dim), N the elements of one row, each
element ``"<value>:<index>[:<label>]"``: the K highest values of the row's flattened tensor in descending
order (ties: lower index first), the value printed as C++'s ``std::to_string`` does (``%f`` for floats,
decimal for integers), the label the index-th line of the output's ``label_filename`` when it has one.
FP16, BF16, BOOL and BYTES outputs are refused, as Triton refuses them.

Sources: Triton's docs/protocol/extension_classification.md; server src/classification.cc (top-K, format)
and src/http_server.cc (per-row split, shape); core src/label_provider.cc (labels by line).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

#: numpy dtype kinds Triton classifies: signed/unsigned integers and FP32/FP64.
_CLASSIFIED = {np.dtype(t) for t in (np.uint8, np.uint16, np.uint32, np.uint64, np.int8, np.int16, np.int32,
                                     np.int64, np.float32, np.float64)}  # fmt: skip


class ClassificationError(ValueError):
    """An output that cannot be classified (its dtype); the message is Triton's."""


def top_k(arr: np.ndarray, count: int, labels: Sequence[str] | None = None, batched: bool = True) -> np.ndarray:
    """The classification of ``arr`` (see the module docstring).

    Args:
        arr: the output of this request, batch dim first when ``batched``.
        count: K, the classes asked for (>= 1).
        labels: the output's labels by class index (None or short: indices past them get no label).
        batched: the first dim is the batch dim (the model's ``max_batch_size`` > 0).

    Returns:
        object array of ``bytes``, shape ``[rows, k]`` (or ``[k]``), k = min(count, elements per row).

    Raises:
        ClassificationError: a dtype Triton does not classify (FP16, BF16, BOOL, BYTES).
    """
    if arr.dtype not in _CLASSIFIED:
        from .tensor_types import datatype_of

        raise ClassificationError(f"class result not available for output due to unsupported type"
                                  f" '{datatype_of(arr) if arr.dtype.kind != 'V' else arr.dtype}'")
    rows = arr.reshape(arr.shape[0], -1) if batched and arr.ndim else arr.reshape(1, -1)
    n = rows.shape[1]
    k = min(count, n)
    # descending and stable (lower index first among ties): stable ascending sort of the reversed row
    order = n - 1 - np.argsort(rows[:, ::-1], axis=1, kind="stable")[:, ::-1][:, :k]
    out = np.empty((rows.shape[0], k), dtype=object)
    floating = rows.dtype.kind == "f"
    for r in range(rows.shape[0]):
        for j, i in enumerate(order[r].tolist()):
            v = rows[r, i]
            text = f"{float(v):f}:{i}" if floating else f"{int(v)}:{i}"
            if labels is not None and i < len(labels) and labels[i]:
                text += f":{labels[i]}"
            out[r, j] = text.encode()
    return out if batched and arr.ndim else out.reshape(k)
