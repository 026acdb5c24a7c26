"""Pre-built KServe v2 request bodies for benchmarks/serve.py and benchmarks/serve_bodies.lua (issue 12).

Each body carries one distinct seeded FP32 tensor (values rounded to 4 decimals, then to float32; the JSON
and binary bodies of one index hold the same float32 numbers). Binary bodies use Triton's binary tensor extension
(JSON header + raw little-endian bytes, ``Inference-Header-Content-Length``) and ask for binary outputs;
JSON bodies carry flat ``data`` and get JSON outputs.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

SEED = 20261201


def tensors(shape: tuple[int, ...], n: int, seed: int = SEED) -> list[np.ndarray]:
    """``n`` distinct float32 arrays of ``shape``, uniform in [-1, 1) rounded to 4 decimals."""
    rng = np.random.default_rng(seed)
    return [np.round(rng.uniform(-1.0, 1.0, shape), 4).astype(np.float32) for _ in range(n)]


def binary_body(name: str, x: np.ndarray) -> tuple[bytes, int]:
    """(body, header length) of one binary-extension request for input ``name``."""
    header = json.dumps({
        "inputs": [{"name": name, "shape": list(x.shape), "datatype": "FP32",
                    "parameters": {"binary_data_size": int(x.nbytes)}}],
        "parameters": {"binary_data_output": True},
    }, separators=(",", ":")).encode()
    return header + np.ascontiguousarray(x, "<f4").tobytes(), len(header)


LONG_JSON_ELEMENTS = 1 << 20
"""Tensors up to this many elements get tritonclient's JSON numbers; larger ones 4 decimals (see json_body)."""


def json_body(name: str, x: np.ndarray) -> bytes:
    """One JSON request for input ``name`` with flat ``data``.

    Numbers are written as tritonclient's JSON path writes them (each float32 value as a Python float,
    ``repr`` of the float64: ~19 characters, e.g. ``0.12345679104328156``) for tensors up to
    LONG_JSON_ELEMENTS elements (squeezenet's 224x224: 3.1 MB a body); larger tensors (PP-OCRv4 det 640:
    1.2 M elements) are written with 4 decimals (~8 MB a body instead of ~25 MB), the same values.
    """
    if x.size <= LONG_JSON_ELEMENTS:
        data = x.ravel().tolist()
    else:
        data = np.round(x.astype(np.float64), 4).ravel().tolist()
    return json.dumps({"inputs": [{"name": name, "shape": list(x.shape), "datatype": "FP32", "data": data}]},
                      separators=(",", ":")).encode()


def write_bodies(folder: Path, name: str, xs: list[np.ndarray], kind: str) -> Path:
    """Write one file per tensor and ``index.txt`` ("FILE HLEN" or "FILE json") for the Lua script.

    Args:
        folder: Created if missing; files are ``NNN.bin`` / ``NNN.json``.
        name: The model's input name.
        xs: The tensors (each one request).
        kind: ``"binary"`` or ``"json"``.
    Returns: ``folder``.
    """
    folder.mkdir(parents=True, exist_ok=True)
    lines = []
    for i, x in enumerate(xs):
        if kind == "binary":
            body, hlen = binary_body(name, x)
            file, tag = f"{i:03d}.bin", str(hlen)
        else:
            body, file, tag = json_body(name, x), f"{i:03d}.json", "json"
        (folder / file).write_bytes(body)
        lines.append(f"{file} {tag}")
    (folder / "index.txt").write_text("\n".join(lines) + "\n")
    return folder


def decode_response(body: bytes, header_length: str | None) -> np.ndarray:
    """The first output of a v2 response (JSON ``data`` or binary extension) as a flat float32 array."""
    if header_length is not None:
        h = int(header_length)
        return np.frombuffer(body[h:], "<f4")
    out = json.loads(body)["outputs"][0]
    return np.asarray(out["data"], np.float32).ravel()
