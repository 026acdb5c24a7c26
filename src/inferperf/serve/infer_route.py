"""``POST /v2/models/{name}[/versions/{v}]/infer`` as a pure-ASGI endpoint, and the front that routes to it first.

The infer route carries nearly all of a server's traffic, so it skips what the other routes share: Starlette's
error and exception middleware, its router (a regular-expression match per route until the infer one, near
the end of the list), its ``Request``/``Response`` objects (``Request.is_disconnected`` entered an anyio
cancel scope for every request: ~16 us), and the second task and ``asyncio.wait`` that raced the model call
against the client's disconnect (:class:`DisconnectWatch`; issue 29, measured in BENCHMARKS.md, "Issue 29").
:class:`InferFirst` sends ``POST`` requests whose path is an infer path straight to :class:`InferEndpoint`
and everything else to the Starlette app; the same endpoint is also the Starlette route's app, which answers
405 for other methods. Answers are those of the Starlette route it replaced: ``{"error": ...}`` with the
status of a :class:`ProtocolError` (400, 413), a :class:`ServeError` (404, 499, 503 with ``Retry-After``,
504) or a runtime failure (500), and a 500 naming any other exception, after which the server keeps serving.
A body sent with ``Content-Encoding: gzip | deflate`` is decoded (bounded by the body limit) and an answer is
compressed when ``Accept-Encoding`` asks (:mod:`.content_coding`; both inside the decode and encode times).
"""

from __future__ import annotations

import asyncio
from typing import Any

import orjson
from starlette.requests import ClientDisconnect
from starlette.types import ASGIApp, Receive, Scope, Send

from .content_coding import accepted, compress, decompress
from .errors import Cancelled, ServeError
from .infer_core import InferCore, failure
from .protocol import HEADER_LENGTH, decode_request, encode_response
from .tensor_types import ProtocolError

_HEADER_LENGTH = HEADER_LENGTH.encode()


def infer_path_params(path: str) -> dict[str, str] | None:
    """``{"model_name": ...[, "model_version": ...]}`` when ``path`` is an infer path, else None.

    The same paths as Starlette's routes ``/v2/models/{model_name}/infer`` and
    ``/v2/models/{model_name}/versions/{model_version}/infer`` (each parameter a non-empty segment without
    ``/``), so a path either router takes goes to the same endpoint.
    """
    if not path.startswith("/v2/models/") or not path.endswith("/infer"):
        return None
    parts = path[11:-6].split("/")
    if len(parts) == 1 and parts[0]:
        return {"model_name": parts[0]}
    if len(parts) == 3 and parts[1] == "versions" and parts[0] and parts[2]:
        return {"model_name": parts[0], "model_version": parts[2]}
    return None


class InferFirst:
    """Pure-ASGI front: ``POST`` to an infer path goes to ``endpoint``, anything else to ``app``."""

    def __init__(self, app: ASGIApp, endpoint: InferEndpoint) -> None:
        self.app = app
        self.endpoint = endpoint

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["method"] == "POST":
            params = infer_path_params(scope["path"])
            if params is not None:
                scope["path_params"] = params
                await self.endpoint(scope, receive, send)
                return
        await self.app(scope, receive, send)


def _header(scope: Scope, name: bytes) -> str | None:
    """The first value of request header ``name`` (lower case), as Starlette's ``request.headers.get``."""
    for k, v in scope["headers"]:
        if k == name:
            return v.decode("latin-1")
    return None


_JSON_TYPE = ((b"content-type", b"application/json"),)


class Answer:
    """One whole response: ``status``, ``body``, headers ``head`` then ``content-length`` then ``tail``
    (Starlette's order); ``body`` None: nothing to send (the client went away)."""

    __slots__ = ("status", "body", "head", "tail")

    def __init__(self, status: int, body: bytes | None, head: list[tuple[bytes, bytes]],
                 tail: tuple[tuple[bytes, bytes], ...] = ()) -> None:
        self.status, self.body, self.head, self.tail = status, body, head, tail

    async def send(self, send: Send) -> None:
        """Hand the response to the transport (nothing when ``body`` is None)."""
        if self.body is None:
            return
        headers = [*self.head, (b"content-length", str(len(self.body)).encode()), *self.tail]
        await send({"type": "http.response.start", "status": self.status, "headers": headers})
        await send({"type": "http.response.body", "body": self.body})


def error_answer(message: str, status: int, retry_after_s: int | None = None) -> Answer:
    """``{"error": message}`` with ``status`` (and ``Retry-After`` when given): the same headers, in the same
    order, as the app's Starlette ``_error`` response."""
    head = [(b"retry-after", str(retry_after_s).encode())] if retry_after_s is not None else []
    return Answer(status, orjson.dumps({"error": message}), head, _JSON_TYPE)


def _failure_answer(e: Exception) -> Answer:
    """The answer to ``e``, with the status :func:`~inferperf.serve.infer_core.failure` gives it."""
    status, message, retry_after_s = failure(e)
    return error_answer(message, status, retry_after_s)


