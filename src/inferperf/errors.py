"""inferperf's one exception tree, and the exit code each class maps to.

::

    InferperfError (exit 1)            anything inferperf raises on purpose
    ├── UsageError (exit 2)            bad flag value, missing file, unresolved dim, wrong dtype
    │   ├── ModelError (exit 2)        not an ONNX model, truncated, op the provider lacks
    │   └── BackendUnavailable (exit 2) runtime or extra not installed (names the pip command)
    ├── RuntimeFailure (exit 1)        the runtime failed while running a model that loaded
    ├── MeasurementError (exit 1)      a measurement could not complete (worker crashed, timeout)
    ├── GateFailed (exit 3)            a gate failed: regression, accuracy budget, --fail-on-invalid
    └── Interrupted (exit 130 / 143)   Ctrl-C or SIGTERM stopped a long command; the message says what was kept

Every message is one line that names the thing and the fix, e.g.
``input 'x' has unresolved dims ['h', 'w']: pass --shape x:1x3x640x640``.
The CLI prints ``error: <message>`` and exits with ``exit_code``; ``--debug``
adds the traceback.
"""

from __future__ import annotations


class InferperfError(Exception):
    """Base of every error inferperf raises on purpose (exit code 1)."""

    exit_code: int = 1


class UsageError(InferperfError):
    """Bad input from the user: a flag value, a file, a shape or a dtype (exit code 2)."""

    exit_code = 2


class ModelError(UsageError):
    """The model file cannot be used: missing, not ONNX, truncated, unsupported op (exit code 2)."""


class BackendUnavailable(UsageError):
    """A runtime or optional extra is not installed; the message names the pip command (exit code 2)."""


class RuntimeFailure(InferperfError):
    """The runtime failed while running a model that loaded (exit code 1)."""


class MeasurementError(InferperfError):
    """A measurement could not complete: a worker crashed or timed out (exit code 1)."""


class GateFailed(InferperfError):
    """A gate failed: a regression, an accuracy budget, an INVALID result under --fail-on-invalid (exit code 3)."""

    exit_code = 3


class Interrupted(InferperfError):
    """Ctrl-C (SIGINT) or SIGTERM stopped a long command after it wrote what had finished; the message says
    what was kept (exit code 130, or 143 for SIGTERM: 128 + the signal, as shells report it)."""

    exit_code = 130

    def __init__(self, message: str, exit_code: int = 130) -> None:
        super().__init__(message)
        self.exit_code = exit_code


__all__ = [
    "BackendUnavailable",
    "GateFailed",
    "InferperfError",
    "Interrupted",
    "MeasurementError",
    "ModelError",
    "RuntimeFailure",
    "UsageError",
]
