"""The infer path every transport shares: find the model, count the request, check and decode it against the
model, queue it for its batch, encode the answer, and say which status a failure answers with.

The HTTP route (:mod:`inferperf.serve.infer_route`) reads the body and writes the answer; everything between is
here, so the next transports (gRPC, Triton's shared-memory inputs) call the same core with the same checks
(:mod:`inferperf.serve.request_checks`), limits (the model's queue, batch and body limits) and metrics
(in-flight, requests by status, request / decode / encode durations). A transport calls::

    model = core.open(name, version)          # 404 / 503 before anything is counted
    call = core.start(model)                  # in-flight +1; call.status starts at 500
    try:
        req = core.decode(model, decode)      # timed as the model's decode
        outputs = await core.run(model, req, is_disconnected, access)
        answer = core.encode(model, lambda: encode(req, outputs))
        call.status = 200
    except BaseException as e:
        call.status, message, retry_after_s = failure(e)   # (re-raise what failure() does not answer)
    finally:
        core.finish(call)                     # in-flight -1, requests{status} +1, request duration

Statuses are HTTP's; a gRPC transport maps them onto its codes.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar

from ..errors import RuntimeFailure
from .errors import ServeError
from .log_settings import LOGGER, VERBOSE
from .tensor_types import ProtocolError, TensorLike

T = TypeVar("T")


class Call:
    """One counted request: its model's name, start time (ns, the metrics' clock) and the status it ends with."""

    __slots__ = ("name", "start_ns", "status")

    def __init__(self, name: str, start_ns: int) -> None:
        self.name = name
        self.start_ns = start_ns
        self.status = 500


class InferCore:
    """The infer path over a ``ServeApp`` (its ``lookup``, ``metrics``, ``clock``, ``last_used`` and ``log_settings``)."""

    __slots__ = ("app",)

    def __init__(self, app: Any) -> None:
        self.app = app

    def open(self, name: str, version: str | None = None) -> Any:
        """The served model ``name`` (``version``; None = its default), marked used now (idle unloading reads it).

        Raises:
            UnknownModel: no such model or version (404). ModelUnloading: being unloaded (503).
        """
        model = self.app.lookup(name, version)
        self.app.last_used[model.name] = self.app.clock.now_ns()
        return model

    def start(self, model: Any) -> Call:
        """Count a request to ``model`` in flight; :meth:`finish` ends it with ``call.status``."""
        return Call(model.name, self.app.metrics.request_started(model.name))

    def finish(self, call: Call) -> None:
        """The request answered ``call.status``: in-flight -1, ``requests{model, status}`` +1, its duration; at
        log verbose level >= 1 one line (model, status, server time)."""
        self.app.metrics.request_finished(call.name, call.status, call.start_ns)
        if self.app.log_settings.verbose:
            ms = (self.app.clock.now_ns() - call.start_ns) / 1e6 if call.start_ns else float("nan")
            LOGGER.log(VERBOSE, "infer model '%s': status %d in %.3f ms", call.name, call.status, ms)

    def decode(self, model: Any, decode: Callable[[Sequence[TensorLike], Sequence[TensorLike], int], T]) -> T:
        """``decode(inputs, outputs, max_batch_size)`` over the model's tensors (a form's decoder, which checks
        through :mod:`.request_checks`), timed as the model's decode (``ns``).

        Raises:
            ProtocolError: what ``decode`` refuses (400, 413).
        """
        clock, md = self.app.clock, model.metadata
        t = clock.now_ns()
        req = decode(md.inputs, md.outputs, model.max_batch_size)
        self.app.metrics.decoded(model.name, clock.now_ns() - t)
        return req

    async def run(self, model: Any, req: Any, is_disconnected: Callable[[], Awaitable[bool]] | None = None,
                  access: dict[str, Any] | None = None) -> dict[str, Any]:
        """Queue the decoded request ``req`` (``inputs``, ``rows``, ``outputs``) for its batch; returns output name
        -> array with ``req.rows`` rows. ``access``: an access-log record to fill (model, version, rows, and the
        batch's ``queue_ms`` / ``compute_ms``), None when nobody logs.

        Raises:
            QueueFull, NotReady (503), QueueTimeout (504), Cancelled (499), InvalidInput (400),
            ModelExecutionError (500): as ``ServedModel.infer``.
        """
        kw: dict[str, Any] = {}
        if getattr(model, "sequences", None) is not None:  # a sequence model: the request's sequence_id and flags
            kw["sequence"] = req.sequence
        if access is None:
            return await model.infer(req.inputs, req.rows, req.outputs, is_disconnected, **kw)
        access.update(model=model.name, version=model.version, rows=req.rows)
        timing: dict[str, Any] = {}
        outputs = await model.infer(req.inputs, req.rows, req.outputs, is_disconnected, timing=timing, **kw)
        access.update(timing)
        return outputs

    def encode(self, model: Any, encode: Callable[[], T]) -> T:
        """``encode()`` (a form's encoder of the answer), timed as the model's encode."""
        clock = self.app.clock
        t = clock.now_ns()
        out = encode()
        self.app.metrics.encoded(model.name, clock.now_ns() - t)
        return out


def failure(e: BaseException) -> tuple[int, str, int | None]:
    """The answer to a failed request: ``(status, message, retry_after_s)``; ``retry_after_s`` only on a 503
    that carries one. A :class:`ProtocolError` or :class:`ServeError` answers its own status, a runtime failure
    500, anything else 500 naming the exception (a bug must not take the server down). A client that went away
    (``Cancelled``) answers 499, which nobody reads.

    Raises:
        BaseException: ``e`` itself when it is not an ``Exception`` (task cancellation, KeyboardInterrupt): a
            transport must let those through.
    """
    if isinstance(e, ProtocolError):
        return e.status, str(e), None
    if isinstance(e, ServeError):
        retry = getattr(e, "retry_after_s", None) if e.status == 503 else None
        return e.status, str(e), retry
    if isinstance(e, RuntimeFailure):
        LOGGER.error("%s", e)
        return 500, str(e), None
    if isinstance(e, Exception):
        LOGGER.error("internal error: %s: %s", type(e).__name__, e)
        return 500, f"internal error: {type(e).__name__}: {e}", None
    raise e


__all__ = ["Call", "InferCore", "failure"]
