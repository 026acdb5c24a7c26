"""Facts a run needs about a model before its session exists: a PyTorch model's identity, static shapes.

Split from :mod:`inferperf.measure.bench` so the run itself stays readable.
"""

from __future__ import annotations

from pathlib import Path

from ..config import BenchConfig
from ..workload.signature import ModelFacts, check_model_file


def torch_facts(model: str) -> ModelFacts:
    """Identity of a PyTorch model: the file's hash, or ``module:function`` hashed with its module's source."""
    from ..backends.torch_spec import is_callable_spec, spec_sha256
    from ..workload.signature import file_sha256

    if is_callable_spec(model):
        sha, size = spec_sha256(model)
        return ModelFacts(path=Path(model), sha256=sha, size_bytes=size)
    p = check_model_file(model)
    return ModelFacts(path=p, sha256=file_sha256(p), size_bytes=p.stat().st_size)


def static_shapes(path: Path, cfg: BenchConfig) -> dict[str, list[int]] | None:
    """The shapes every query will have, resolved from the ONNX signature before a session exists
    (for runtimes that compile faster code for static shapes); None when they do not resolve yet."""
    from ..backends.null import NullBackend
    from ..workload.shapes import resolve_shapes

    try:
        sig = NullBackend(cfg.session)
        sig.load(path)
        w = cfg.workload
        return resolve_shapes(sig.inputs(), w.shapes, w.dims, w.batch_size)
    except Exception:  # the workload reports unresolved shapes later, with its own message
        return None


def model_sha256(model: str) -> str:
    """sha256 (hex) of a model's file, ``zoo:NAME`` resolved first; ``null`` for the null backend's "model".

    Raises:
        ModelError: a missing, empty or unreadable file (one line naming it).
    """
    from ..workload.signature import file_sha256
    from ..zoo import resolve

    if model == "null" or model.startswith("null:"):
        return "null"
    return file_sha256(check_model_file(resolve(model)))
