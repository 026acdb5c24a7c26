"""Read facts from a model file without a runtime: hash, size, opset, index ranges.

The I/O signature itself comes from the backend's session (``graph.input`` may
list initializers); this module reads the ONNX graph only for what a session
does not say: the opset, and which integer inputs index an embedding table
(``Gather(table, input)``), so generated ids stay inside the vocabulary.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import ModelError


@dataclass
class ModelFacts:
    """What inferperf knows about a model file before a session exists.

    Attributes:
        path: absolute path of the file.
        sha256: hex digest of the file's bytes (chained with its external-data files' digests, if any).
        size_bytes: file size in bytes, external-data files included.
        opset: default-domain opset version, or None if not ONNX-readable.
        index_ranges: input name -> inclusive (lo, hi) valid ids, from Gather tables.
    """

    path: Path
    sha256: str
    size_bytes: int
    opset: int | None = None
    index_ranges: dict[str, tuple[int, int]] = field(default_factory=dict)


def file_sha256(path: Path, chunk_bytes: int = 1 << 20) -> str:
    """SHA-256 of a file's bytes as a hex string, read in 1 MiB chunks."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(chunk_bytes):
            h.update(chunk)
    return h.hexdigest()


def check_model_file(path: str | Path) -> Path:
    """Return ``path`` resolved, or raise :class:`ModelError` if it is missing, a folder or empty."""
    p = Path(path).expanduser()
    if not p.exists():
        raise ModelError(
            f"model file '{path}' not found: check the path, or use a built-in model such as zoo:resnet50"
            " (list them with `inferperf zoo`)"
        )
    if p.is_dir():
        raise ModelError(f"'{path}' is a folder, not a model file: pass the .onnx file inside it")
    if p.stat().st_size == 0:
        raise ModelError(f"model file '{path}' is empty: re-export or re-download it")
    return p.resolve()


def inspect_model(path: str | Path) -> ModelFacts:
    """Hash the file and read its opset and embedding-index ranges with the ``onnx`` package.

    Args:
        path: an ONNX model file.

    Raises:
        ModelError: missing file, not ONNX (protobuf does not parse, or parses to
            an empty graph), or truncated.
    """
    p = check_model_file(path)
    facts = ModelFacts(path=p, sha256=file_sha256(p), size_bytes=p.stat().st_size)
    import onnx
    from google.protobuf.json_format import ParseError
    from google.protobuf.message import DecodeError

    try:
        model = onnx.load(str(p), load_external_data=False)
    except (DecodeError, ParseError, ValueError, RuntimeError) as e:  # ParseError: a .json file read as ONNX's JSON form
        raise ModelError(
            f"'{path}' is not a readable ONNX model ({type(e).__name__}: {str(e).splitlines()[0] if str(e) else 'parse failed'}):"
            " check it is a complete .onnx file (a truncated download or another format?)"
        ) from e
    graph = model.graph
    if model.ir_version == 0 or (not graph.node and not graph.input and not graph.output):
        raise ModelError(f"'{path}' is not an ONNX model (no graph inside): pass an .onnx file")
    external = sorted(
        {
            next(e.value for e in t.external_data if e.key == "location")
            for t in graph.initializer
            if t.data_location == onnx.TensorProto.EXTERNAL and any(e.key == "location" for e in t.external_data)
        }
    )
    if external:
        # weights stored beside the model are part of its identity: hash and size cover them
        h = hashlib.sha256(bytes.fromhex(facts.sha256))
        for name in external:
            ext = p.parent / name
            if not ext.exists():
                raise ModelError(f"{p.name} keeps weights in '{name}', which is not beside it: copy it along")
            h.update(name.encode())
            h.update(bytes.fromhex(file_sha256(ext)))
            facts.size_bytes += ext.stat().st_size
        facts.sha256 = h.hexdigest()
    for imp in model.opset_import:
        if imp.domain in ("", "ai.onnx"):
            facts.opset = int(imp.version)
    tables = {t.name: list(t.dims) for t in graph.initializer}
    inputs = {i.name for i in graph.input}
    for node in graph.node:
        if node.op_type == "Gather" and len(node.input) == 2 and node.input[1] in inputs:
            table = tables.get(node.input[0])
            if table:
                axis = next((a.i for a in node.attribute if a.name == "axis"), 0)
                size = int(table[axis])
                lo, hi = facts.index_ranges.get(node.input[1], (0, size - 1))
                facts.index_ranges[node.input[1]] = (0, min(hi, size - 1))
    return facts
