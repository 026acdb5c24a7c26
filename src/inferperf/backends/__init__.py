"""Backends: one runtime session each (:mod:`inferperf.backends.base` holds the protocol and registry).

:func:`check_available` is the early check a command makes before any work: every
runtime it names is installed (else one line naming the extra to install), and a
``package.module:function`` model is asked of a backend that can run it.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Sequence

#: backend -> (the runtime package it imports, the inferperf extra that installs it; None: a core dependency)
RUNTIMES: dict[str, tuple[str, str | None]] = {
    "onnxruntime": ("onnxruntime", None),
    "openvino": ("openvino", "openvino"),
    "torch": ("torch", "torch"),
}


def install_hint(extra: str | None) -> str:
    """The command that installs a backend's runtime: ``pip install 'inferperf[EXTRA]'`` (core: a reinstall)."""
    return f"pip install 'inferperf[{extra}]'" if extra else "pip install --force-reinstall inferperf"


def runtime_installed(package: str) -> bool:
    """True when ``import PACKAGE`` can find it; cheap (nothing is imported), so a broken wheel still passes."""
    try:
        return importlib.util.find_spec(package) is not None
    except (ImportError, ValueError):  # ValueError: sys.modules[package] is None (an import blocked on purpose)
        return False


def check_available(backends: Sequence[str], model: str | None = None) -> None:
    """Fail early, in one line, when a named backend's runtime is missing or the model needs another backend.

    Args:
        backends: backend names (aliases accepted); one for ``bench``, several for a runtime comparison.
        model: the model argument; a ``package.module:function`` runs in PyTorch (and is exported
            to ONNX with it for the other runtimes of a comparison).

    Raises:
        UsageError: a ``module:function`` model with a single backend that is not torch.
        BackendUnavailable: a runtime is not installed (names ``pip install 'inferperf[EXTRA]'``).
    """
    from ..config import canonical_backend
    from ..errors import BackendUnavailable, UsageError
    from .torch_spec import is_callable_spec

    names = [canonical_backend(b) for b in backends]
    callable_model = model is not None and is_callable_spec(str(model))
    if callable_model and len(names) == 1 and names[0] != "torch":
        raise UsageError(f"{model!r} is a package.module:function model, which runs in PyTorch: pass --backend torch"
                         f" (or --backend {names[0]},torch to compare it, exported to ONNX, with {names[0]})")
    needed = [*names, "torch"] if callable_model else names
    for name in dict.fromkeys(needed):
        package, extra = RUNTIMES.get(name, (None, None))
        if package and not runtime_installed(package):
            why = f"backend {name!r}" if name in names else f"the model {model!r} (exported with PyTorch)"
            raise BackendUnavailable(f"{why} needs {package}, which is not installed: {install_hint(extra)}")
