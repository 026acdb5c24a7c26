"""Which ``session_config`` entries belong to which backend.

``SessionOptions.session_config`` (``--session-config KEY=VALUE``) carries
settings under each runtime's own names, so one config can hold all of them
when several backends are compared in one run:

* ``openvino.KEY`` or an all-capitals ``KEY`` (OpenVINO's property style:
  ``PERFORMANCE_HINT``, ``NUM_STREAMS``, ``INFERENCE_PRECISION_HINT`` ...) -> OpenVINO;
  ``DEVICE`` picks the OpenVINO device (``CPU`` by default).
* ``torch.KEY`` (``torch.device``, ``torch.compile``) -> PyTorch.
* anything else (``session.*``, ``optimization.*`` ...) -> ONNX Runtime, as before.

Pure functions on plain data; no runtime is imported here.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

_CAPS = re.compile(r"^[A-Z][A-Z0-9_]*$")
_PREFIXES = {"openvino": "openvino.", "torch": "torch."}


def owner(key: str) -> str:
    """The backend a ``session_config`` key belongs to: ``openvino``, ``torch`` or ``onnxruntime``."""
    for backend, prefix in _PREFIXES.items():
        if key.startswith(prefix):
            return backend
    if _CAPS.match(key):
        return "openvino"
    return "onnxruntime"


def entries_for(backend: str, session_config: Mapping[str, str]) -> dict[str, str]:
    """The entries of ``session_config`` that ``backend`` takes, with its prefix stripped.

    Args:
        backend: ``onnxruntime``, ``openvino`` or ``torch``.
        session_config: key -> value as given on the command line or in a config file.

    Returns:
        key (without ``openvino.``/``torch.``) -> value, in the given order.
    """
    out: dict[str, str] = {}
    prefix = _PREFIXES.get(backend, "")
    for key, value in session_config.items():
        if owner(key) != backend:
            continue
        out[key[len(prefix):] if prefix and key.startswith(prefix) else key] = str(value)
    return out
