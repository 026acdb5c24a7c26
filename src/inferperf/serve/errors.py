"""Errors the serving core raises to the app; each maps to one HTTP status.

::

    InferperfError
    ├── ServeError                     base of the serving errors below; ``status`` is the HTTP code
    │   ├── QueueFull (503)            the model's queue holds ``max_queue_size`` requests; ``retry_after_s``
    │   ├── NotReady (503)             the model is loading, warming up or shutting down; ``retry_after_s``
    │   ├── InvalidInput (400)         input values the model cannot take (ids past an embedding table)
    │   ├── Cancelled (499)            the client went away before its batch ran (nothing to answer)
    │   ├── QueueTimeout (504)         still queued at its deadline (--request-timeout-ms): never run
    │   ├── UnknownModel (404)         no such model or version served (Triton's wording, see below)
    │   ├── ModelUnloading (503)       the model is being unloaded; ``retry_after_s``
    │   └── ControlError (400, 404)    a refused repository request (load/unload: mode, name, failed load)
    └── RuntimeFailure
        └── ModelExecutionError (500)  the runtime failed on the batch holding this request

:func:`unknown_model` and :func:`unknown_version` word the 404 for a model or version not served as
Triton does, since Triton's clients check the wording (its example clients test that the message starts
with "Request for unknown model").

``ModelExecutionError`` is a :class:`inferperf.errors.RuntimeFailure`, so code
that already handles runtime failures handles it too. The app answers with
``{"error": str(exc)}`` and ``exc.status`` (``Retry-After: exc.retry_after_s``
on 503s).
"""

from __future__ import annotations

from collections.abc import Sequence

from inferperf.errors import InferperfError, RuntimeFailure


class ServeError(InferperfError):
    """Base of the serving-core errors; ``status`` is the HTTP status the app answers with."""

    status: int = 500


class QueueFull(ServeError):
    """The model's queue already holds ``max_queue_size`` requests: answer 503 with ``Retry-After``.

    Args:
        model: model name.
        max_queue_size: the configured limit (requests).
        retry_after_s: seconds a client should wait before retrying (integer, >= 1).
    """

    status = 503

    def __init__(self, model: str, max_queue_size: int, retry_after_s: int = 1) -> None:
        super().__init__(
            f"model '{model}' queue is full ({max_queue_size} requests waiting): retry later or raise --max-queue-size"
        )
        self.model = model
        self.max_queue_size = max_queue_size
        self.retry_after_s = retry_after_s


class NotReady(ServeError):
    """The model is not serving (loading, warming up or shutting down): answer 503 with ``Retry-After``.

    Args:
        model: model name.
        reason: ``"not_ready"`` or ``"shutting_down"`` (the ``rejected`` observer reason).
        retry_after_s: seconds a client should wait before retrying (integer, >= 1).
    """

    status = 503

    def __init__(self, model: str, reason: str = "not_ready", retry_after_s: int = 1) -> None:
        what = "is shutting down" if reason == "shutting_down" else "is not ready"
        super().__init__(f"model '{model}' {what}: retry later")
        self.model = model
        self.reason = reason
        self.retry_after_s = retry_after_s


class Cancelled(ServeError):
    """The client disconnected while its request was queued; its rows were dropped before the batch ran.

    Status 499 (nginx's "client closed request"): there is nobody to answer, the code is only for logs.
    """

    status = 499

    def __init__(self, model: str) -> None:
        super().__init__(f"model '{model}': request cancelled, the client disconnected while it was queued")
        self.model = model


class InvalidInput(ServeError):
    """Input values the model cannot take, found before the batch runs (so no batch peer fails): 400.

    Args:
        message: names the input and the valid values.
    """

    status = 400


class QueueTimeout(ServeError):
    """The request was still queued when its deadline came (``request_timeout_ms``): answered 504 at the
    deadline, removed from the queue, never run (Triton's ``default_queue_policy`` with ``timeout_action:
    REJECT``).

    Args:
        model: model name.
        timeout_ms: the configured deadline (ms after arrival).
    """

    status = 504

    def __init__(self, model: str, timeout_ms: int) -> None:
        super().__init__(f"model '{model}': request still queued after {timeout_ms} ms (--request-timeout-ms):"
                         " not run; retry, add instances or raise the timeout")
        self.model = model
        self.timeout_ms = timeout_ms


class UnknownModel(ServeError):
    """A request names a model or version that is not served: 404 with :func:`unknown_model` /
    :func:`unknown_version`'s message (Triton's wording, which its clients check)."""

    status = 404


class ModelUnloading(ServeError):
    """The model is being unloaded (repository control): new requests get 503 with ``Retry-After``.

    Args:
        model: model name.
        retry_after_s: seconds a client should wait before retrying (integer, >= 1).
    """

    status = 503

    def __init__(self, model: str, retry_after_s: int = 1) -> None:
        super().__init__(f"model '{model}' is being unloaded")
        self.model = model
        self.retry_after_s = retry_after_s


class ControlError(ServeError):
    """A refused repository request (:mod:`inferperf.serve.control`): ``status`` 400 (mode, bad name, a load
    that failed) or 404 (nothing to unload), and a one-line message."""

    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.status = status


class ModelExecutionError(RuntimeFailure):
    """The runtime failed while running the batch that held this request: answer 500, keep serving.

    Args:
        model: model name.
        detail: the runtime's one-line message.
    """

    status = 500

    def __init__(self, model: str, detail: str) -> None:
        first = (detail.strip().splitlines() or [""])[0]
        super().__init__(f"model '{model}' failed to execute: {first}")
        self.model = model
        self.detail = detail


def unknown_model(name: str, served: Sequence[str], reason: str = "") -> str:
    """The error for a request naming a model that is not served, worded as Triton's.

    Triton (triton-inference-server/core, model_repository_manager.cc) answers "Request for unknown model:
    'NAME' is not found", or "... 'NAME' has no available versions" for a model of the repository that is
    not loaded; inferperf adds the models it serves, or why the model is unavailable (``reason``).
    """
    if reason:
        return f"Request for unknown model: '{name}' has no available versions (UNAVAILABLE: {reason})"
    return f"Request for unknown model: '{name}' is not found (this server serves {sorted(served)})"


def unknown_version(name: str, version: str, versions: Sequence[str]) -> str:
    """The error for a version not served, worded as Triton's ("Request for unknown model: 'NAME' version
    V is not found", model_lifecycle.cc), with the versions served."""
    return f"Request for unknown model: '{name}' version {version} is not found (versions {list(versions)})"


__all__ = ["Cancelled", "ControlError", "InvalidInput", "ModelExecutionError", "ModelUnloading", "NotReady", "QueueFull",
           "QueueTimeout", "ServeError", "UnknownModel", "unknown_model", "unknown_version"]
