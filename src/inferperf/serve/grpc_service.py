"""``inference.GRPCInferenceService`` (KServe v2 / Triton gRPC) served beside HTTP, on the same event loop, over
the same models, batcher, metrics, limits and API key.

Triton's ``grpc_service.proto`` is a superset of KServe's ``grpc_predict_v2.proto`` with the same field numbers,
so one service answers both kinds of client (tritonclient.grpc, perf_analyzer ``-i grpc``, KServe's
``InferenceGRPCClient``). The messages come from the vendored descriptor (:mod:`inferperf.workload.triton_protos`), so no generated
``_pb2_grpc`` code is imported; the HTTP/2 side is :mod:`.grpc_h2` (served from the event loop, no gRPC core
threads).

What each RPC does:

- ``ServerLive`` / ``ServerReady``: always live; ready as ``/v2/health/ready`` (every model loaded and warm,
  not shutting down). Neither needs the API key, as ``/v2/health/*`` does not.
- ``ModelReady``: the model (version) is served and ready; an unknown model is not ready (Triton's answer).
- ``ServerMetadata``, ``ModelMetadata``, ``ModelConfig`` (the served ``/config`` JSON as Triton's
  ``ModelConfig`` message), ``ModelStatistics`` (live counters; an empty name: every model),
  ``RepositoryIndex`` / ``RepositoryModelLoad`` / ``RepositoryModelUnload``: the HTTP routes' documents.
- ``ModelInfer``: one request through :class:`~inferperf.serve.infer_core.InferCore` (the HTTP route's path:
  the same checks, queue, batches and metrics), raw or typed contents in (:mod:`.grpc_tensors`), raw out.
- ``ModelStreamInfer``: every request of the stream runs as ``ModelInfer`` does, concurrently; each answer (or
  its ``error_message``) is written as it is ready; a refused request does not end the stream.
- ``LogSettings``: Triton's logging extension (:mod:`.log_settings`), as ``/v2/logging``.
- ``SystemSharedMemoryStatus`` / ``Register`` / ``Unregister``: Triton's system shared memory (:mod:`.shm`,
  ``--allow-client-shm``; without it PERMISSION_DENIED naming the flag), the HTTP routes' checks and words; inputs
  and outputs of ModelInfer name regions in their parameters (:mod:`.grpc_tensors`). The CUDA ones answer a CPU
  server's empty state (no region; register refused).
- ``TraceSetting`` answers ``UNIMPLEMENTED`` naming what is not served.

A refusal carries the status code Triton's gRPC server uses for the same fault (:data:`CODES`: 400
``INVALID_ARGUMENT``, 404 ``NOT_FOUND``, 503 ``UNAVAILABLE`` for back-pressure, ...) and the same message as
HTTP. A cancelled RPC cancels its request's task, which leaves the batcher's queue as a disconnected HTTP
client's does. The protobuf message is parsed by gRPC before the handler runs, so the model's decode time
(``inferperf_decode_duration_seconds``) holds the tensor checks and views, not the protobuf parse.

Sources: triton-inference-server/common ``protobuf/grpc_service.proto``; Triton's ``src/grpc/`` (status codes);
https://github.com/kserve/open-inference-protocol (``grpc_predict_v2.proto``).
"""

from __future__ import annotations

import asyncio
import hmac
from collections.abc import AsyncIterator, Callable
from typing import Any, NamedTuple

import grpc
from google.protobuf import json_format

from .errors import Cancelled, ServeError
from .grpc_tensors import decode_infer, encode_infer
from .infer_core import InferCore, failure
from .load_override import from_grpc
from .log_settings import LogSettingsError
from .shm import ShmError
from .triton import model_config, model_metadata, server_metadata
from .tensor_types import ProtocolError
from ..workload.triton_protos import message, service

SERVICE = "inference.GRPCInferenceService"
#: HTTP status of a refusal -> the gRPC status code Triton answers for the same fault
CODES = {400: grpc.StatusCode.INVALID_ARGUMENT, 401: grpc.StatusCode.UNAUTHENTICATED,
         403: grpc.StatusCode.PERMISSION_DENIED, 404: grpc.StatusCode.NOT_FOUND, 409: grpc.StatusCode.ALREADY_EXISTS,
         413: grpc.StatusCode.RESOURCE_EXHAUSTED, 499: grpc.StatusCode.CANCELLED, 500: grpc.StatusCode.INTERNAL,
         501: grpc.StatusCode.UNIMPLEMENTED, 503: grpc.StatusCode.UNAVAILABLE,
         504: grpc.StatusCode.DEADLINE_EXCEEDED}  # fmt: skip
