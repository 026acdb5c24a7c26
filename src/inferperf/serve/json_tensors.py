"""Large JSON request bodies through simdjson: numeric ``data`` lists become numpy arrays without Python floats.

A KServe v2 JSON request for one 1x3x224x224 FP32 tensor is ~3 MB of text. Parsing it with orjson builds
150,528 Python floats that ``np.array`` then walks again (~12 ms here); pysimdjson (the simdjson library's
Python binding, Langdale & Lemire, "Parsing Gigabytes of JSON per Second", VLDB Journal 2019) parses the
document lazily and exports a numeric array straight into a buffer (``Array.as_buffer``, ~4 ms). Measured
in BENCHMARKS.md ("Serving: JSON request decoding").

Only the fast path lives here: :func:`parse_header` returns the same header dict orjson would, except that
each input's ``data`` is left as a lazy ``simdjson.Array``; :func:`numeric_data` turns a flat numeric one
into an array, or returns None so the caller falls back to the list path (nested or non-numeric data, values
out of the dtype's range, fractions in an integer tensor), which keeps every error message the same.
A fresh ``simdjson.Parser`` per body (~0.2 us) means no parser is ever shared between threads or requests.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np

try:  # a dependency of inferperf; the orjson path stays correct without it
    import simdjson
except ImportError:  # pragma: no cover - exercised only on a broken install
    simdjson = None

#: Bodies at least this large go through simdjson; smaller ones parse faster with orjson.
MIN_BYTES = 64 * 1024

_BUFFER_TYPE = {"f": "d", "i": "i", "u": "u"}  # numpy kind -> simdjson as_buffer of_type (double, int64, uint64)
_BUFFER_DTYPE = {"d": np.float64, "i": np.int64, "u": np.uint64}


def available() -> bool:
    """Whether pysimdjson is importable."""
    return simdjson is not None


def _plain(value: Any) -> Any:
    """A simdjson proxy as plain Python (dict/list/scalars)."""
    if isinstance(value, simdjson.Object):
        return value.as_dict()
    if isinstance(value, simdjson.Array):
        return value.as_list()
    return value


def parse_header(text: bytes) -> Any:
    """Parse a JSON request header; each ``inputs[i].data`` stays a lazy ``simdjson.Array``.

    Returns:
        the document as plain Python, except those ``data`` values (non-objects are returned plain, for the
        caller's own checks).

    Raises:
        ValueError: the text is not valid JSON (simdjson's message).
    """
    try:
        doc = simdjson.Parser().parse(text)
    except (ValueError, RuntimeError) as e:
        raise ValueError(str(e)) from None
    if not isinstance(doc, simdjson.Object):
        return _plain(doc)
    header: dict[str, Any] = {}
    for key in doc.keys():  # indexing keeps containers lazy; Object.items() would convert them
        value = doc[key]
        if key == "inputs" and isinstance(value, simdjson.Array):
            header[key] = [_entry(e) if isinstance(e, simdjson.Object) else _plain(e) for e in value]
        else:
            header[key] = _plain(value)
    return header


def _entry(obj: Any) -> dict[str, Any]:
    """One ``inputs[i]`` object as a dict whose ``data``, when an array, stays lazy."""
    out: dict[str, Any] = {}
    for k in obj.keys():
        v = obj[k]
        out[k] = v if k == "data" and isinstance(v, simdjson.Array) else _plain(v)
    return out


def is_lazy(data: Any) -> bool:
    """Whether ``data`` is a lazy simdjson array (from :func:`parse_header`)."""
    return simdjson is not None and isinstance(data, simdjson.Array)


def numeric_data(data: Any, dtype: np.dtype, n: int) -> np.ndarray | None:
    """A flat numeric ``data`` array as a 1-D array of ``dtype`` with ``n`` elements, or None to fall back.

    Falls back (None) for: non-numeric dtypes (BOOL, BYTES), nested lists (the list path checks their
    structure), a length other than ``n``, and any element simdjson will not export as the buffer type
    (a fraction or exponent in an integer tensor, strings, null, out of int64/uint64 range) or that does not
    fit ``dtype`` (e.g. 300 in UINT8): the list path then raises the protocol's own error.
    """
    kind = dtype.kind
    if kind not in _BUFFER_TYPE or len(data) != n:
        return None
    of_type = _BUFFER_TYPE[kind]
    try:
        wide = np.frombuffer(data.as_buffer(of_type=of_type), dtype=_BUFFER_DTYPE[of_type])
    except (TypeError, ValueError):
        return None
    if wide.size != n:  # a nested element: len() counted it once, the buffer flattened it
        return None
    if kind in "iu" and wide.size:
        info = np.iinfo(dtype)
        if wide.min() < info.min or wide.max() > info.max:
            return None
    return wide.astype(dtype, copy=False)


_NONFINITE = re.compile(rb"NaN|Infinity")

#: What :func:`loads_nonfinite` returns for text that is not JSON even with the non-finite tokens.
NOT_JSON = object()


def loads_nonfinite(text: bytes) -> Any:
    """Parse JSON that may hold the tokens ``NaN``, ``Infinity`` and ``-Infinity``, as Triton does: its
    server reads request JSON with rapidjson's ``kParseNanAndInfFlag`` (triton-inference-server/common,
    triton_json.h), and perf_analyzer's JSON tensors carry those tokens whenever its random FP32 bits are
    non-finite. Python's ``json`` module accepts exactly these three (slower; used only after the fast
    parsers refused the body).

    Returns:
        the document, or :data:`NOT_JSON` when the text holds none of the tokens or is invalid anyway.
    """
    if not _NONFINITE.search(text):
        return NOT_JSON
    import json

    try:
        return json.loads(text)
    except (ValueError, UnicodeDecodeError):
        return NOT_JSON
