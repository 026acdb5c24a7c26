"""What each backend can do here: installed or not, version, devices; why not and the install command.

Importing a runtime is the only way to know it works (a wheel can be present
but broken), so :func:`backend_report` imports each one; it is meant for
``inferperf backends``, never for a measuring process.
"""

from __future__ import annotations

import importlib
from dataclasses import asdict, dataclass, field
from typing import Any

from . import install_hint
from .base import _REGISTRY


@dataclass
class BackendStatus:
    """One backend's status.

    Attributes:
        name: registered name.
        available: the runtime imports.
        version: the runtime's version, or None.
        devices: devices/providers the runtime reports (ORT: execution providers; OpenVINO:
            ``Core.available_devices``; torch: ``cpu`` and ``cuda:N``).
        extra: the inferperf extra that installs it (None: part of the core install).
        reason: why it is unavailable (the import error's first line), or None.
        install: the command that installs it, when unavailable.
    """

    name: str
    available: bool
    version: str | None = None
    devices: list[str] = field(default_factory=list)
    extra: str | None = None
    reason: str | None = None
    install: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """Plain data."""
        return asdict(self)


def _probe(name: str) -> tuple[str | None, list[str]]:
    if name == "onnxruntime":
        ort = importlib.import_module("onnxruntime")
        return ort.__version__, list(ort.get_available_providers())
    if name == "openvino":
        ov = importlib.import_module("openvino")
        from .altstack import preserve_sigaltstack

        with preserve_sigaltstack():  # the CPU plugin swaps this thread's signal stack (see altstack.py)
            return ov.get_version().split("-")[0], list(ov.Core().available_devices)
    if name == "torch":
        torch = importlib.import_module("torch")
        cuda = [f"cuda:{i}" for i in range(torch.cuda.device_count())] if torch.cuda.is_available() else []
        return torch.__version__, ["cpu", *cuda]
    if name == "null":
        return None, ["scripted latency (runs no model)"]
    return None, []


def backend_report() -> list[BackendStatus]:
    """Status of every registered backend, in name order; never raises for a missing runtime."""
    out = []
    for name in sorted(_REGISTRY):
        module, _cls, extra = _REGISTRY[name]
        fix = install_hint(extra)
        try:
            importlib.import_module(module)
            version, devices = _probe(name)
            out.append(BackendStatus(name=name, available=True, version=version, devices=devices, extra=extra))
        except Exception as e:  # ImportError, or a broken wheel raising anything at import
            reason = (str(e).strip().splitlines() or [type(e).__name__])[0][:200]
            out.append(BackendStatus(name=name, available=False, extra=extra, reason=reason, install=fix))
    return out
