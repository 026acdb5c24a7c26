"""A KServe v2 / Triton gRPC server as a load target: ``inferperf load grpc://HOST:PORT``.

The scheme chooses the protocol (``grpc://``; HTTP targets keep ``http[s]://``). The target is read once before
the load over ``inference.GRPCInferenceService`` (the vendored descriptor, :mod:`inferperf.workload.triton_protos`):
``ServerMetadata``, ``ModelMetadata`` (inputs, datatypes, shapes) and, when served, ``ModelConfig``
(``max_batch_size``; a server without it, as MLServer, needs none) and ``ModelStatistics`` (differenced over each
step as HTTP's ``/stats``). The payload pool is the same seeded inputs the HTTP load builds
(:func:`~.target.payload_arrays`), each serialized once, before any request is timed, as a ``ModelInferRequest``
with raw contents (``raw_input_contents``, little-endian, BYTES elements behind their 4-byte lengths).

Each connection of the driver is one TCP connection, so ``--concurrency N`` holds N connections as the HTTP client
does. Unary calls go on a bare HTTP/2 connection (:mod:`.grpc_h2`: prebuilt frames on an asyncio protocol; answers
are not parsed, their success is their ``grpc-status``); ``--streaming`` uses one ``grpc.aio`` channel
(``grpc.use_local_subchannel_pool``: channels to one address otherwise share a subchannel) with one
``ModelStreamInfer`` stream per connection, one request in flight on it (perf_analyzer's ``--streaming``), whose
answers carry ``error_message`` and are parsed for it. Message limits are lifted (Triton's clients set INT32_MAX). A refusal is counted by its gRPC
code (``grpc_unavailable``, ...) with the HTTP status of the same fault, so the driver's rules (a run of 4xx
refusals stops a step) apply unchanged. ``--header K:V`` values are sent as call metadata (lower-cased keys).

Sources: triton-inference-server/common ``protobuf/grpc_service.proto``; gRPC's ``grpc.aio`` API and channel
arguments (``grpc.use_local_subchannel_pool``, ``grpc.max_*_message_length``).
"""

from __future__ import annotations

import asyncio
from typing import Any
from urllib.parse import urlsplit

from ..errors import UsageError
from .http1 import ERROR_BODY_BYTES, Response
from .options import LoadConfig
from .sequence_load import sequence_payloads
from .target import TargetInfo, parse_headers, payload_arrays
from ..workload.raw_tensors import raw_contents
from .transport import ConnectError

SCHEME = "grpc"
INFER = "/inference.GRPCInferenceService/ModelInfer"
STREAM_INFER = "/inference.GRPCInferenceService/ModelStreamInfer"
#: channel arguments of every load channel: its own TCP connection, no message limits
CHANNEL_OPTIONS = (("grpc.use_local_subchannel_pool", 1), ("grpc.max_receive_message_length", -1),
                   ("grpc.max_send_message_length", -1))


def is_grpc(url: str) -> bool:
    """Whether ``url`` names a gRPC target (``grpc://``)."""
    return url.lower().startswith(SCHEME + "://")


def grpc_address(url: str) -> str:
    """``HOST:PORT`` of ``grpc://HOST[:PORT]`` (port 8001, Triton's, when absent).

    Raises:
        UsageError: no host, or a path after the address.
    """
    parts = urlsplit(url)
    if parts.scheme.lower() != SCHEME or not parts.hostname:
        raise UsageError(f"target {url!r}: give grpc://HOST:PORT, e.g. grpc://127.0.0.1:8001")
    if parts.path not in ("", "/"):
        raise UsageError(f"target {url!r}: a gRPC target has no path: give grpc://HOST:PORT")
    host = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
    return f"{host}:{parts.port or 8001}"


def status_of(code: Any) -> int:
    """The HTTP status of the same fault as gRPC ``code`` (Triton's mapping; 500 for the rest)."""
    import grpc

    c = grpc.StatusCode
    table = {c.OK: 200, c.INVALID_ARGUMENT: 400, c.FAILED_PRECONDITION: 400, c.OUT_OF_RANGE: 400,
             c.UNAUTHENTICATED: 401, c.PERMISSION_DENIED: 403, c.NOT_FOUND: 404, c.ALREADY_EXISTS: 409,
             c.ABORTED: 409, c.RESOURCE_EXHAUSTED: 413, c.CANCELLED: 499, c.UNIMPLEMENTED: 501,
             c.UNAVAILABLE: 503, c.DEADLINE_EXCEEDED: 504}  # fmt: skip
    return table.get(code, 500)


