"""The chosen per-replica configuration, ready to deploy: a ``serve --config`` file and a Triton repository.

- ``serve-config.yaml``: BenchConfig fields (backend, ``session.intra_op_num_threads``) and the ``serve:``
  section (``max_batch_size``, ``dynamic_batching``, ``max_queue_delay_us``, ``instance_count``), read by
  ``inferperf serve MODEL --config serve-config.yaml``.
- ``triton/NAME/config.pbtxt`` (+ ``1/model.onnx``, a copy of the measured model): Triton's model
  configuration (``platform: "onnxruntime_onnx"``, ``max_batch_size``, ``dynamic_batching``,
  ``instance_group { count, kind: KIND_CPU }``, the ORT backend's ``intra_op_thread_count`` parameter),
  read by Triton and by ``inferperf serve --model-repository triton``. Inputs and outputs are left to
  auto-completion from the model, as Triton does for ONNX.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from ..fsutil import atomic_write_text
from ..analysis.fleet import Option

#: models bigger than this are not copied into the Triton repository (a note says where to put them)
MAX_COPY_BYTES = 512 * 1024 * 1024


def serve_settings(opt: Option) -> dict[str, Any]:
    """The ``serve --config`` document of ``opt`` (plain data)."""
    c, p = opt.candidate, opt.policy
    serve: dict[str, Any] = {"max_batch_size": p.max_batch_size, "dynamic_batching": p.dynamic,
                             "instance_count": c.instances}
    if p.dynamic:
        serve["max_queue_delay_us"] = p.max_queue_delay_ns // 1000
    return {"backend": c.backend, "session": {"intra_op_num_threads": c.threads, **session_changes(opt)}, "serve": serve}


def session_changes(opt: Option) -> dict[str, Any]:
    """The session settings ``opt`` was measured with that differ from the defaults (ONNX Runtime's names)."""
    from ..config import SessionOptions

    defaults = SessionOptions().model_dump()
    return {k: v for k, v in opt.candidate.session.items() if k in defaults and v != defaults[k]}


def triton_config(opt: Option, name: str) -> str:
    """Triton's ``config.pbtxt`` text for ``opt`` served as ``name``."""
    c, p = opt.candidate, opt.policy
    lines = [f'name: "{name}"', 'platform: "onnxruntime_onnx"', f"max_batch_size: {p.max_batch_size}"]
    if p.dynamic:
        lines.append(f"dynamic_batching {{ max_queue_delay_microseconds: {p.max_queue_delay_ns // 1000} }}")
    lines.append(f"instance_group [ {{ count: {c.instances} kind: KIND_CPU }} ]")
    lines.append(f'parameters {{ key: "intra_op_thread_count" value: {{ string_value: "{c.threads}" }} }}')
    return "\n".join(lines) + "\n"


def _model_file(opt: Option) -> Path | None:
    """The measured model file that takes the largest batch (a made-dynamic copy when bench made one)."""
    ex = opt.candidate.example
    path = Path(ex.model.path)
    return path if path.is_file() else None


def write(opt: Option, out_dir: Path, name: str, header: str) -> tuple[dict[str, Path], list[str]]:
    """Write ``serve-config.yaml`` and ``triton/NAME/config.pbtxt`` (+ the model copy) under ``out_dir``.

    Returns:
        ``({"serve_config": path, "triton_config": path, ...}, notes)``.
    """
    import yaml

    notes: list[str] = []
    files: dict[str, Path] = {}
    mdir = out_dir / "triton" / name
    mdir.mkdir(parents=True, exist_ok=True)
    sc = out_dir / "serve-config.yaml"
    body = yaml.safe_dump(serve_settings(opt), sort_keys=False)
    atomic_write_text(sc, "".join(f"# {h}\n" for h in header.splitlines()) + body)
    files["serve_config"] = sc
    pb = mdir / "config.pbtxt"
    atomic_write_text(pb, "".join(f"# {h}\n" for h in header.splitlines()) + triton_config(opt, name))
    files["triton_config"] = pb
    src = _model_file(opt)
    if src is not None and src.stat().st_size <= MAX_COPY_BYTES:
        dst = mdir / "1" / "model.onnx"
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(src, dst)
        files["triton_model"] = dst
    else:
        notes.append(f"the model file is not copied into {mdir / '1'}: put model.onnx there to serve the repository")
    other = {k: v for k, v in session_changes(opt).items()}
    if other:
        notes.append(f"{pb}: the session settings {other} are in serve-config.yaml only: set the Triton ONNX Runtime "
                     "backend's equivalents by hand")
    return files, notes


__all__ = ["serve_settings", "session_changes", "triton_config", "write"]