#: requests of one ModelStreamInfer stream running or answered but not yet written
STREAM_IN_FLIGHT = 64
#: RPCs that need no API key (the HTTP server leaves /v2/health/* open)
OPEN_RPCS = ("ServerLive", "ServerReady")
#: RPCs of the service not served, and why
NOT_SERVED = {"TraceSetting": "tracing"}


class Rpc(NamedTuple):
    """One RPC as the front runs it: ``run(request, context)`` (a coroutine; for a ``streaming`` one,
    ``run(requests, context)`` an async generator of answers), ``parse(bytes) -> request``,
    ``serialize(answer) -> bytes``."""

    streaming: bool
    parse: Callable[[Any], Any]
    run: Callable[..., Any]
    serialize: Callable[[Any], bytes]


class Sized(NamedTuple):
    """A request ``message`` parsed from ``nbytes`` bytes on the wire."""

    message: Any
    nbytes: int


def _sized(msg_type: Any) -> Callable[[bytes], Sized]:
    """A request deserializer that keeps the message's wire size beside it."""
    parse = msg_type.FromString
    return lambda data: Sized(parse(data), len(data))


def grpc_code(status: int) -> grpc.StatusCode:
    """The gRPC status code for an HTTP status (:data:`CODES`; another 5xx is INTERNAL, another 4xx
    INVALID_ARGUMENT)."""
    return CODES.get(status, grpc.StatusCode.INTERNAL if status >= 500 else grpc.StatusCode.INVALID_ARGUMENT)