def call_metadata(cfg: LoadConfig) -> tuple[tuple[str, str], ...]:
    """``--header K:V`` values as gRPC call metadata (keys lower-cased, as gRPC requires)."""
    return tuple((k.lower(), v) for k, v in parse_headers(cfg.headers))


def _unary(channel: Any, rpc: str, metadata: Any, timeout_s: float, **fields: Any) -> Any:
    from inferperf.workload.triton_protos import message, service

    m = next(x for x in service().methods if x.name == rpc)
    req, resp = message(m.input_type.full_name), message(m.output_type.full_name)
    call = channel.unary_unary(f"/inference.GRPCInferenceService/{rpc}", request_serializer=req.SerializeToString,
                               response_deserializer=resp.FromString)
    return call(req(**fields), timeout=timeout_s, metadata=metadata or None)


def _tensors(tensors: Any) -> list[dict[str, Any]]:
    return [{"name": t.name, "datatype": t.datatype, "shape": [int(d) for d in t.shape]} for t in tensors]


def read_grpc_target(cfg: LoadConfig, timeout_s: float = 10.0) -> TargetInfo:
    """Read a ``grpc://`` target (metadata, config, statistics served) and build its payload pool.

    Raises:
        UsageError: unreachable target, unknown model (the server's words), a model whose metadata lists no
            inputs, unresolved shapes, unreadable --input-data (one line each).
    """
    import grpc
    from google.protobuf import json_format

    if not cfg.model:
        raise UsageError("a gRPC target needs --model NAME")
    addr, md = grpc_address(cfg.url), call_metadata(cfg)
    with grpc.insecure_channel(addr, options=list(CHANNEL_OPTIONS)) as ch:
        try:
            grpc.channel_ready_future(ch).result(timeout=timeout_s)
        except grpc.FutureTimeoutError:
            raise UsageError(f"target {cfg.url} is unreachable (no gRPC connection within {timeout_s:g} s): start the "
                             "server or fix the address") from None
        try:
            server_msg = _unary(ch, "ServerMetadata", md, timeout_s)
            server = {"name": server_msg.name, "version": server_msg.version, "extensions": list(server_msg.extensions)}
        except grpc.RpcError:
            server = {}
        try:
            meta = _unary(ch, "ModelMetadata", md, timeout_s, name=cfg.model)
        except grpc.RpcError as e:
            raise UsageError(f"model '{cfg.model}' is not served at {cfg.url} ({e.code().name}: {e.details()}): check "
                             "--model") from None
        try:
            config = json_format.MessageToDict(_unary(ch, "ModelConfig", md, timeout_s, name=cfg.model).config,
                                               preserving_proto_field_name=True)
        except grpc.RpcError:
            config = {}  # MLServer serves no ModelConfig: metadata is enough
        try:
            _unary(ch, "ModelStatistics", md, timeout_s, name=cfg.model)
            has_stats = True
        except grpc.RpcError:
            has_stats = False
    info = TargetInfo(kind="kserve", url=cfg.url, model=cfg.model, server=server,
                      metadata={"name": meta.name, "versions": list(meta.versions), "platform": meta.platform,
                                "inputs": _tensors(meta.inputs), "outputs": _tensors(meta.outputs)},
                      config=config, has_stats=has_stats, call_metadata=md,
                      stats_source=fetch_grpc_stats)  # fmt: skip
    arrays_list = payload_arrays(info, cfg)
    base = [infer_payload(cfg.model, arrays, info.dtypes) for arrays in arrays_list]

    def request(k: int, sid: int, start: bool, end: bool) -> bytes:  # protobuf: concatenated messages merge
        return base[k] + sequence_parameters(sid, start, end)

    seq = sequence_payloads(info, cfg, request, len(arrays_list))
    if seq is not None:
        info.payloads = seq
        return info
    if cfg.shared_memory != "system":
        info.payloads = base
        return info
    from .shm_client import grpc_pool, shm_payloads

    info.payloads = shm_payloads(info, cfg, grpc_pool(addr, md), arrays_list,
                                 lambda a, i, o: infer_payload(cfg.model, a, info.dtypes, i, o))
    return info


