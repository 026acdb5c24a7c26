"""The Backend protocol and the registry that imports a backend only when it is chosen.

A backend owns one runtime session. The measure layer asks it for its inputs,
a ``runner`` (the fastest callable that runs one feed; called inside the timed
window and nothing else is), and the settings it was asked for and resolved to.

Optional methods the measure layer asks for (``getattr``) and does without:

* ``load_phases() -> dict[str, float]``: cold-start sub-phases of ``load`` in ms
  (OpenVINO: ``read_ms``, ``compile_ms``), recorded under ``cold_start.phases``.
* ``async_executor(jobs)``: the backend's own Concurrent executor (OpenVINO's
  ``AsyncInferQueue``); see :mod:`inferperf.measure.async_exec`. Without it,
  Concurrent runs N threads around ``runner()``.
* ``fetch(feed) -> list[numpy.ndarray]``: outputs of one feed, on the host, in
  ``outputs()`` order, for output agreement between runtimes (never timed).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

from ..config import SessionOptions, canonical_backend
from ..errors import BackendUnavailable, UsageError
from ..results.model import TensorInfo
from . import install_hint

Feed = dict[str, Any]


class Backend(Protocol):
    """One runtime session.

    Lifecycle: construct (cheap) -> :meth:`load` (creates the session; the
    caller times it as cold start) -> :meth:`runner` many times -> :meth:`close`.
    """

    name: str

    def load(self, model_path: Path) -> None:
        """Create the session.

        Raises:
            ModelError: the runtime cannot load the model (with the reason and the fix).
            UsageError: a setting the runtime refuses.
        """
        ...

    def inputs(self) -> list[TensorInfo]:
        """Model inputs as the session sees them (numpy dtype names, declared dims)."""
        ...

    def outputs(self) -> list[TensorInfo]:
        """Model outputs as the session sees them."""
        ...

    def runner(self) -> Callable[[Feed], Any]:
        """The callable that runs one feed (input name -> array) and returns the outputs."""
        ...

    def requested_settings(self) -> dict[str, Any]:
        """Settings as asked for, under the runtime's names."""
        ...

    def effective_settings(self) -> dict[str, Any]:
        """Settings as the runtime resolved them (e.g. thread counts, providers)."""
        ...

    def notes(self) -> list[str]:
        """Warnings found while configuring (e.g. an unknown session config key)."""
        ...

    def close(self) -> None:
        """Release the session."""
        ...


class RuntimeBackend:
    """What every runtime backend (ONNX Runtime, OpenVINO, torch) shares: the session settings it was
    given, the settings it resolved, its configuration notes, its load phases, and ``close``.

    A subclass calls ``super().__init__(session)``, fills ``self._effective`` in ``load`` (settings as
    resolved), appends warnings to ``self._notes``, puts cold-start sub-phases (ms) in ``self._phases``,
    and names in ``_handle`` the attribute holding the runtime's session, which :meth:`close` drops.
    """

    name = ""
    _handle = "_session"

    def __init__(self, session: SessionOptions) -> None:
        self._opts = session
        self._effective: dict[str, Any] = {}
        self._notes: list[str] = []
        self._phases: dict[str, float] = {}

    def effective_settings(self) -> dict[str, Any]:
        """Settings as the runtime resolved them in ``load`` (a copy; empty before ``load``)."""
        return dict(self._effective)

    def notes(self) -> list[str]:
        """Warnings found while configuring (a copy)."""
        return list(self._notes)

    def load_phases(self) -> dict[str, float]:
        """Cold-start sub-phases of the last ``load`` in ms (empty where the runtime has none to report)."""
        return dict(self._phases)

    def close(self) -> None:
        """Drop the runtime's session (the attribute named by ``_handle``)."""
        setattr(self, self._handle, None)


_REGISTRY: dict[str, tuple[str, str, str | None]] = {
    # name: (module, class, extra to install when the runtime is missing)
    "onnxruntime": ("inferperf.backends.ort", "OnnxRuntimeBackend", None),
    "null": ("inferperf.backends.null", "NullBackend", None),
    "openvino": ("inferperf.backends.openvino_backend", "OpenVinoBackend", "openvino"),
    "torch": ("inferperf.backends.torch_backend", "TorchBackend", "torch"),
}

canonical_name = canonical_backend  # the registered name for a name or alias (one table: config.BACKEND_ALIASES)


def backend_names() -> list[str]:
    """Names accepted by :func:`create_backend`."""
    return sorted(_REGISTRY)


def create_backend(name: str, session: SessionOptions, **kwargs: Any) -> Backend:
    """Import the chosen backend's module and construct it (no session yet).

    Args:
        name: ``onnxruntime`` (alias ``ort``), ``openvino`` (``ov``), ``torch`` (``pytorch``) or ``null``.
        session: session settings under ONNX Runtime's names.
        **kwargs: backend-specific arguments (the null backend's latency script and clock).

    Raises:
        UsageError: unknown backend name.
        BackendUnavailable: the runtime is not installed (names the pip command).
    """
    key = canonical_name(name)
    if key not in _REGISTRY:
        raise UsageError(f"unknown backend {name!r}: choose one of {', '.join(backend_names())}")
    module_name, cls_name, extra = _REGISTRY[key]
    try:
        module = importlib.import_module(module_name)
    except ImportError as e:
        fix = install_hint(extra)
        raise BackendUnavailable(f"backend {key!r} cannot be imported ({e}): {fix}") from e
    return getattr(module, cls_name)(session, **kwargs)