class Refused(Exception):
    """A non-infer RPC refused with an HTTP ``status`` and ``message`` (answered as :func:`grpc_code`)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


class GrpcService:
    """The service's handlers over a ``ServeApp`` (its models, metrics, repository control and API key).

    :meth:`rpcs` is what the front (:mod:`.grpc_h2`) serves.
    """

    def __init__(self, app: Any) -> None:
        self.app = app
        self.core = InferCore(app)

    # -- plumbing ---------------------------------------------------------------------------------------------
    def rpcs(self) -> dict[str, Rpc]:
        """Every RPC of ``inference.GRPCInferenceService`` by its path (``/inference.GRPCInferenceService/NAME``),
        with its messages' (de)serialisers, for :class:`~.grpc_front.GrpcFront`."""
        out = {}
        for m in service().methods:
            req, resp = message(m.input_type.full_name), message(m.output_type.full_name)
            # infer requests keep the size of their wire bytes (the body limit; ByteSize() would re-encode them)
            read = _sized(req) if m.name in ("ModelInfer", "ModelStreamInfer") else req.FromString
            out[f"/{SERVICE}/{m.name}"] = Rpc(m.name == "ModelStreamInfer", read, self._method(m.name),
                                              resp.SerializeToString)
        return out

    def _method(self, name: str) -> Callable[..., Any]:
        if name == "ModelStreamInfer":
            return self._stream_infer
        if name in NOT_SERVED:
            what = NOT_SERVED[name]

            async def not_served(request: Any, context: Any) -> Any:
                await context.abort(grpc.StatusCode.UNIMPLEMENTED,
                                    f"{name}: {what} is not served by inferperf (see docs/grpc.md)")
            return not_served
        build = getattr(self, "_" + name)
        out_type = message(next(m for m in service().methods if m.name == name).output_type.full_name)
        open_rpc = name in OPEN_RPCS

        async def unary(request: Any, context: Any) -> Any:
            if not open_rpc:
                await self._authorize(context)
            try:
                return await build(request, context, out_type)
            except Refused as e:
                await context.abort(grpc_code(e.status), str(e))
            except ServeError as e:  # a lookup's 404 / 503, a refused repository request
                status, text, _ = failure(e)
                await context.abort(grpc_code(status), text)
        return unary

    async def _authorize(self, context: Any) -> None:
        """Abort with UNAUTHENTICATED unless the call's metadata carries ``authorization: Bearer KEY`` (the
        server's ``--api-key``), compared in constant time as the HTTP middleware does."""
        auth = getattr(self.app, "_auth", None)
        if auth is None:
            return
        given = next((v for k, v in context.invocation_metadata() or () if k == "authorization"), "")
        given_b = given.encode() if isinstance(given, str) else bytes(given)
        if not hmac.compare_digest(given_b, f"Bearer {auth[0]}".encode()):
            what = "missing" if not given else "wrong"
            await context.abort(grpc.StatusCode.UNAUTHENTICATED, f"{what} API key: send metadata authorization: "
                                                                 "Bearer <key> (the server's --api-key)")

    # -- inference --------------------------------------------------------------------------------------------
    async def infer(self, request: Any, context: Any = None) -> tuple[Any, int, str]:
        """One ``ModelInferRequest`` (or a :class:`Sized` one, as the server's deserializer hands it) through the
        infer core: ``(response, 200, "")``, or ``(None, status, message)`` for a refusal or failure (the server
        keeps serving).

        Raises:
            asyncio.CancelledError: the RPC was cancelled (counted as status 499, as a client that went away).
        """
        core = self.core
        size = request.nbytes if isinstance(request, Sized) else None
        request = request.message if isinstance(request, Sized) else request
        try:
            model = core.open(request.model_name, request.model_version or None)
        except ServeError as e:  # unknown model or version (404), being unloaded (503)
            status, text, _ = failure(e)
            return None, status, text
        call = core.start(model)
        try:
            size, limit = request.ByteSize() if size is None else size, model.options.max_body_bytes
            if size > limit:  # HTTP's body limit, per model (gRPC's own limit is the server's largest)
                raise ProtocolError(f"request message of {size} bytes is over the limit ({limit}): raise "
                                    "--max-body-bytes", 413)
            shm = self.app.shm if self.app.shm.allowed else None
            req = core.decode(model, lambda i, o, mbs: decode_infer(request, i, o, mbs, shm))

            async def gone() -> bool:
                return context is not None and context.cancelled()

            outputs = await core.run(model, req, gone)
            resp = core.encode(model, lambda: encode_infer(model.name, model.version, req, outputs, shm))
            call.status = 200
            return resp, 200, ""
        except asyncio.CancelledError:
            call.status = Cancelled.status
            raise
        except Exception as e:  # a refusal, a runtime failure, or a bug: answer it and keep serving
            call.status, text, _ = failure(e)
            return None, call.status, text
        finally:
            core.finish(call)

    async def _ModelInfer(self, request: Any, context: Any, out: Any) -> Any:
        resp, status, text = await self.infer(request, context)
        if resp is None:
            raise Refused(status, text)
        return resp

    async def _stream_infer(self, requests: AsyncIterator[Any], context: Any) -> AsyncIterator[Any]:
        """``ModelStreamInfer``: each request of the stream as :meth:`infer`, concurrently (at most
        :data:`STREAM_IN_FLIGHT` not yet answered: past that the stream's requests wait, and the connection stops
        being read once they pile up); answers in the order they are ready, a refusal as ``error_message``; the
        stream ends when the client's half ends and every answer is written (a cancelled stream cancels what
        still runs)."""
        await self._authorize(context)
        stream_resp = message("inference.ModelStreamInferResponse")
        ready: asyncio.Queue[Any] = asyncio.Queue()
        running: set[asyncio.Task[Any]] = set()
        slots = asyncio.Semaphore(STREAM_IN_FLIGHT)  # taken per request until its answer is written

        async def one(request: Any) -> None:
            resp, _, text = await self.infer(request, context)
            await ready.put(stream_resp(infer_response=resp) if resp is not None else stream_resp(error_message=text))

        async def read() -> None:
            try:
                async for request in requests:
                    await slots.acquire()  # a client that does not read its answers stops being read
                    task = asyncio.ensure_future(one(request))
                    running.add(task)
                    task.add_done_callback(running.discard)
                while running:
                    await asyncio.gather(*list(running))
            finally:
                await ready.put(None)

        reader = asyncio.ensure_future(read())
        try:
            while (item := await ready.get()) is not None:
                yield item
                slots.release()
            await reader
        finally:
            for task in [reader, *running]:
                task.cancel()

    # -- documents ----------------------------------------------------------------------------------------------
    async def _ServerLive(self, request: Any, context: Any, out: Any) -> Any:
        return out(live=True)

    async def _ServerReady(self, request: Any, context: Any, out: Any) -> Any:
        return out(ready=bool(self.app.ready))

    async def _ModelReady(self, request: Any, context: Any, out: Any) -> Any:
        try:
            model = self.app.lookup(request.name, request.version or None)
        except ServeError:
            return out(ready=False)  # Triton: an unknown model is not ready, not an error
        return out(ready=bool(model.ready and not self.app.shutting_down))

    async def _ServerMetadata(self, request: Any, context: Any, out: Any) -> Any:
        doc = server_metadata()
        if self.app.control is not None:
            doc["extensions"] = [*doc["extensions"], "model_repository"]
        return json_format.ParseDict(doc, out())

    async def _ModelMetadata(self, request: Any, context: Any, out: Any) -> Any:
        return json_format.ParseDict(model_metadata(self.app.lookup(request.name, request.version or None)), out())

    async def _ModelConfig(self, request: Any, context: Any, out: Any) -> Any:
        model = self.app.lookup(request.name, request.version or None)
        try:
            config = json_format.ParseDict(model_config(model), message("inference.ModelConfig")())
        except json_format.ParseError as e:  # a bug in the served document: said, not an UNKNOWN with no words
            raise Refused(500, f"model '{model.name}': its configuration does not convert to Triton's ModelConfig "
                               f"({e})") from None
        return out(config=config)

    async def _ModelStatistics(self, request: Any, context: Any, out: Any) -> Any:
        if request.name:
            models = [self.app.lookup(request.name, request.version or None)]
        else:
            models = self.app.all_models()
        doc = {"model_stats": [m.stats() for m in models]}
        return json_format.ParseDict(doc, out(), ignore_unknown_fields=True)

    def _control(self) -> Any:
        if self.app.control is None:
            raise Refused(400, "this server serves no model repository: start it with --model-repository DIR")
        return self.app.control

    async def _LogSettings(self, request: Any, context: Any, out: Any) -> Any:
        """Triton's logging extension: the settings named in the request changed (all or none), every setting
        answered (bool_param, uint32_param or string_param by its type)."""
        changes = {}
        for key in request.settings:
            which = request.settings[key].WhichOneof("parameter_choice")
            if which is not None:  # a key without a value changes nothing (tritonclient sends None that way)
                changes[key] = getattr(request.settings[key], which)
        try:
            values = self.app.log_settings.update(changes)
        except LogSettingsError as e:
            raise Refused(400, str(e)) from None
        resp = out()
        for key, value in values.items():
            kind = "bool_param" if type(value) is bool else "uint32_param" if type(value) is int else "string_param"
            setattr(resp.settings[key], kind, value)
        return resp

    # -- system shared memory (Triton's extension; serve/shm.py) ----------------------------------------------------
    async def _SystemSharedMemoryStatus(self, request: Any, context: Any, out: Any) -> Any:
        try:
            regions = self.app.shm.status(request.name or None)
        except ShmError as e:
            raise Refused(e.status, str(e)) from None
        return json_format.ParseDict({"regions": {r["name"]: r for r in regions}}, out())

    async def _SystemSharedMemoryRegister(self, request: Any, context: Any, out: Any) -> Any:
        try:
            self.app.shm.register(request.name, request.key, request.offset, request.byte_size)
        except ShmError as e:
            raise Refused(e.status, str(e)) from None
        return out()

    async def _SystemSharedMemoryUnregister(self, request: Any, context: Any, out: Any) -> Any:
        try:
            await self.app.shm.unregister(request.name or None)
        except ShmError as e:
            raise Refused(e.status, str(e)) from None
        return out()

    async def _CudaSharedMemoryStatus(self, request: Any, context: Any, out: Any) -> Any:
        if request.name:  # a CPU server holds no CUDA region (the HTTP routes' answers)
            raise Refused(404, f"Unable to find cuda shared memory region: '{request.name}'")
        return out()

    async def _CudaSharedMemoryRegister(self, request: Any, context: Any, out: Any) -> Any:
        raise Refused(400, "CUDA shared memory is not served (a CPU server): use system shared memory")

    async def _CudaSharedMemoryUnregister(self, request: Any, context: Any, out: Any) -> Any:
        return out()

    async def _RepositoryIndex(self, request: Any, context: Any, out: Any) -> Any:
        return json_format.ParseDict({"models": self._control().index(bool(request.ready))}, out(),
                                     ignore_unknown_fields=True)

    async def _RepositoryModelLoad(self, request: Any, context: Any, out: Any) -> Any:
        control = self._control()
        await control.load(request.model_name, from_grpc(request.model_name, request.parameters))
        return out()

    async def _RepositoryModelUnload(self, request: Any, context: Any, out: Any) -> Any:
        await self._control().unload(request.model_name)
        return out()


__all__ = ["CODES", "GrpcService", "NOT_SERVED", "OPEN_RPCS", "Rpc", "SERVICE", "STREAM_IN_FLIGHT", "grpc_code"]
