"""What a PyTorch model argument names, without importing torch.

The torch backend takes a TorchScript file (``.pt``/``.ts``/``.jit``: ``torch.jit.save``),
a ``torch.export`` program (``.pt2``: ``torch.export.save``), or a Python
callable ``package.module:function`` that returns ``(module, example_inputs)``
(``example_inputs`` a dict name -> tensor, or a tuple named after ``forward``'s
parameters). The current directory is importable, as for ``python -m``.
"""

from __future__ import annotations

import hashlib
import importlib.util
import re
import sys
from pathlib import Path

from ..errors import ModelError

_CALLABLE = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$")
TORCHSCRIPT_SUFFIXES = (".pt", ".ts", ".jit", ".pth")
EXPORT_SUFFIXES = (".pt2",)


def is_callable_spec(text: str) -> bool:
    """True for ``package.module:function`` (and not an existing file or ``zoo:NAME``)."""
    text = str(text)
    return bool(_CALLABLE.match(text)) and not text.lower().startswith("zoo:") and not Path(text).exists()


def ensure_cwd_importable() -> None:
    """Put the current directory on ``sys.path`` (``module:function`` resolves as under ``python -m``)."""
    cwd = str(Path.cwd())
    if cwd not in sys.path and "" not in sys.path:
        sys.path.insert(0, cwd)


def callable_source(spec: str) -> Path | None:
    """The source file of the module a ``module:function`` names, found without importing it."""
    ensure_cwd_importable()
    try:
        found = importlib.util.find_spec(spec.split(":", 1)[0])
    except (ImportError, ValueError):
        return None
    return Path(found.origin) if found and found.origin and found.origin != "built-in" else None


def spec_sha256(spec: str) -> tuple[str, int]:
    """Identity of a ``module:function``: SHA-256 over the spec and its module's source bytes, and that size.

    Raises:
        ModelError: the module cannot be found (names the spec and the fix).
    """
    src = callable_source(spec)
    if src is None or not src.is_file():
        raise ModelError(
            f"cannot find the module of {spec!r}: run from the folder that holds it, or put it on PYTHONPATH"
        )
    data = src.read_bytes()
    return hashlib.sha256(spec.encode() + b"\0" + data).hexdigest(), len(data)
