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


def first_error(error: object, indices: bool = True) -> tuple[str, str, str, object]:
    """The first error of a pydantic ``ValidationError``, the one every one-line refusal names.

    Args:
        error: a ``pydantic.ValidationError`` (anything with ``errors()``; pydantic is not imported here).
        indices: keep list indices in the location (``axes.0.x``); False drops them (``axes.x``).

    Returns:
        (pydantic's error type such as ``extra_forbidden``, the dotted location (``""`` at the top level),
        the message without pydantic's ``Value error, `` prefix and with runs of white space as one space,
        the refused input).
    """
    errs = error.errors()  # type: ignore[attr-defined]
    if not errs:
        return "", "", " ".join(str(error).split()), None
    err = errs[0]
    where = ".".join(str(x) for x in err.get("loc", ()) if indices or not isinstance(x, int))
    msg = " ".join(str(err["msg"]).removeprefix("Value error, ").split())
    return str(err.get("type", "")), where, msg, err.get("input")


def settings_message(error: object) -> str:
    """One line for a settings model's refusal (a pydantic ``ValidationError``): its first error's message.

    The settings models (``BenchConfig``, ``ServeOptions``, ``LoadConfig``, ``TuneSpec``, ...) raise
    ``ValueError`` in their validators with a message that names the flag and the fix; pydantic wraps it as
    ``Value error, <message>``. This returns that message alone, so the CLI (exit 2) and a library caller see
    the same line. A message that does not name its flag (a field constraint such as ``ge=1``) is prefixed
    with the field as a flag (``--n-trials: Input should be greater than or equal to 1``).

    Args:
        error: a ``pydantic.ValidationError`` (anything with ``errors()``; pydantic is not imported here).
    """
    kind, where, msg, _ = first_error(error, indices=False)
    names = where.split(".") if where else []
    if msg.startswith("--") or not names:
        return msg
    if kind == "extra_forbidden":
        return f"unknown setting '{'.'.join(names)}': check its spelling"
    where = f"--{names[0].replace('_', '-')}" if len(names) == 1 else ".".join(names)
    return f"{where}: {msg}"


__all__ = [
    "BackendUnavailable",
    "GateFailed",
    "InferperfError",
    "Interrupted",
    "MeasurementError",
    "ModelError",
    "RuntimeFailure",
    "UsageError",
    "first_error",
    "settings_message",
]