def infer_payload(model: str, arrays: dict[str, Any], datatypes: dict[str, str],
                  shm_inputs: dict[str, dict[str, Any]] | None = None,
                  shm_outputs: dict[str, dict[str, Any]] | None = None) -> bytes:
    """A serialized ``ModelInferRequest`` of ``arrays`` (name -> array) with raw contents, or, with
    ``shm_inputs`` / ``shm_outputs`` (name -> ``shared_memory_region`` / ``_offset`` / ``_byte_size``), naming
    shared-memory regions instead (no raw contents; the outputs requested into their regions)."""
    from inferperf.workload.triton_protos import message

    msg = message("inference.ModelInferRequest")(model_name=model)
    for name, arr in arrays.items():
        t = msg.inputs.add(name=name, datatype=datatypes[name], shape=arr.shape)
        if shm_inputs:
            _shm_parameters(t.parameters, shm_inputs[name])
        else:
            msg.raw_input_contents.append(raw_contents(arr))
    for name, params in (shm_outputs or {}).items():
        _shm_parameters(msg.outputs.add(name=name).parameters, params)
    return msg.SerializeToString()


def sequence_parameters(sequence_id: int, start: bool, end: bool) -> bytes:
    """A serialized ``ModelInferRequest`` holding only Triton's sequence parameters (int64 ``sequence_id``, bool
    ``sequence_start`` / ``sequence_end``): appended to a serialized request, it merges into its parameters."""
    from inferperf.workload.triton_protos import message

    msg = message("inference.ModelInferRequest")()
    msg.parameters["sequence_id"].int64_param = sequence_id
    msg.parameters["sequence_start"].bool_param = start
    msg.parameters["sequence_end"].bool_param = end
    return msg.SerializeToString()


def _shm_parameters(target: Any, params: dict[str, Any]) -> None:
    """``shared_memory_region`` as a string_param, the offset and byte size as int64_param (Triton's types)."""
    for key, value in params.items():
        if isinstance(value, str):
            target[key].string_param = value
        else:
            target[key].int64_param = value


_COUNTS = frozenset({"count", "ns", "last_inference", "inference_count", "execution_count", "batch_size",
                     "cumm_memory_usage_byte"})


def _ints(doc: Any) -> Any:
    """A statistics document with its uint64 fields as ints (protobuf's JSON mapping writes them as strings)."""
    if isinstance(doc, dict):
        return {k: int(v) if k in _COUNTS and isinstance(v, str) else _ints(v) for k, v in doc.items()}
    if isinstance(doc, list):
        return [_ints(v) for v in doc]
    return doc


def fetch_grpc_stats(info: TargetInfo, metadata: Any = (), timeout_s: float = 5.0) -> dict[str, Any] | None:
    """The model's statistics entry over gRPC (``ModelStatistics``), as HTTP's ``/stats`` document's
    ``model_stats[0]`` (counts as ints), or None when not served or unreachable."""
    import grpc
    from google.protobuf import json_format

    try:
        with grpc.insecure_channel(grpc_address(info.url), options=list(CHANNEL_OPTIONS)) as ch:
            msg = _unary(ch, "ModelStatistics", metadata, timeout_s, name=info.model or "")
    except grpc.RpcError:
        return None
    for st in msg.model_stats:  # proto3: an absent duration is zero; HTTP's document writes every one
        for f in st.inference_stats.DESCRIPTOR.fields:
            getattr(st.inference_stats, f.name).SetInParent()
    doc = json_format.MessageToDict(msg, preserving_proto_field_name=True, always_print_fields_with_no_presence=True)
    stats = _ints(doc).get("model_stats") or []
    return dict(stats[0]) if stats else None