class InferEndpoint:
    """The infer route as an ASGI app over a ``ServeApp``: the body in, the answer out, and everything between
    in the transport-independent :class:`~inferperf.serve.infer_core.InferCore` (lookup, counting, checks,
    queueing, the status of a failure). The path parameters come in ``scope["path_params"]`` (set by
    :class:`InferFirst` or by Starlette's router).

    The request's time (``inferperf_request_duration_seconds``, the serve Result's ``request_ms``) runs from
    the route receiving the request (its headers read; the body is read inside the time) to the answer being
    handed to the transport: it ends before the answer is sent, so a client that reads slowly, or a send that
    waits on flow control, does not count as the server's time.
    """

    def __init__(self, app: Any) -> None:
        self.app = app
        self.core = InferCore(app)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        params = scope["path_params"]
        try:
            model = self.core.open(params["model_name"], params.get("model_version"))
        except ServeError as e:  # unknown model or version (404), being unloaded (503)
            await _failure_answer(e).send(send)
            return
        call = self.core.start(model)
        try:
            answer = await self._answer(scope, receive, model)
            call.status = answer.status
        finally:
            self.core.finish(call)  # the request's time ends here: the answer is handed to the transport next
        await answer.send(send)

    async def _answer(self, scope: Scope, receive: Receive, model: Any) -> Answer:
        """The answer to one infer request (a refusal or failure answered too: the server keeps serving)."""
        core = self.core
        try:
            limit = model.options.max_body_bytes
            body = await read_body(scope, receive, limit)
            header_length = _header(scope, _HEADER_LENGTH)
            coding = _header(scope, b"content-encoding")  # the header length counts the decoded JSON
            shm = self.app.shm if self.app.shm.allowed else None
            req = core.decode(model, lambda inputs, outputs, mbs: decode_request(
                decompress(body, coding, limit) if coding else body, header_length, inputs, outputs, mbs, shm))
            watch = DisconnectWatch(receive)
            outputs = await watch.race(core.run(model, req, watch.is_disconnected,
                                                scope.get("state", {}).get("access")), model.name)
            answer_in = accepted(_header(scope, b"accept-encoding"))
            data, headers = core.encode(model, lambda: _encoded(answer_in, *encode_response(
                model.name, model.version, req, outputs, model.options.json_nonfinite, shm)))
            return Answer(200, data, [(k.encode(), v.encode()) for k, v in headers.items()])
        except ClientDisconnect:  # the client went away mid-upload: nobody to answer, and not the server's error
            return Answer(Cancelled.status, None, [])
        except Exception as e:  # a refusal, a runtime failure, or a bug: answer it and keep serving
            return _failure_answer(e)


def _encoded(coding: str | None, data: bytes, headers: dict[str, str]) -> tuple[bytes, dict[str, str]]:
    """The answer in ``coding`` (None: as it is), with its ``Content-Encoding``."""
    if coding is None:
        return data, headers
    return compress(data, coding), {**headers, "Content-Encoding": coding, "Vary": "Accept-Encoding"}


class DisconnectWatch:
    """One request's disconnect watcher: while :meth:`race` awaits the model call in the request's task, one
    watcher task reads the request's ASGI messages; on ``http.disconnect`` (uvicorn posts it from
    connection_lost) it marks the client gone and cancels the request's task, so a still-queued request is
    dropped before its batch runs (issue 12 item 8). :meth:`is_disconnected` is what the batcher asks
    before a batch runs: True once the watcher has read the disconnect (a flag: no ASGI call of its own).
    """

    __slots__ = ("went_away", "_receive", "_task")

    def __init__(self, receive: Receive) -> None:
        self.went_away = False
        self._receive = receive
        self._task: asyncio.Task[Any] | None = None

    async def is_disconnected(self) -> bool:
        """Whether the client went away (the watcher read ``http.disconnect``)."""
        return self.went_away

    async def _watch(self) -> None:
        receive = self._receive
        while (await receive()).get("type") != "http.disconnect":
            pass
        self.went_away = True
        if self._task is not None:
            self._task.cancel()  # the batcher drops the request if still queued (cancelled counter, queue gauge -1)

    async def race(self, infer: Any, name: str) -> Any:
        """Await the coroutine ``infer`` in this task while the watcher runs; returns its result.

        Raises:
            Cancelled: the client went away before the answer was ready.
            asyncio.CancelledError: this task was cancelled from elsewhere (server shutdown).
        """
        task = self._task = asyncio.current_task()
        watcher = asyncio.get_running_loop().create_task(self._watch())
        try:
            return await infer
        except asyncio.CancelledError:
            if not self.went_away or task is None:
                raise
            task.uncancel()
            raise Cancelled(name) from None
        finally:
            self._task = None
            watcher.cancel()


async def read_body(scope: Scope, receive: Receive, limit: int) -> bytes:
    """The whole body, refusing (413) one over ``limit`` bytes by Content-Length or while streaming.

    Raises:
        ProtocolError: 413 over the limit.
        ClientDisconnect: the client went away before the body arrived (Starlette's, as its ``Request.body``).
    """
    length = _header(scope, b"content-length")
    if length is not None and length.isascii() and length.isdigit() and int(length) > limit:
        raise ProtocolError(f"request body of {length} bytes is over the limit ({limit}): raise --max-body-bytes", 413)
    chunks: list[bytes] = []
    total = 0
    while True:
        message = await receive()
        if message["type"] == "http.request":
            chunk = message.get("body", b"")
            if chunk:
                total += len(chunk)
                if length is None and total > limit:
                    raise ProtocolError(
                        f"request body is over the limit ({limit} bytes): raise --max-body-bytes", 413)
                chunks.append(chunk)
            if not message.get("more_body", False):
                break
        elif message["type"] == "http.disconnect":
            raise ClientDisconnect()
    return chunks[0] if len(chunks) == 1 else b"".join(chunks)