class GrpcConnection:
    """One load connection: a ``grpc.aio`` channel of its own (one TCP connection), sending prebuilt
    ``ModelInferRequest`` bytes unary, or on one ``ModelStreamInfer`` stream with ``streaming``."""

    def __init__(self, channel: Any, streaming: bool, metadata: Any) -> None:
        self.open = True
        self.channel, self.streaming, self.metadata = channel, streaming, metadata or None
        self._unary = channel.unary_unary(INFER)  # no (de)serializers: bytes in, bytes out
        self._stream_rpc = channel.stream_stream(STREAM_INFER)
        self._stream: Any = None
        self._loop = asyncio.get_running_loop()

    async def send(self, payload: bytes) -> Response:
        """Send ``payload`` and wait for its answer: ``Response(200, bytes)`` or a refusal by its gRPC code."""
        import grpc

        try:
            if not self.streaming:
                return Response(200, len(await self._unary(payload, metadata=self.metadata)))
            if self._stream is None:
                self._stream = self._stream_rpc(metadata=self.metadata)
            await self._stream.write(payload)
            raw = await self._stream.read()
        except grpc.aio.AioRpcError as e:
            if self.streaming:  # the stream ended with the error: a new one on the next send
                self._stream = None
            details = (e.details() or "").encode("utf-8", "replace")[:ERROR_BODY_BYTES]
            return Response(status_of(e.code()), 0, f"grpc_{e.code().name.lower()}", details)
        if raw is grpc.aio.EOF:
            self.close()
            return Response(0, 0, "disconnected")
        return self._stream_answer(raw)

    @staticmethod
    def _stream_answer(raw: bytes) -> Response:
        from inferperf.workload.triton_protos import message

        error = message("inference.ModelStreamInferResponse").FromString(raw).error_message
        if error:  # Triton answers a refused stream request in-band
            return Response(400, len(raw), "grpc_stream_error", error.encode("utf-8", "replace")[:ERROR_BODY_BYTES])
        return Response(200, len(raw))

    def close(self) -> None:
        """Close the channel (on its loop; idempotent)."""
        if not self.open:
            return
        self.open = False
        if self._stream is not None:
            self._stream.cancel()
        if not self._loop.is_closed():
            self._loop.create_task(self.channel.close())


def code_status(code: int) -> tuple[int, str]:
    """gRPC status code number -> (HTTP status of the same fault, error kind ``grpc_<name>``)."""
    import grpc

    sc = next((c for c in grpc.StatusCode if c.value[0] == code), grpc.StatusCode.UNKNOWN)
    return status_of(sc), f"grpc_{sc.name.lower()}"


class GrpcTransport:
    """Opens connections to a ``grpc://`` target: unary calls on a bare HTTP/2 connection of its own
    (:class:`~.grpc_h2.H2Connection`: prebuilt frames, a third of grpc.aio's client CPU per call), or a
    :class:`GrpcConnection` (grpc.aio, one ModelStreamInfer stream) with ``streaming``.

    Args:
        url: ``grpc://HOST:PORT``.
        streaming: ModelStreamInfer (one stream per connection) instead of unary ModelInfer.
        metadata: call metadata (``--header`` values).
        connect_timeout_s: deadline for one channel to connect.
    """

    def __init__(self, url: str, streaming: bool = False, metadata: Any = (), connect_timeout_s: float = 10.0,
                 clock: Any = None) -> None:
        from ..clock import SYSTEM_CLOCK
        from .grpc_h2 import request_block

        self.url, self.address = url, grpc_address(url)
        self.streaming, self.metadata, self.connect_timeout_s = streaming, tuple(metadata), connect_timeout_s
        self.clock = clock or SYSTEM_CLOCK
        self.block = request_block(INFER, self.address, self.metadata)

    async def connect(self) -> Any:
        """Open one connection (HTTP/2 preface and SETTINGS exchanged, or a grpc.aio channel connected).

        Raises:
            ConnectError: refused, unreachable, or not connected within ``connect_timeout_s``.
        """
        import grpc

        if not self.streaming:
            from .grpc_h2 import open_h2

            parts = urlsplit(self.url)
            try:
                return await open_h2(parts.hostname, parts.port or 8001, self.block, code_status, self.clock,
                                     self.connect_timeout_s)
            except (OSError, TimeoutError, ConnectionError) as e:
                raise ConnectError(f"{self.address}: {e}") from None

        channel = grpc.aio.insecure_channel(self.address, options=list(CHANNEL_OPTIONS))
        try:
            async with asyncio.timeout(self.connect_timeout_s):
                await channel.channel_ready()
        except TimeoutError:
            await channel.close()
            raise ConnectError(f"{self.address}: no gRPC connection within {self.connect_timeout_s:g} s") from None
        return GrpcConnection(channel, self.streaming, self.metadata)

    def describe(self) -> dict[str, Any]:
        """Client, target and the versions its figures depend on (grpcio, protobuf)."""
        import google.protobuf
        import grpc

        return {"client": "grpc.aio ModelStreamInfer" if self.streaming else "inferperf HTTP/2 ModelInfer", "url": self.url,
                "grpcio": grpc.__version__, "protobuf": google.protobuf.__version__}


__all__ = ["CHANNEL_OPTIONS", "GrpcConnection", "GrpcTransport", "call_metadata", "fetch_grpc_stats", "grpc_address",
           "infer_payload", "is_grpc", "read_grpc_target", "status_of"]
